"""Statechart diagrams, rendered server-side to self-contained SVG. No Django in here.

Public API::

    from statecharts.diagram import render_svg
    svg = render_svg(chart, active=("packing", "drafting"))

Nested states are nested boxes, parallel regions sit side by side between dashed lines, and
every transition is an arrow labelled with its events (and a shortened ``[cond]``). The
states in ``active`` are highlighted. Pure Python and deterministic: the same chart and the
same active states give byte-identical output, and rendering time stays bounded on charts
of many hundreds of states.

The pipeline: :mod:`~statecharts.diagram.layout` places the boxes (children in layers, see
:mod:`~statecharts.diagram.layering`), :mod:`~statecharts.diagram.routing` draws the arrows
round what is on the canvas (:mod:`~statecharts.diagram.scene`) and spreads their ends along
the sides of the boxes (:mod:`~statecharts.diagram.ports`),
:mod:`~statecharts.diagram.labels` places their labels, :mod:`~statecharts.diagram.svg`
writes the document.
"""

from __future__ import annotations

from collections.abc import Iterable

from statecharts.core.model import Chart
from statecharts.diagram.labels import place_labels
from statecharts.diagram.layout import Layout, layout_chart
from statecharts.diagram.routing import Route, route
from statecharts.diagram.scene import Scene
from statecharts.diagram.svg import write_svg

__all__ = ["Layout", "Route", "layout_chart", "render_svg", "routes"]


def routes(layout: Layout) -> list[Route]:
    """Every arrow of a laid-out chart, with its label's place."""
    scene = Scene(layout)
    return place_labels(route(layout, scene), scene)


def render_svg(chart: Chart, active: Iterable[str] = (), invoking: Iterable[str] = ()) -> str:
    """The chart as an SVG document; states whose id is in ``active`` are highlighted, and
    those in ``invoking`` (states with running invocations) carry a badge.

    Ids in ``active`` that the chart does not have are ignored (a configuration recorded
    against an older version of the chart still renders)."""
    layout = layout_chart(chart)
    return write_svg(chart, layout, routes(layout), frozenset(active), frozenset(invoking))
