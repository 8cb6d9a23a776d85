"""``statechart migrate CHART [--map OLD=NEW] [--transform NAME] [--execution EXECUTION]
[--dry-run] [--json]``: move running executions to another version of their chart.

The plan comes from the options, each execution is migrated in its own transaction
(``statecharts.operations.chart_migration``), a progress line is kept up to date on long runs
(on a terminal, redrawn in place; otherwise one line per tenth), and a summary ends the run.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.core.management.base import CommandError
from django.db.models import QuerySet

from statecharts.management.statechart.common import Console, Subcommand
from statecharts.management.statechart.progress import Progress
from statecharts.models import Chart, Execution
from statecharts.operations.chart_migration import (
    ExecutionReport,
    MigrationPlan,
    PlanError,
    Verdict,
    dry_run,
    migrate,
)
from statecharts.policies import lookups

PROGRESS_FROM = 200  # runs of at least this many executions show progress


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "chart",
        help="the target: a chart name (its latest version), NAME@VERSION, or a chart id",
    )
    parser.add_argument(
        "--map",
        action="append",
        default=[],
        metavar="OLD=NEW",
        help="a state of the old version that has another id in the target (repeatable); "
        "other states keep their ids",
    )
    parser.add_argument(
        "--transform",
        help="a datamodel transform registered in STATECHARTS['MIGRATION_TRANSFORMS']",
    )
    parser.add_argument(
        "--execution",
        action="append",
        default=[],
        metavar="EXECUTION",
        help="only this execution (id or session id; repeatable)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="say per execution whether it maps; change nothing"
    )
    parser.add_argument(
        "--json", dest="as_json", action="store_true", help="print one JSON document"
    )


def renames(pairs: Iterable[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for pair in pairs:
        old, sep, new = pair.partition("=")
        if not sep or not old.strip() or not new.strip():
            raise CommandError(f"--map takes OLD=NEW (two state ids), not {pair!r}")
        found[old.strip()] = new.strip()
    return found


@dataclass
class Tally:
    """What a run did, counted as the reports come."""

    counts: Counter[str] = field(default_factory=Counter)
    refused: list[ExecutionReport] = field(default_factory=list)
    # What a migration does not run (decided: docs/versions-and-migration.md), per state or
    # variable: how many executions it concerns.
    not_run: Counter[str] = field(default_factory=Counter)
    not_set: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0


def handle(console: Console, options: dict[str, Any]) -> None:
    target, plan, candidates = planned(options)
    as_json: bool = options["as_json"]
    dry: bool = options["dry_run"]
    tally = run(
        console, plan, candidates, dry=dry, live=not as_json,
        verbosity=int(options.get("verbosity", 1)),
    )  # fmt: skip
    if as_json:
        console.say(json.dumps(document(target, dry, tally), indent=2))
    else:
        say_summary(console, target, dry, tally)
    if tally.refused:  # a dry run that would refuse says so in its exit status too
        if dry:
            raise CommandError(
                f"{len(tally.refused)} execution(s) would not be migrated: see above"
            )
        raise CommandError(f"{len(tally.refused)} execution(s) were not migrated: see above")


def planned(options: dict[str, Any]) -> tuple[Chart, MigrationPlan, QuerySet[Execution]]:
    """The target, the plan and the executions the options choose."""
    try:
        target: Chart = lookups.find_chart(options["chart"])
    except lookups.LookupProblem as exc:
        raise CommandError(str(exc)) from None
    try:
        plan = MigrationPlan.make(target, renames(options["map"]), options["transform"])
    except PlanError as exc:
        raise CommandError(str(exc)) from None
    candidates = plan.executions()
    if options["execution"]:
        try:
            chosen = [lookups.find_execution(ref).pk for ref in options["execution"]]
        except lookups.LookupProblem as exc:
            raise CommandError(str(exc)) from None
        candidates = Execution.objects.filter(pk__in=chosen).order_by("pk")
    return target, plan, candidates


def run(
    console: Console,
    plan: MigrationPlan,
    candidates: QuerySet[Execution],
    *,
    dry: bool,
    live: bool,
    verbosity: int,
) -> Tally:
    """Migrate (or try: ``dry``) each candidate, with a progress line when ``live``."""
    total = candidates.count()
    progress = Progress(console.stdout, plain=total >= PROGRESS_FROM and live, total=total)
    reports: Iterable[ExecutionReport] = (
        dry_run(plan, candidates)
        if dry
        else migrate(plan, list(candidates.values_list("pk", flat=True)))
    )
    tally = Tally()
    started = time.monotonic()
    for done, report in enumerate(reports, 1):
        tally.counts[report.verdict.value] += 1
        tally.not_run.update(report.onentry_not_run)
        tally.not_set.update(report.data_not_set)
        if report.verdict is Verdict.REFUSED:
            tally.refused.append(report)
            if live:
                progress.close()
                console.say(f"execution {report.execution_id}: refused: {report.reason}")
        elif verbosity >= 2 and live:
            progress.close()
            console.say(
                f"execution {report.execution_id}: {report.verdict.value} -> "
                f"{' '.join(report.configuration)}"
            )
        if live:
            rate = done / max(time.monotonic() - started, 1e-9)
            progress.update(done, f"{tally.counts[Verdict.REFUSED.value]} refused, {rate:.0f}/s")
    progress.close()
    tally.seconds = time.monotonic() - started
    return tally


def document(target: Chart, dry: bool, tally: Tally) -> dict[str, Any]:
    """``--json``: the run as one document."""
    counts = tally.counts
    finished = Verdict.MIGRATES if dry else Verdict.MIGRATED
    return {
        "to": {"chart": target.pk, "name": target.name, "version": target.version},
        "dry_run": dry,
        "counts": {
            finished.value: counts[finished.value],
            Verdict.UP_TO_DATE.value: counts[Verdict.UP_TO_DATE.value],
            Verdict.REFUSED.value: counts[Verdict.REFUSED.value],
        },
        "refused": [r.to_dict() for r in tally.refused],
        "onentry_not_run": dict(sorted(tally.not_run.items())),
        "data_not_set": dict(sorted(tally.not_set.items())),
        "seconds": round(tally.seconds, 3),
    }


def say_summary(console: Console, target: Chart, dry: bool, tally: Tally) -> None:
    counts, seconds = tally.counts, tally.seconds
    if dry:
        console.say(
            f"dry run: {counts[Verdict.MIGRATES.value]} would migrate, "
            f"{counts[Verdict.REFUSED.value]} refused, "
            f"{counts[Verdict.UP_TO_DATE.value]} already on {target} (nothing was changed)"
        )
    else:
        rate = f", {counts[Verdict.MIGRATED.value] / seconds:.0f}/s" if seconds > 0 else ""
        console.say(
            f"migrated {counts[Verdict.MIGRATED.value]} to {target}, "
            f"{counts[Verdict.UP_TO_DATE.value]} already there, "
            f"{counts[Verdict.REFUSED.value]} refused ({seconds:.1f} s{rate})"
        )
    said = ", ".join(f"{state_id} ({n})" for state_id, n in sorted(tally.not_run.items()))
    if said:
        console.say(f"note: entered without running their <onentry> (executions): {said}")
    said = ", ".join(f"{data_id} ({n})" for data_id, n in sorted(tally.not_set.items()))
    if said:
        console.say(
            f"note: declared by the target but not in the datamodel (executions): {said}; "
            "a --transform sets them"
        )


SUBCOMMAND = Subcommand(
    "migrate",
    "move running executions to another version of their chart",
    add_arguments,
    handle,
)
