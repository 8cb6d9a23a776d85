"""``manage.py statechart migrate``: move running executions to another version of their chart.

Kept out of the ``statechart`` command's module (which only registers it): the plan comes
from the options, each execution is migrated in its own transaction
(``statecharts.operations.chart_migration``), a progress line is kept up to date on long runs (on a
terminal, redrawn in place; otherwise one line per tenth), and a summary ends the run.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from django.core.management.base import CommandError

from statecharts.management.progress import Progress
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


def run(options: dict[str, Any], say: Callable[[str], None], stream: Any) -> None:
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
    total = candidates.count()
    as_json: bool = options["as_json"]
    dry: bool = options["dry_run"]
    verbosity = int(options.get("verbosity", 1))
    progress = Progress(stream, plain=total >= PROGRESS_FROM and not as_json, total=total)
    live = not as_json
    reports: Iterable[ExecutionReport] = (
        dry_run(plan, candidates)
        if dry
        else migrate(plan, list(candidates.values_list("pk", flat=True)))
    )
    counts: Counter[str] = Counter()
    refused: list[ExecutionReport] = []
    # What a migration does not run (decided: docs/versions-and-migration.md), per state or
    # variable: how many executions it concerns.
    not_run: Counter[str] = Counter()
    not_set: Counter[str] = Counter()
    started = time.monotonic()
    for done, report in enumerate(reports, 1):
        counts[report.verdict.value] += 1
        not_run.update(report.onentry_not_run)
        not_set.update(report.data_not_set)
        if report.verdict is Verdict.REFUSED:
            refused.append(report)
            if live:
                progress.close()
                say(f"execution {report.execution_id}: refused: {report.reason}")
        elif verbosity >= 2 and live:
            progress.close()
            say(
                f"execution {report.execution_id}: {report.verdict.value} -> "
                f"{' '.join(report.configuration)}"
            )
        if live:
            rate = done / max(time.monotonic() - started, 1e-9)
            progress.update(done, f"{counts[Verdict.REFUSED.value]} refused, {rate:.0f}/s")
    progress.close()
    seconds = time.monotonic() - started
    if as_json:
        finished = Verdict.MIGRATES if dry else Verdict.MIGRATED
        document = {
            "to": {"chart": target.pk, "name": target.name, "version": target.version},
            "dry_run": dry,
            "counts": {
                finished.value: counts[finished.value],
                Verdict.UP_TO_DATE.value: counts[Verdict.UP_TO_DATE.value],
                Verdict.REFUSED.value: counts[Verdict.REFUSED.value],
            },
            "refused": [r.to_dict() for r in refused],
            "onentry_not_run": dict(sorted(not_run.items())),
            "data_not_set": dict(sorted(not_set.items())),
            "seconds": round(seconds, 3),
        }
        say(json.dumps(document, indent=2))
    elif dry:
        say(
            f"dry run: {counts[Verdict.MIGRATES.value]} would migrate, "
            f"{counts[Verdict.REFUSED.value]} refused, "
            f"{counts[Verdict.UP_TO_DATE.value]} already on {target} (nothing was changed)"
        )
    else:
        rate = f", {counts[Verdict.MIGRATED.value] / seconds:.0f}/s" if seconds > 0 else ""
        say(
            f"migrated {counts[Verdict.MIGRATED.value]} to {target}, "
            f"{counts[Verdict.UP_TO_DATE.value]} already there, "
            f"{counts[Verdict.REFUSED.value]} refused ({seconds:.1f} s{rate})"
        )
    if not as_json:
        said = ", ".join(f"{state_id} ({n})" for state_id, n in sorted(not_run.items()))
        if said:
            say(f"note: entered without running their <onentry> (executions): {said}")
        said = ", ".join(f"{data_id} ({n})" for data_id, n in sorted(not_set.items()))
        if said:
            say(
                f"note: declared by the target but not in the datamodel (executions): {said}; "
                "a --transform sets them"
            )
    if refused:  # a dry run that would refuse says so in its exit status too
        if dry:
            raise CommandError(f"{len(refused)} execution(s) would not be migrated: see above")
        raise CommandError(f"{len(refused)} execution(s) were not migrated: see above")
