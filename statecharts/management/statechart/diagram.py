"""``statechart diagram CHART [--execution EXECUTION]``: the SVG the admin shows
(``statecharts.diagram.render_svg``), to stdout (``statechart diagram NAME > chart.svg``)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from django.core.management.base import CommandError

from statecharts.core import StatechartError
from statecharts.management.statechart.common import (
    Console,
    Subcommand,
    find_chart,
    find_execution,
)
from statecharts.operations.inspection import Unreadable, inspect


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("chart", help="a chart id, or a chart name (its latest version)")
    parser.add_argument(
        "--execution",
        help="highlight this execution's active states (an execution id or session id)",
    )


def diagram(console: Console, options: dict[str, Any]) -> None:
    """The SVG the admin shows (``statechart diagram NAME > chart.svg``)."""
    from statecharts.diagram import render_svg

    chart = find_chart(options["chart"])
    active: Sequence[str] = ()
    if options["execution"]:
        execution = find_execution(options["execution"])
        if execution.chart_id != chart.pk:
            raise CommandError(
                f"execution {execution.pk} runs chart {execution.chart_id}, not {chart.pk}"
            )
        states = inspect(execution).active_states
        active = () if isinstance(states, Unreadable) else states
    try:
        compiled = chart.compiled()
    except StatechartError as exc:
        raise CommandError(
            f"chart {chart.pk} cannot be compiled from its source: {exc}"
        ) from None
    console.stdout.write(render_svg(compiled, active=active), ending="\n")


SUBCOMMAND = Subcommand(
    "diagram", "write a chart's diagram (the admin's) as SVG to stdout", add_arguments, diagram
)
