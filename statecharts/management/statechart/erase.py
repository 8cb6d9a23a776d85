"""``statechart erase (EXECUTION | --key KEY [--chart CHART]) [--cancel] [--reason R]
[--yes]``: erase personal data (``statecharts.operations.erasure.erase``; recorded in the
history), after asking on a terminal."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from django.core.management.base import CommandError

from statecharts import stepper
from statecharts.exceptions import InvalidInput
from statecharts.management.statechart.common import (
    Console,
    Subcommand,
    caller_options,
    find_chart,
    find_execution,
)
from statecharts.operations import erasure


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("execution", nargs="?", help="an execution id or session id")
    parser.add_argument("--key", help="every execution with this business key instead")
    parser.add_argument("--chart", help="with --key: only executions of this chart")
    parser.add_argument(
        "--cancel", action="store_true", help="cancel executions still running first"
    )
    parser.add_argument("--reason", default="", help="why (recorded in the history)")
    parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    parser.add_argument(
        "--caller-context",
        metavar="JSON",
        help="a JSON object recorded with each erasure entry (e.g. a ticket id)",
    )


def handle(console: Console, options: dict[str, Any]) -> None:
    key, ref = options["key"], options["execution"]
    if (key is None) == (ref is None):
        raise CommandError("give an EXECUTION or --key KEY (one of them)")
    if options["chart"] is not None and key is None:
        raise CommandError("--chart goes with --key")
    reason = options["reason"]
    try:
        stepper.admit(stepper.ErasureRequest(reason=reason))
    except InvalidInput as exc:
        raise CommandError(f"--reason {exc.problems[0].message}") from None
    context = caller_options(options)["caller_context"]
    if key is not None:
        chart = find_chart(options["chart"]) if options["chart"] is not None else None
        ids = erasure.executions_with_key(key, chart=chart)
        if not ids:
            raise CommandError(f"no execution has the business key {key!r}")
        what = f"the {len(ids)} execution(s) with business key {key!r}"
    else:
        ids = [find_execution(ref).pk]
        what = f"execution {ids[0]}"
    everything = erasure.family(ids)
    children = len(everything) - len(ids)
    if children:
        what += f" and {children} invoked child execution(s)"
    if not options["yes"]:
        confirm(f"Erase the personal data of {what}? This cannot be undone.")
    try:
        report = erasure.erase(
            ids,
            reason=reason,
            cancel=options["cancel"],
            requested_by="statechart erase",
            caller_context=context,
        )
    except erasure.ErasureRefused as exc:
        raise CommandError(str(exc)) from None
    console.say(str(report))
    console.say(f"executions: {', '.join(map(str, report.execution_ids))}")


def confirm(question: str) -> None:
    if not sys.stdin.isatty():
        raise CommandError(f"{question} Pass --yes to confirm (no terminal to ask on).")
    answer = input(f"{question} [y/N] ")
    if answer.strip().lower() not in ("y", "yes"):
        raise CommandError("nothing erased")


SUBCOMMAND = Subcommand(
    "erase", "erase the personal data of executions (recorded)", add_arguments, handle
)
