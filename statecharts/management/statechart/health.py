"""``statechart health [--json]``: backlogs, sweepers, executions by status
(``statecharts.operations.health.assess``); exit 0 ok, 1 warning, 2 critical."""

from __future__ import annotations

import argparse
import json
from typing import Any

from statecharts.management.statechart.common import Console, Subcommand
from statecharts.operations import health


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json", dest="as_json", action="store_true", help="print one JSON document"
    )


def handle(console: Console, options: dict[str, Any]) -> None:
    """Print the figures; exit with the worst level's code (0 ok, 1 warning, 2 critical)."""
    report = health.assess()
    if options["as_json"]:
        console.say(json.dumps(report.document(), indent=2, ensure_ascii=False))
    else:
        say_table(console, report)
    if report.level is not health.Level.OK:
        console.stdout.flush()
        raise SystemExit(report.level.exit_code)


def say_table(console: Console, report: health.HealthReport) -> None:
    console.say(f"health: {report.level.upper()} (checked {report.checked_at.isoformat()})")
    width = max((len(a.figure.name) for a in report.figures), default=0)
    for assessed in report.figures:
        figure = assessed.figure
        value = "-" if figure.value is None else f"{figure.value:,}"
        unit = f" {figure.unit}" if figure.unit and figure.value is not None else ""
        line = f"  {assessed.level:<8}  {figure.name:<{width}}  {value}{unit}"
        limits = (("warning", assessed.warning), ("critical", assessed.critical))
        bounds = [f"{name} >= {n:,}" for name, n in limits if n is not None]
        if bounds:
            line += f"  [{', '.join(bounds)}]"
        if figure.detail:
            line += f"  {figure.detail}"
        console.say(line)


SUBCOMMAND = Subcommand(
    "health",
    "timer and outbox backlogs, sweepers, executions by status (exit 0 ok, 1 warning, "
    "2 critical)",
    add_arguments,
    handle,
)
