"""The properties a drawn diagram keeps, measured on the pipeline's own output (the layout,
the routes, their labels): used by tests/diagram/test_diagram_properties.py."""

from __future__ import annotations

from itertools import combinations

from statecharts.core.model import Chart
from statecharts.diagram import layout_chart, routes
from statecharts.diagram.geometry import Rect
from statecharts.diagram.scene import Scene
from statecharts.diagram.svg import frame_of

HEAD_SLACK = 0.5  # arrowheads that only touch do not overlap
FRAME_CLEARANCE = 2.0  # a label nearer the frame's line touches it


def _head_box(head: tuple[tuple[float, float], ...]) -> Rect:
    xs, ys = [p[0] for p in head], [p[1] for p in head]
    return Rect(min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys))


def _meet(a: Rect, b: Rect, slack: float) -> bool:
    return (
        a.x + slack < b.x2 and b.x + slack < a.x2 and a.y + slack < b.y2 and b.y + slack < a.y2
    )


def problems(chart: Chart) -> dict[str, list[str]]:
    """What the diagram of ``chart`` gets wrong, by property: arrows running through a state
    (or a container holding neither end, or a region separator of a parallel state not
    holding both ends), arrowheads overlapping, labels outside the chart's frame as drawn
    or touching its line."""
    layout = layout_chart(chart)
    drawn = routes(layout)
    scene = Scene(layout)
    ids = [box.label for box in layout.boxes]
    found: dict[str, list[str]] = {"crossing": [], "heads": [], "labels": []}
    for r in drawn:
        if r.kind == "initial":
            continue
        ends = (r.source, r.target)
        hits = scene.crossing(r.path, ends, scene.lineage(*ends))
        if hits:
            found["crossing"].append(f"{ids[r.source]}->{ids[r.target]}: {hits}")
    for a, b in combinations(drawn, 2):
        if _meet(_head_box(a.head), _head_box(b.head), HEAD_SLACK):
            found["heads"].append(f"{ids[a.source]}->{ids[a.target]} / {ids[b.target]}")
    frame = frame_of(layout, drawn)  # the chart's frame as drawn
    for r in drawn:
        if r.label is not None and not frame.contains(r.label.inflate(FRAME_CLEARANCE)):
            found["labels"].append(f"{ids[r.source]}->{ids[r.target]} {r.label_lines}")
    return found
