"""The diagram (the admin's execution and chart pages, the API's ``diagram.svg``) stays linear
in the chart, counted, not timed (issue 28: a read path of any view-only user). Two shapes
were quadratic: thousands of transitions between the same two states (each label was scored
against every arrow and label sharing its place) and a container of thousands of states
(each gap between its rows went over all its arrows; its long arrows were filed in a number
of cells growing with the container). benchmarks/diagram_rendering.py times ordinary charts.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from statecharts.core import load_chart
from statecharts.diagram import render_svg, scene
from tests.core.test_availability_scaling import counting, guarded

NS = "http://www.w3.org/2005/07/scxml"


def wide(n: int) -> str:
    """n states in one compound state, each with a transition to the first."""
    children = "".join(
        f'<state id="c{i}"><transition event="e" target="c0"/></state>' for i in range(n)
    )
    return f'<scxml xmlns="{NS}" version="1.0"><state id="top">{children}</state></scxml>'


SHAPES: dict[str, Callable[[int], str]] = {"between_two": guarded, "wide": wide}


@pytest.mark.parametrize("shape", SHAPES)
def test_the_diagram_grows_like_the_chart(shape: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The diagram's fixed budgets for looking around, a tenth: spent on the smallest chart
    # already, so that the sizes compared are all past them (and the test short).
    for budget in ("BUDGET", "LABEL_BUDGET", "TRACE_BUDGET"):
        monkeypatch.setattr(scene, budget, getattr(scene, budget, 300_000) // 10, raising=False)
    counted = []
    for n in (250, 500, 1000):
        chart = load_chart(SHAPES[shape](n))
        with counting(1_500 * n + 1_000_000) as counts:
            svg = render_svg(chart)
        assert svg.count("<path") >= n  # (every arrow drawn)
        counted.append(counts["calls"])
    # Doubling the chart at most doubles what it adds (four times if quadratic).
    assert counted[2] - counted[1] <= 2.5 * (counted[1] - counted[0]), (shape, counted)
