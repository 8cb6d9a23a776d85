"""Properties of every drawn diagram, over the demo's charts and the W3C suite's documents,
measured on the pipeline's output (tests/diagram/diagram_properties.py). Issue 32: "no edge
crosses a state border or region divider except at its endpoints, no two arrowheads overlap,
every label lies inside the frame", fixed in the routing, not in the charts.

Asserted here, in every demo chart and every W3C document, with no exception:

- no arrow runs through a state box or a container's title other than its two ends', enters
  a container holding neither of its ends, or crosses the separator between the regions of
  a parallel state unless that parallel state holds both its ends (the loan example's
  ``identity.rejected`` used to cut through ``reviewing``'s separator and graze
  ``identity_ok``; in the W3C documents, arrows to a history state crossed ``s02`` and
  ``s021``). The router goes round what the straight line would cross;
- no two arrowheads overlap (two met at the loan example's ``declined``; in the W3C documents,
  69 pairs in 29 documents, arrows from several states into one ``fail`` state arriving at one
  point). The ends of the arrows on one side of a box are spread along it;
- every label lies inside the chart's frame as drawn, clear of its line (the loan example's
  ``done.state.reviewing [score >= 600]`` touched it).
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest

from statecharts.core import load_chart_file
from statecharts.diagram import layout_chart, routes
from statecharts.diagram.geometry import line_cubic
from statecharts.diagram.scene import Scene
from statecharts.drivers.memory import MemoryDriver
from tests.conformance import suite as w3c
from tests.diagram.diagram_properties import problems
from tests.diagram.test_diagram import EXAMPLES, _w3c_documents

LOAN = next(path for path in EXAMPLES if path.stem == "loan")


def separators_crossed(path: Path) -> list[str]:
    chart = MemoryDriver().load_file(path)
    layout = layout_chart(chart)
    scene = Scene(layout)
    crossed = []
    for r in routes(layout):
        ends = (r.source, r.target)
        for kind, n in scene.crossing(r.path, ends, scene.lineage(*ends)):
            if kind == "wall":
                parallel = layout.boxes[scene.wall_of[n]].label
                crossed.append(
                    f"{layout.boxes[r.source].label}->{layout.boxes[r.target].label} "
                    f"crosses a separator of {parallel}"
                )
    return crossed


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_the_demo_charts_cross_nothing_overlap_no_heads_keep_labels_inside(path: Path) -> None:
    assert not separators_crossed(path)
    assert problems(load_chart_file(path)) == {"crossing": [], "heads": [], "labels": []}


@pytest.mark.parametrize("path", _w3c_documents())
def test_no_w3c_document_crosses_anything_overlaps_heads_or_puts_a_label_outside(
    path: Path | None,
) -> None:
    if path is None:
        w3c.require()  # skips, or fails when the run requires the suite
    assert not separators_crossed(path)
    found = problems(MemoryDriver().load_file(path))
    assert found == {"crossing": [], "heads": [], "labels": []}


def test_arrows_from_a_column_of_states_into_one_state_arrive_apart() -> None:
    """The W3C documents' shape, without the suite: a chain of states, each of which can
    also fail. The straight arrows into ``fail`` would run through the states below, and the
    curves round them met at one point of ``fail``'s top."""
    chain = "".join(
        f'<state id="s{i}"><transition event="next" target="s{i + 1}"/>'
        f'<transition event="error" target="fail"/><transition event="*" target="fail"/>'
        "</state>"
        for i in range(5)
    )
    chart = MemoryDriver().load(
        f"""<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" initial="s0">
        {chain}<state id="s5"><transition event="done" target="pass"/>
        <transition event="error" target="fail"/></state>
        <final id="pass"/><final id="fail"/></scxml>""".encode()
    )
    assert problems(chart) == {"crossing": [], "heads": [], "labels": []}
    layout = layout_chart(chart)
    fail = next(box for box in layout.boxes if box.label == "fail")
    tips = sorted(r.head[0] for r in routes(layout) if r.target == fail.index)
    assert len(tips) == 11
    assert all(fail.rect.x <= x <= fail.rect.x2 for x, _ in tips)  # on its border
    assert all(b[0] - a[0] >= 9.99 or abs(b[1] - a[1]) >= 9.99 for a, b in pairwise(tips))


def test_an_arrow_goes_round_a_box_in_its_way() -> None:
    """The loan example's ``identity.rejected``, from ``verifying`` to ``declined``: the
    straight line runs through ``identity_ok``, a bow or a lane round it would cross
    ``reviewing``'s separator or ``approved``; the drawn arrow passes beside
    ``identity_ok``'s corner and crosses nothing."""
    chart = load_chart_file(LOAN)
    layout = layout_chart(chart)
    scene = Scene(layout)
    box = {b.label: b for b in layout.boxes}
    ends = (box["verifying"].index, box["declined"].index)
    related = scene.lineage(*ends)
    straight = (line_cubic(box["verifying"].rect.center, box["declined"].rect.center),)
    assert ("thing", box["identity_ok"].index) in scene.crossing(straight, ends, related)
    [arrow] = [r for r in routes(layout) if (r.source, r.target) == ends]
    assert scene.crossing(arrow.path, ends, related) == []
    assert len(arrow.path) > 1  # a polyline with a rounded corner, not a line


def test_a_separator_between_the_ends_regions_may_be_crossed() -> None:
    """The rule's other side: an arrow from one region to another of the same parallel
    state crosses their separator, and that is not counted."""
    source = b"""<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" initial="p">
      <parallel id="p">
        <state id="left"><state id="a"><transition event="go" target="b"/></state></state>
        <state id="right"><state id="b"/></state>
      </parallel>
    </scxml>"""
    chart = MemoryDriver().load(source)
    layout = layout_chart(chart)
    scene = Scene(layout)
    [arrow] = [r for r in routes(layout) if r.kind == "transition"]
    ends = (arrow.source, arrow.target)
    cubic = arrow.path[0]
    assert scene.walls.crossing(cubic[0], cubic[3]), "the arrow runs across the separator"
    hits = scene.crossing(arrow.path, ends, scene.lineage(*ends))
    assert not [hit for hit in hits if hit[0] == "wall"]
