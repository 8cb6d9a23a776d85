"""Run the W3C SCXML suite through the durable stepper: every automated document.

Each document is stored with ``Chart.objects.load_file`` (the files it references are read
then and stored with it), started with ``statecharts.stepper.start`` and driven only by what
the database holds: pending outbox rows are delivered (``deliver_pending``: events between
executions, and the invocations app's child starts and cancels), then a fake clock jumps to
the due time of the next pending timer row, of the document's execution or of any child it
invoked, and ``timers.firing.fire_all_due`` fires it. Nothing sleeps: the clock is injected
both as ``now=`` and as ``STATECHARTS["CLOCK"]``. A document passes, as in
``conformance.runner``, when the execution reaches its top-level ``<final id="pass">``.

The categories are reported: "timers" (a delayed ``<send>`` or a ``<cancel>``), "invoke"
(an ``<invoke>``), "send" (undelayed sends only) and "core" (the rest). Documents that need
the Basic HTTP Event I/O Processor run when a server serves its inbound view
(``basichttp_url``: the tests use Django's live server), each execution started with its
signed address, its sends delivered by the ``basichttp`` route after the commit; without
one they are reported as pending, with the reason. W3C 201 is never run durably (not
applicable: see ``NOT_APPLICABLE_201``).

    python -m conformance.durable [--suite ../shared/w3c] [--json report.json] [--only 208,210]
        [--database-url URL]

Without ``--database-url`` the command line migrates a fresh temporary SQLite database.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lxml import etree

from conformance.runner import MAX_VIRTUAL_MS, Case, Outcome, _key, find_suite, load_cases

if TYPE_CHECKING:
    from statecharts.models import Execution

SCXML_NS = "{http://www.w3.org/2005/07/scxml}"
TIMERS = "timers"  # delayed <send> or <cancel>: the timer rows are exercised
INVOKE = "invoke"  # an <invoke>: invocation rows, child executions, the outbox
SEND = "send"  # undelayed <send> only: self-sends, #_internal, #_scxml_, the outbox
CORE = "core"  # none of those: the durable step itself
PENDING_HTTP = (
    "needs the Basic HTTP Event I/O Processor's inbound view served over HTTP: run with a "
    "server (basichttp_url; tests/conformance/test_w3c_durable.py uses Django's live server)"
)
NOT_APPLICABLE_201 = (
    "not applicable to the durable mode: its Basic HTTP send is performed after the step "
    "commits, so the immediate self-send drained inside the step always arrives first"
)
BASICHTTP_ROUTES = {
    "basichttp": {
        "ROUTE": "routes.basichttp.BasicHTTPRoute",
        "TYPES": ["http://www.w3.org/TR/scxml/#BasicHTTPEventProcessor", "basichttp"],
        # The loopback server only (the route denies every host by default).
        "OPTIONS": {"allowed_schemes": ["http"], "allowed_hosts": ["127.0.0.1", "localhost"]},
    }
}
MAX_ROUNDS = 1_000  # deliver + fire rounds per document; suite documents need a handful
T0 = datetime(2030, 1, 1, tzinfo=UTC)
GAP = timedelta(days=1)  # between documents, so one document's clock never overlaps another's


class FakeClock:
    """A settable clock: ``STATECHARTS["CLOCK"]`` calls it; the runner moves it forward."""

    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance_to(self, when: datetime) -> None:
        if when > self.now:  # never backwards
            self.now = when


@dataclass(frozen=True, slots=True)
class Selection:
    cases: list[tuple[Case, str]]  # the documents to run, with their category
    pending: dict[str, list[str]]  # reason -> test ids


def classify(path: Path) -> str:
    """The document's category (see the module docstring)."""
    tree = etree.parse(str(path))
    sends = list(tree.iter(f"{SCXML_NS}send"))
    delayed = any(s.get("delay") is not None or s.get("delayexpr") is not None for s in sends)
    cancels = next(tree.iter(f"{SCXML_NS}cancel"), None) is not None
    invokes = next(tree.iter(f"{SCXML_NS}invoke"), None) is not None
    if invokes:
        return INVOKE
    if delayed or cancels:
        return TIMERS
    return SEND if sends else CORE


def select(suite: Path, only: set[str] | None = None, *, basichttp: bool = False) -> Selection:
    """Every automated document of the suite, and what is left pending and why. With
    ``basichttp`` (an HTTP server serves the inbound view) the Basic HTTP documents run, but
    201 (not applicable durably)."""
    cases, http_pending = load_cases(suite, http=basichttp)
    chosen: list[tuple[Case, str]] = []
    for case in cases:
        if case.test_id == "201" and case.basichttp:
            continue
        if only is None or case.test_id in only or case.assertion in only:
            chosen.append((case, classify(case.path)))
    if basichttp:
        pending = {NOT_APPLICABLE_201: ["201"]}
    else:
        pending = {PENDING_HTTP: sorted(http_pending, key=_key)}
    return Selection(chosen, pending)


def run_case(case: Case, clock: FakeClock, basichttp_url: str | None = None) -> Outcome:
    """Run one document durably on ``clock`` (which the caller installed as the CLOCK); a
    Basic HTTP one with its address under ``basichttp_url`` (where the inbound view is)."""
    from routes import inbound
    from statecharts import stepper
    from statecharts.core.errors import StatechartError
    from statecharts.models import Chart, ExecutionStatus
    from timers.firing import fire_all_due
    from timers.models import Timer

    started = time.perf_counter()
    began = clock()
    cap = began + timedelta(milliseconds=MAX_VIRTUAL_MS)
    try:
        # Stored under its test's name: 21 documents share <scxml name="machineName">, and a
        # name's versions are an explicit act (statecharts.versions); the chart's own _name
        # is still its <scxml name>.
        chart = Chart.objects.load_file(case.path, name=f"w3c-{case.test_id}")
        if case.basichttp and basichttp_url:
            execution = inbound.start(chart, base_url=basichttp_url, now=clock())
        else:
            execution = stepper.start(chart, now=clock())
        for _round in range(MAX_ROUNDS):
            stepper.deliver_pending()
            execution.refresh_from_db()
            if execution.status != ExecutionStatus.ACTIVE:
                break
            # The next timer of this document: its own, or of a child it invoked (earlier
            # documents' leftovers are of finished executions, discarded when they fire).
            due = (
                Timer.objects.pending()
                .filter(due__gte=began)
                .order_by("due", "id")
                .values_list("due", flat=True)
                .first()
            )
            if due is None or due > cap:
                break
            clock.advance_to(due)
            if not fire_all_due(now=clock()).handled:
                break  # the due timer did not fire: nothing more can happen
        else:
            return Outcome(case, False, f"still running after {MAX_ROUNDS} rounds", _since(started))
    except StatechartError as exc:
        return Outcome(case, False, f"{type(exc).__name__}: {exc}", _since(started))
    except Exception as exc:  # a crash is a failure of this test, reported, not fatal
        return Outcome(case, False, f"crash: {type(exc).__name__}: {exc}", _since(started))
    passed, reason = decide(execution)
    return Outcome(case, passed, reason, _since(started))


def decide(execution: Execution) -> tuple[bool, str]:
    """Pass when the execution reached the top-level final ``pass`` (as conformance.runner)."""
    from statecharts.models import ExecutionStatus

    final = execution.configuration[0] if len(execution.configuration) == 1 else None
    if execution.status == ExecutionStatus.COMPLETED and final == "pass":
        return True, "pass"
    if execution.status != ExecutionStatus.ACTIVE:
        detail = f" ({execution.outcome})" if execution.outcome else ""
        why = f": {execution.failure_reason}" if execution.failure_reason else ""
        return False, f"reached final {final!r}{detail}, status {execution.status}{why}"
    where = ",".join(sorted(execution.configuration))
    return False, f"stuck in [{where}] with no timer left to fire"


def _since(started: float) -> float:
    return time.perf_counter() - started


def run(
    suite: Path,
    only: set[str] | None = None,
    *,
    start: datetime = T0,
    basichttp_url: str | None = None,
) -> tuple[list[Outcome], Selection]:
    """Run the durable subset against the configured database, on one fake clock.

    Each document starts a day after the previous one's clock, so a finished document's
    leftover timers fall due (and are discarded: their execution ended) before the next runs.
    ``basichttp_url``: where a server (in this process, on this database) serves
    ``routes.inbound``; the Basic HTTP documents then run, the route registered for loopback.
    """
    from django.conf import settings
    from django.test import override_settings

    selection = select(suite, only, basichttp=basichttp_url is not None)
    clock = FakeClock(start)
    configured: dict[str, Any] = dict(getattr(settings, "STATECHARTS", {}) or {})
    if basichttp_url is not None:
        configured["ROUTES"] = {**(configured.get("ROUTES") or {}), **BASICHTTP_ROUTES}
    outcomes: list[Outcome] = []
    # The documents' run-time references (W3C 216 builds a file: name in srcexpr) resolve in
    # their own folder, as conformance.runner's in-memory driver does.
    resolver = "statecharts.core.resolve.default_resolver"
    with override_settings(STATECHARTS={**configured, "CLOCK": clock, "RESOLVER": resolver}):
        for case, _category in selection.cases:
            outcomes.append(run_case(case, clock, basichttp_url))
            clock.advance_to(clock() + GAP)
    return outcomes, selection


def report(outcomes: list[Outcome], selection: Selection) -> dict[str, Any]:
    ordered = sorted(outcomes, key=lambda o: _key(o.case.test_id))
    categories = {case.test_id: category for case, category in selection.cases}
    return {
        "subset": {
            category: sorted((t for t, c in categories.items() if c == category), key=_key)
            for category in (TIMERS, INVOKE, SEND, CORE)
        },
        "passed": [o.case.test_id for o in ordered if o.passed],
        "failed": {o.case.test_id: o.reason for o in ordered if not o.passed},
        "pending": [
            {"reason": reason, "tests": tests} for reason, tests in selection.pending.items()
        ],
    }


def setup_django(database_url: str) -> None:
    """Configure Django for the command line on ``database_url`` and migrate it."""
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "demo.settings.test")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", help="folder with manifest.xml (default ../shared/w3c)")
    parser.add_argument("--json", help="write the JSON report here")
    parser.add_argument("--only", help="comma-separated test ids")
    parser.add_argument(
        "--database-url", help="run against this database (migrated first) instead of a temp one"
    )
    args = parser.parse_args(argv)
    suite = find_suite(args.suite)
    only = set(args.only.split(",")) if args.only else None
    if args.database_url:
        return _run_cli(suite, only, args.database_url, args.json)
    with tempfile.TemporaryDirectory(prefix="w3c-durable-") as folder:
        return _run_cli(suite, only, f"sqlite:///{Path(folder) / 'durable.sqlite3'}", args.json)


def _run_cli(suite: Path, only: set[str] | None, database_url: str, json_path: str | None) -> int:
    setup_django(database_url)
    started = time.perf_counter()
    outcomes, selection = run(suite, only)
    elapsed = time.perf_counter() - started
    for o in sorted(outcomes, key=lambda o: _key(o.case.test_id)):
        if not o.passed:
            print(f"FAIL {o.case.test_id} ({o.case.conformance}): {o.reason}")
    data = report(outcomes, selection)
    if json_path:
        Path(json_path).write_text(json.dumps(data, indent=1) + "\n")
    for item in data["pending"]:
        print(f"pending ({item['reason']}): {len(item['tests'])} tests")
    passed = sum(o.passed for o in outcomes)
    print(f"{passed} passed, {len(outcomes) - passed} failed, in {elapsed:.1f} s")
    return 0 if passed == len(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
