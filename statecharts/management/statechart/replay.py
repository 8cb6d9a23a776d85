"""``statechart replay EXECUTION`` or ``statechart replay --all [--chart CHART] [--status S]``:
re-drive the history and compare (``statecharts.operations.replay``); many with a progress
display; fails if any diverges."""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import CommandError
from django.db.models import QuerySet

from statecharts.core import StatechartError
from statecharts.management.statechart.common import Console, Subcommand, find_execution
from statecharts.management.statechart.progress import Progress
from statecharts.models import Execution, ExecutionStatus
from statecharts.operations.replay import ReplayReport, replay, replay_many


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("execution", nargs="?", help="an execution id or session id")
    parser.add_argument(
        "--all",
        dest="replay_all",
        action="store_true",
        help="every execution (or those chosen by --chart / --status)",
    )
    parser.add_argument(
        "--chart",
        dest="replay_chart",
        help="with --all: the executions of the charts of this name (or id)",
    )
    parser.add_argument(
        "--status",
        dest="replay_status",
        choices=[s.value for s in ExecutionStatus],
        help="with --all: executions with this status",
    )


def handle(console: Console, options: dict[str, Any]) -> None:
    if options["replay_all"] == bool(options["execution"]):
        raise CommandError("replay needs one execution, or --all (with --chart / --status)")
    if not options["replay_all"]:
        if options["replay_chart"] or options["replay_status"]:
            raise CommandError("--chart and --status choose executions for --all")
        replay_one(console, find_execution(options["execution"]))
    else:
        replay_all(console, options)


def chosen_executions(options: dict[str, Any]) -> QuerySet[Execution]:
    """The executions ``--all`` replays: those of ``--chart`` (a name, or an id) and
    ``--status``."""
    executions = Execution.objects.select_related("chart").order_by("pk")
    if options["replay_chart"]:
        chosen = options["replay_chart"]
        by_name = executions.filter(chart__name=chosen)
        if by_name.exists() or not chosen.isdigit():
            executions = by_name
        else:
            executions = executions.filter(chart_id=int(chosen))
    if options["replay_status"]:
        executions = executions.filter(status=options["replay_status"])
    return executions


def replay_all(console: Console, options: dict[str, Any]) -> None:
    executions = chosen_executions(options)
    display = Progress(
        console.stdout, total=executions.count(), plain=options.get("verbosity", 1) >= 1
    )

    def progress(done: int, execution: Execution, report: ReplayReport | None) -> None:
        verdict = report.verdict if report is not None else "could not be replayed"
        display.update(done, f"execution {execution.pk}: {verdict}")

    summary = replay_many(executions.iterator(chunk_size=200), progress=progress)
    display.close()
    for report in summary.diverged[:20]:
        console.say(f"execution {report.execution_id}: {report}")
    for pk, reason in summary.unreplayable[:20]:
        console.say(f"execution {pk} cannot be replayed: {reason}")
    if not summary.ok:
        raise CommandError(str(summary))
    console.say(str(summary))


def replay_one(console: Console, execution: Execution) -> None:
    try:
        report = replay(execution)
    except StatechartError as exc:  # e.g. the stored position is not this chart's
        raise CommandError(f"execution {execution.pk} cannot be replayed: {exc}") from exc
    if report.diverged:  # (erased or pruned: said, not an error)
        raise CommandError(f"execution {execution.pk}: {report}")
    console.say(f"execution {execution.pk}: {report}")


SUBCOMMAND = Subcommand(
    "replay",
    "re-drive an execution's history and compare (or many: --all)",
    add_arguments,
    handle,
)
