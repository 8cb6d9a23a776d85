"""docs/performance.md keeps its promise: a summary table whose every row says how to
reproduce it (a script under benchmarks/ and its options) and when it was measured, and links
to its history in benchmarks/JOURNAL.md; and no relative link of the docs, the README, the
changelog or the journal points at a file or a heading that is not there (the journal moved
out of docs/, and headings are what section links name)."""

from __future__ import annotations

import datetime
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "performance.md"
JOURNAL = ROOT / "benchmarks" / "JOURNAL.md"
COLUMNS = [
    "What is measured",
    "Ours",
    "Peer or baseline (same run)",
    "Ratio",
    "Machine",
    "Date",
    "Reproduce",
    "History",
]
# The claims the page exists to answer, by the script that measures each: a row for every one.
REQUIRED_SCRIPTS = {
    "core_throughput.py",  # in memory, against sismic and python-statemachine
    "instructions.py",  # instructions per event, the noise-free measure
    "many_executions.py",  # durable steps against django-fsm-2, 1 and 4 processes
    "durable_steps.py",  # the state index: in_state with and without it
    "timer_peers.py",  # timers against Celery: p99 lateness and the burst
    "timer_recovery.py",  # recovery after a SIGKILLed worker
    "revisions.py",  # telemetry when nothing listens
    "invocation_round_trip.py",
    "route_races.py",
    "loading.py",  # the worst document shapes
    "available_events.py",
    "chart_migration.py",
    "diagram_rendering.py",
    "default_datamodel.py",
    "expression_check.py",
}
SCRIPT = re.compile(r"benchmarks/([\w./-]+\.py)")
DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
INLINE_LINK = re.compile(r"\]\(([^)\s]+)\)")
REFERENCE_LINK = re.compile(r"^\[[^\]]+\]:\s*(\S+)", re.MULTILINE)
LABEL = re.compile(r"\]\[([^\]]+)\]")


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped (word characters,
    spaces and hyphens kept), each space a hyphen."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading's anchor; a repeated heading gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    found = set()
    for line in FENCE.sub("", text).splitlines():
        heading = re.match(r"#{1,6} (.*)", line)
        if heading:
            name = slug(heading.group(1))
            count = seen.get(name, 0)
            found.add(name if count == 0 else f"{name}-{count}")
            seen[name] = count + 1
    return found


def link_targets(text: str) -> list[str]:
    """The targets of a page's inline links and reference definitions, outside code blocks."""
    prose = FENCE.sub("", text)
    return INLINE_LINK.findall(prose) + REFERENCE_LINK.findall(prose)


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in link_targets(page.read_text()):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue  # https:, mailto: ...
        path, _, fragment = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif fragment and linked.suffix == ".md" and fragment not in anchors(linked.read_text()):
            broken.append(f"{target}: no such heading")
    return broken


def summary_table(text: str) -> tuple[list[str], list[list[str]]]:
    """The header and the rows of the first table under '## Summary'."""
    section = text.split("\n## Summary\n", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    cells = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines]
    return cells[0], cells[2:]


def row_problems(row: list[str], header: list[str], definitions: dict[str, str]) -> list[str]:
    """What a summary row lacks: a command naming an existing benchmark script, a date, a
    link to its history in the journal whose heading exists."""
    cell = dict(zip(header, row, strict=True))
    problems = []
    scripts = SCRIPT.findall(cell["Reproduce"])
    if not scripts:
        problems.append("no benchmarks/ script in Reproduce")
    problems += [
        f"benchmarks/{name} does not exist"
        for name in scripts
        if not (ROOT / "benchmarks" / name).is_file()
    ]
    if not DATE.fullmatch(cell["Date"]):
        problems.append(f"Date {cell['Date']!r} is not YYYY-MM-DD")
    else:
        datetime.date.fromisoformat(cell["Date"])  # a real day
    labels = LABEL.findall(cell["History"])
    targets = [definitions.get(label, "") for label in labels] + INLINE_LINK.findall(
        cell["History"]
    )
    journal_anchors = anchors(JOURNAL.read_text())
    if not any(
        target.startswith("../benchmarks/JOURNAL.md#")
        and target.partition("#")[2] in journal_anchors
        for target in targets
    ):
        problems.append("History links to no heading of benchmarks/JOURNAL.md")
    return problems


def reference_definitions(text: str) -> dict[str, str]:
    """A page's reference-style link definitions, label -> target."""
    return dict(re.findall(r"^\[([^\]]+)\]:\s*(\S+)", text, re.MULTILINE))


def test_the_summary_table_has_the_promised_columns() -> None:
    header, rows = summary_table(PAGE.read_text())
    assert header == COLUMNS
    assert len(rows) >= len(REQUIRED_SCRIPTS)


def test_every_row_names_an_existing_script_a_date_and_its_history() -> None:
    text = PAGE.read_text()
    header, rows = summary_table(text)
    refs = reference_definitions(text)
    problems = {row[0]: row_problems(row, header, refs) for row in rows}
    assert {what: found for what, found in problems.items() if found} == {}


def test_every_required_claim_has_a_row() -> None:
    header, rows = summary_table(PAGE.read_text())
    named = {name for row in rows for name in SCRIPT.findall(row[header.index("Reproduce")])}
    assert REQUIRED_SCRIPTS - named == set()


@pytest.mark.parametrize(
    ("reproduce", "date", "history", "expected"),
    [
        ("`benchmarks/loading.py`", "2026-12-02", "[journal][ok]", []),
        ("`python -m conformance.runner`", "2026-12-02", "[journal][ok]", ["no benchmarks/"]),
        ("`benchmarks/no_such_script.py`", "2026-12-02", "[journal][ok]", ["does not exist"]),
        ("`benchmarks/loading.py`", "last week", "[journal][ok]", ["is not YYYY-MM-DD"]),
        ("`benchmarks/loading.py`", "2026-12-02", "[journal][gone]", ["links to no heading"]),
        ("`benchmarks/loading.py`", "2026-12-02", "", ["links to no heading"]),
    ],
)
def test_a_row_without_its_command_date_or_history_is_caught(
    reproduce: str, date: str, history: str, expected: list[str]
) -> None:
    refs = {
        "ok": "../benchmarks/JOURNAL.md#chart-migration",
        "gone": "../benchmarks/JOURNAL.md#no-such-section",
    }
    row = ["what", "1", "2", "0.5x", "quiet", date, reproduce, history]
    problems = row_problems(row, COLUMNS, refs)
    assert len(problems) == len(expected)
    assert all(part in problem for part, problem in zip(expected, problems, strict=True))


PAGES = [
    ROOT / "README.md",
    ROOT / "CHANGELOG.md",
    JOURNAL,
    *sorted((ROOT / "docs").glob("*.md")),
]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_headings_get_githubs_anchors() -> None:
    text = (
        "# Performance\n## The core's hot path, recovered (issue 16), before and after\n"
        "### `benchmarks/timer_firing.py --profile`, fixed\n### Results\n```\n# not a heading\n"
        "```\n### Results\n"
    )
    assert anchors(text) == {
        "performance",
        "the-cores-hot-path-recovered-issue-16-before-and-after",
        "benchmarkstimer_firingpy---profile-fixed",
        "results",
        "results-1",
    }


def test_a_link_to_a_missing_file_or_heading_is_caught(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other\n## A section\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#a-section) [file](gone.md) [heading](other.md#gone)\n"
        "[self](#title) [web](https://example.com/x)\n\n# Title\n\n[ref]: other.md#nope\n"
    )
    assert broken_links(page) == [
        "gone.md: no such file",
        "other.md#gone: no such heading",
        "other.md#nope: no such heading",
    ]
