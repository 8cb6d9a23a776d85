"""``statechart trace EXECUTION [EXECUTION ...] [--off]``: keep (or stop keeping) the core's
trace effects of these executions' next steps in their history (``stepper.trace``, under each
execution's lock): the admin's "Trace the steps of the selected executions" from a shell. It
changes what is recorded, never what the chart does."""

from __future__ import annotations

import argparse
from typing import Any

from statecharts import stepper
from statecharts.management.statechart.common import Console, Subcommand, find_execution


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "executions", nargs="+", metavar="EXECUTION", help="an execution id or session id"
    )
    parser.add_argument("--off", action="store_true", help="stop tracing them")


def handle(console: Console, options: dict[str, Any]) -> None:
    on = not options["off"]
    executions = [find_execution(ref) for ref in options["executions"]]
    changed = sum(1 for execution in executions if stepper.trace(execution.pk, on))
    what = "on" if on else "off"
    console.say(f"Tracing {what}: {changed} changed, {len(executions) - changed} already {what}.")


SUBCOMMAND = Subcommand(
    "trace", "keep the core's trace of executions' next steps (or --off)", add_arguments, handle
)
