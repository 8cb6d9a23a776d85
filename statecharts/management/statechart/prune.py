"""``statechart prune [--only STAGE] [--days STAGE=DAYS] [--batch N] [--dry-run]``: delete
what retention no longer keeps (``statecharts.operations.retention.prune``), in batches,
with a progress display."""

from __future__ import annotations

import argparse
from datetime import timedelta
from typing import Any

from django.core.management.base import CommandError

from statecharts.management.statechart.common import Console, Subcommand, positive_int
from statecharts.operations import retention


def stage_days(value: str) -> tuple[str, float | None]:
    """``timers=7`` (days) or ``history=forever``: a retention override for ``prune``."""
    name, sep, days = value.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected STAGE=DAYS, got {value!r}")
    if days == "forever":
        return name, None
    try:
        number = float(days)
    except ValueError:
        number = -1.0
    if not number >= 0 or number == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of days or 'forever', got {days!r}")
    return name, number


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--only",
        action="append",
        metavar="STAGE",
        help="only this stage (repeatable): executions, history, outbox, and the apps' "
        "(timers, invocations, ...)",
    )
    parser.add_argument(
        "--days",
        action="append",
        type=stage_days,
        default=[],
        metavar="STAGE=DAYS",
        help="this run's retention of a stage, in days ('forever': skip it); repeatable",
    )
    parser.add_argument(
        "--batch", type=positive_int, help="rows per transaction (default PRUNE_BATCH)"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="count what would be deleted; delete nothing"
    )


def handle(console: Console, options: dict[str, Any]) -> None:
    overrides = dict(options["days"])
    known = retention.stage_names()
    unknown = [name for name in [*overrides, *(options["only"] or [])] if name not in known]
    if unknown:
        raise CommandError(
            f"no retention stage named {', '.join(map(repr, unknown))} "
            f"(stages: {', '.join(known)})"
        )
    live = console.stdout.isatty()
    verbosity = options.get("verbosity", 1)

    def progress(stage: retention.StageReport) -> None:
        total = f" of {stage.to_delete:,}" if stage.to_delete is not None else ""
        line = f"  {stage.name}: {stage.deleted:,}{total} row(s), batch {stage.batches}"
        if live:
            console.stdout.write(line.ljust(70), ending="\r")
            console.stdout.flush()
        elif verbosity >= 2:
            console.say(line)

    deltas = {
        name: None if days is None else timedelta(days=days) for name, days in overrides.items()
    }
    report = retention.prune(
        only=options["only"],
        retention=deltas,
        batch=options["batch"],
        dry_run=options["dry_run"],
        progress=progress,
    )
    if live:
        console.stdout.write(" " * 70, ending="\r")
    say_report(console, report)


def say_report(console: Console, report: retention.PruneReport) -> None:
    for stage in report.stages:
        if report.dry_run and stage.cutoff is not None:
            kept = retention.days_text(stage.retention) if stage.retention else ""
            console.say(
                f"{stage.name}: {stage.to_delete:,} row(s) would be deleted (older than {kept})"
            )
        else:
            console.say(str(stage))
    if report.dry_run:
        console.say("dry run: nothing was deleted")
    else:
        console.say(f"deleted {report.deleted:,} row(s)")


SUBCOMMAND = Subcommand(
    "prune", "delete what the retention settings no longer keep", add_arguments, handle
)
