"""Run the W3C SCXML 1.0 conformance suite (IRP) through the in-memory driver.

Every automated test of the manifest runs on the virtual clock: when a test is waiting,
the clock jumps to the next due delayed send; nothing ever sleeps. A test passes when the
document reaches its top-level ``<final id="pass">``.

    python -m conformance.runner [--suite ../shared/w3c] [--json report.json] [--only 144,147]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from lxml import etree

from conformance.loopback import LoopbackServer
from statecharts.core.errors import StatechartError
from statecharts.drivers.memory import MemoryDriver

DEFAULT_SUITE = Path(__file__).resolve().parent.parent.parent / "shared" / "w3c"
# A folder holding the suite somewhere else (instead of ../shared/w3c).
SUITE_ENV = "STATECHARTS_W3C_SUITE"
# "1" (set by .ci/run): a missing suite fails the conformance tests instead of skipping them.
REQUIRED_ENV = "STATECHARTS_W3C_REQUIRED"
SUITE_HELP = (
    "The W3C SCXML 1.0 conformance suite is the W3C's Implementation Report Plan test "
    "documents (manifest.xml, and scxml/testNNN.scxml converted to the ECMAScript datamodel "
    "with the W3C's confEcma.xsl). It is read in place from ../shared/w3c, a folder beside "
    "the project checkout (where this project's workplace and CI put it), and never copied "
    f"into the repository; {SUITE_ENV}=/path/to/w3c names another folder. See "
    "docs/conformance.md for where it comes from."
)
# Optional tests that need the Basic HTTP Event I/O Processor (Appendix C.2). The in-memory run
# runs them against a loopback HTTP server (conformance.loopback); a run without one (the
# durable runner, until its outbound delivery exists) reports them as pending. Mandatory tests
# in this numeric range (e.g. 525 or 530) do not need it and always run.
HTTP_TESTS = frozenset(
    {
        "201",
        "509",
        "510",
        "518",
        "519",
        "520",
        "521",
        "522",
        "523",
        "524",
        "525",
        "526",
        "527",
        "528",
        "529",
        "530",
        "531",
        "532",
        "533",
        "534",
        "567",
        "577",
    }
)
MAX_VIRTUAL_MS = 10 * 60 * 1000  # suite documents wait at most 30 s; give up at 10 min


@dataclass(frozen=True, slots=True)
class Case:
    test_id: str  # "144", or "403a" for multi-document tests
    assertion: str
    conformance: str  # "mandatory" | "optional"
    path: Path
    basichttp: bool = False  # needs the Basic HTTP Event I/O Processor


@dataclass(frozen=True, slots=True)
class Outcome:
    case: Case
    passed: bool
    reason: str
    seconds: float


class SuiteNotFound(FileNotFoundError):
    """The W3C suite is not where it was looked for; the message says what it is and where
    it comes from."""


def suite_required() -> bool:
    """Whether a missing suite is a failure (CI) rather than a reason to skip (a checkout
    without it)."""
    return os.environ.get(REQUIRED_ENV) == "1"


def find_suite(explicit: str | None = None) -> Path:
    """The folder holding the suite's ``manifest.xml``: ``explicit`` (``--suite``) or
    ``$STATECHARTS_W3C_SUITE`` if given (and nothing else then), otherwise
    ``../shared/w3c`` from the current directory or beside the project checkout."""
    chosen = explicit or os.environ.get(SUITE_ENV)
    beside = [Path.cwd().parent / "shared" / "w3c", DEFAULT_SUITE]
    candidates = [Path(chosen)] if chosen else beside
    for candidate in candidates:
        if (candidate / "manifest.xml").is_file():
            return candidate
    looked = ", ".join(str(candidate / "manifest.xml") for candidate in dict.fromkeys(candidates))
    raise SuiteNotFound(f"W3C suite not found (looked for {looked}). {SUITE_HELP}")


def load_cases(suite: Path, *, http: bool = False) -> tuple[list[Case], list[str]]:
    """Automated cases, and the ids of automated HTTP tests left pending (all of them unless
    ``http``: the caller runs them with a Basic HTTP processor)."""
    manifest = etree.parse(str(suite / "manifest.xml"))
    cases: list[Case] = []
    pending: list[str] = []
    for test in manifest.iter("test"):
        if test.get("manual") == "true":
            continue
        test_id = test.get("id", "")
        needs_http = test_id in HTTP_TESTS and test.get("conformance") == "optional"
        if needs_http and not http:
            pending.append(test_id)
            continue
        for start in test.iter("start"):
            uri = start.get("uri", "")
            stem = Path(uri).stem  # test403a
            cases.append(
                Case(
                    stem.removeprefix("test"),
                    test_id,
                    test.get("conformance", ""),
                    suite / "scxml" / f"{stem}.scxml",
                    needs_http,
                )
            )
    return cases, pending


def run_case(case: Case, server: LoopbackServer | None = None) -> Outcome:
    started = time.perf_counter()
    routes = {}
    io_processors = None
    session_id = f"w3c-{case.test_id}"
    if server is not None and case.basichttp:
        server.clear()
        routes = {"basichttp": server.route()}
        io_processors = server.io_processors(session_id)
    driver = MemoryDriver(routes=routes)
    if server is not None:
        server.driver = driver
    try:
        session = driver.start(
            driver.load_file(case.path), session_id=session_id, io_processors=io_processors
        )
        while not session.done:
            if server is not None and server.hand_over():  # posts that arrived meanwhile
                driver.run_until_idle()
                continue
            due = driver.next_due_ms()
            if due is None:
                break
            if due > MAX_VIRTUAL_MS:
                break
            driver.advance(due - driver.now_ms)
    except StatechartError as exc:
        return Outcome(case, False, f"{type(exc).__name__}: {exc}", time.perf_counter() - started)
    except Exception as exc:  # a crash is a failure of this test, reported, not fatal
        return Outcome(
            case, False, f"crash: {type(exc).__name__}: {exc}", time.perf_counter() - started
        )
    seconds = time.perf_counter() - started
    if session.final == "pass":
        return Outcome(case, True, "pass", seconds)
    if session.done:
        return Outcome(case, False, f"reached final {session.final!r} ({session.outcome})", seconds)
    where = ",".join(sorted(session.atomic_configuration))
    return Outcome(case, False, f"stuck in [{where}] with no pending events", seconds)


def run(suite: Path, only: set[str] | None = None) -> tuple[list[Outcome], list[str]]:
    """Run the suite; the Basic HTTP tests against a loopback server started for the run."""
    cases, pending = load_cases(suite, http=True)
    if only:
        cases = [c for c in cases if c.test_id in only or c.assertion in only]
    with LoopbackServer() as server:
        return [run_case(c, server) for c in cases], pending


def report(outcomes: list[Outcome], pending: list[str]) -> dict[str, object]:
    result: dict[str, object] = {}
    for level in ("mandatory", "optional"):
        chosen = [o for o in outcomes if o.case.conformance == level]
        result[level] = {
            "passed": sorted((o.case.test_id for o in chosen if o.passed), key=_key),
            "failed": {
                o.case.test_id: o.reason
                for o in sorted(chosen, key=lambda o: _key(o.case.test_id))
                if not o.passed
            },
        }
    result["pending"] = {
        "reason": "needs the Basic HTTP Event I/O Processor (a run without its server)",
        "tests": sorted(pending, key=_key),
    }
    return result


def _key(test_id: str) -> tuple[int, str]:
    digits = "".join(ch for ch in test_id if ch.isdigit())
    return int(digits or 0), test_id


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--suite", help=f"folder with manifest.xml (default ${SUITE_ENV} or ../shared/w3c)"
    )
    parser.add_argument("--json", help="write the JSON report here")
    parser.add_argument("--only", help="comma-separated test ids")
    args = parser.parse_args(argv)
    only = set(args.only.split(",")) if args.only else None
    try:
        suite = find_suite(args.suite)
    except SuiteNotFound as missing:
        print(missing, file=sys.stderr)
        return 2
    outcomes, pending = run(suite, only)
    for o in outcomes:
        if not o.passed:
            print(f"FAIL {o.case.test_id} ({o.case.conformance}): {o.reason}")
    data = report(outcomes, pending)
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=2) + "\n")
    for level in ("mandatory", "optional"):
        section = data[level]
        assert isinstance(section, dict)
        print(f"{level}: {len(section['passed'])} passed, {len(section['failed'])} failed")
    print(f"pending (Basic HTTP processor): {len(pending)} tests")
    passed = sum(o.passed for o in outcomes)
    print(f"{passed} passed, {len(outcomes) - passed} failed")
    return 0 if passed == len(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
