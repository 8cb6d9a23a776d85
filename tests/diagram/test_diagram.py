"""The server-side SVG diagram (``statecharts.diagram.render_svg``).

Every W3C suite document and every example renders to a well-formed, self-contained SVG in
which each state is one ``data-state`` group whose box lies inside its parent's box, sibling
boxes (parallel regions included) never overlap, the active states (and only they) are
highlighted, text from the document is escaped, and the output is byte-for-byte stable.
Checked on the SVG text and geometry alone: nothing is rasterised.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from collections import Counter
from itertools import combinations, pairwise
from pathlib import Path
from typing import NamedTuple

import pytest
from lxml import etree

from conformance.runner import load_cases
from statecharts.core import load_chart, load_chart_file
from statecharts.core.model import Chart, Kind
from statecharts.diagram import render_svg
from statecharts.drivers.memory import MemoryDriver
from tests.conformance import suite as w3c

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "docs" / "examples").glob("*.scxml"))
ORDER = ROOT / "docs" / "examples" / "order.scxml"
SVG_NS = "http://www.w3.org/2000/svg"
NS = "http://www.w3.org/2005/07/scxml"
EPSILON = 0.05  # coordinates are printed rounded to 0.1


def _w3c_documents() -> list[object]:
    """Every start document of the suite (through the conformance runner's own loader),
    and the documents they load by URI; without the suite one case that skips (or fails when
    the run requires the suite: tests/conformance/suite.py)."""
    suite = w3c.available()
    if suite is None:
        return [pytest.param(None, id="w3c-suite")]
    cases, _ = load_cases(suite)
    params = [pytest.param(case.path, id=case.test_id) for case in cases]
    for path in sorted((suite / "scxml").glob("test*sub*.scxml")):
        params.append(pytest.param(path, id=path.stem.removeprefix("test")))
    return params


# ---- reading the SVG back -------------------------------------------------------------------


class Rect(NamedTuple):
    x: float
    y: float
    w: float
    h: float

    @property
    def x2(self) -> float:
        return self.x + self.w

    @property
    def y2(self) -> float:
        return self.y + self.h


def rect_of(element: etree._Element) -> Rect:
    return Rect(*(float(element.get(a)) for a in ("x", "y", "width", "height")))


def parse(svg: str) -> etree._Element:
    root = etree.fromstring(svg.encode())
    assert root.tag == f"{{{SVG_NS}}}svg"
    return root


def tag(element: etree._Element) -> str:
    return etree.QName(element).localname


def classes(element: etree._Element) -> set[str]:
    return set((element.get("class") or "").split())


def state_groups(root: etree._Element) -> dict[str, etree._Element]:
    groups = root.findall(f".//{{{SVG_NS}}}g[@data-state]")
    counts = Counter(g.get("data-state") for g in groups)
    assert all(n == 1 for n in counts.values()), counts
    return {g.get("data-state"): g for g in groups}


def box_of(group: etree._Element) -> Rect:
    """The rectangle of a state's own shape (a circle for a history pseudo-state)."""
    shape = next(child for child in group if "sc-box" in classes(child))
    if tag(shape) == "circle":
        cx, cy, r = (float(shape.get(a)) for a in ("cx", "cy", "r"))
        return Rect(cx - r, cy - r, 2 * r, 2 * r)
    assert tag(shape) == "rect"
    return rect_of(shape)


def chart_frame(root: etree._Element) -> Rect:
    frame = root.find(f".//{{{SVG_NS}}}g[@class='sc-chart']")
    assert frame is not None
    return box_of(frame)


def inside(inner: Rect, outer: Rect) -> bool:
    return (
        outer.x - EPSILON <= inner.x
        and outer.y - EPSILON <= inner.y
        and inner.x2 <= outer.x2 + EPSILON
        and inner.y2 <= outer.y2 + EPSILON
    )


def overlap(a: Rect, b: Rect) -> bool:
    """Whether two rectangles share more than a rounding error of area."""
    return (
        a.x + EPSILON < b.x2 - EPSILON
        and b.x + EPSILON < a.x2 - EPSILON
        and a.y + EPSILON < b.y2 - EPSILON
        and b.y + EPSILON < a.y2 - EPSILON
    )


def label_rects(root: etree._Element) -> list[Rect]:
    return [
        rect_of(r) for r in root.findall(f".//{{{SVG_NS}}}g[@class='sc-label']/{{{SVG_NS}}}rect")
    ]


def check_diagram(chart: Chart, svg: str) -> etree._Element:
    """Everything a rendered chart must satisfy, whatever the chart."""
    root = parse(svg)

    # a sized, self-contained document
    view = [float(v) for v in root.get("viewBox").split()]
    assert view[2] == float(root.get("width")) > 0
    assert view[3] == float(root.get("height")) > 0
    assert_self_contained(root)

    # each state exactly once, as a group titled with its id, nested in its parent's group
    groups = state_groups(root)
    assert set(groups) == set(chart.ids)
    for state_id, group in groups.items():
        assert group[0].tag == f"{{{SVG_NS}}}title" and group[0].text == state_id
        node = chart.state(state_id)
        enclosing = next(group.iterancestors(f"{{{SVG_NS}}}g"))
        if node.parent == 0:
            assert enclosing.get("class") == "sc-chart"
        else:
            assert enclosing.get("data-state") == chart.states[node.parent].id

    # boxes nest, siblings (parallel regions among them) never overlap, all in view
    frame = chart_frame(root)
    assert inside(frame, Rect(*view))
    boxes = {state_id: box_of(group) for state_id, group in groups.items()}
    for node in chart.states[1:]:
        parent = frame if node.parent == 0 else boxes[chart.states[node.parent].id]
        assert inside(boxes[node.id], parent), (node.id, boxes[node.id], parent)
    for parent in chart.states:
        siblings = [boxes[chart.states[c].id] for c in parent.children]
        for a, b in combinations(siblings, 2):
            assert not overlap(a, b), (parent.id, a, b)
    return root


PAINT = {"fill", "stroke", "filter", "clip-path", "mask", "cursor", "style"}
PAINT |= {"marker-start", "marker-mid", "marker-end"}


def assert_self_contained(root: etree._Element) -> None:
    """No scripts, no foreign content, nothing fetched: no href or src at all, no url() in
    any attribute or style that could take one. (Text such as a condition may mention a
    URL: that is just text.)"""
    forbidden = {"script", "foreignObject", "image", "use", "a", "iframe", "object", "embed"}
    for element in root.iter():
        assert isinstance(element.tag, str)  # no comments or processing instructions
        assert tag(element) not in forbidden, tag(element)
        for name, value in element.attrib.items():
            local = etree.QName(name).localname
            assert local not in ("href", "src"), (name, value)
            assert not local.startswith("on"), name  # no event handlers
            if local in PAINT:
                assert "url(" not in value, (name, value)
    for style in root.iter(f"{{{SVG_NS}}}style"):
        text = style.text or ""
        assert "url(" not in text and "@import" not in text and "//" not in text


def active_ids(root: etree._Element) -> set[str]:
    found = set()
    for state_id, group in state_groups(root).items():
        marks = classes(group) & {"active", "inactive"}
        assert len(marks) == 1, (state_id, marks)
        if marks == {"active"}:
            found.add(state_id)
    return found


# ---- every document ------------------------------------------------------------------------


@pytest.mark.parametrize("path", _w3c_documents())
def test_every_w3c_document_renders(path: Path | None) -> None:
    if path is None:
        w3c.require()  # skips, or fails when the run requires the suite
    chart = MemoryDriver().load_file(path)
    # How fast: benchmarks/diagram_rendering.py, not a timed test.
    check_diagram(chart, render_svg(chart))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_every_example_renders(path: Path) -> None:
    chart = load_chart_file(path)
    root = check_diagram(chart, render_svg(chart))
    assert not _overlapping_labels(root)


def _overlapping_labels(root: etree._Element) -> list[tuple[Rect, Rect]]:
    return [(a, b) for a, b in combinations(label_rects(root), 2) if overlap(a, b)]


# ---- what the order example shows ----------------------------------------------------------


@pytest.fixture(scope="module")
def order() -> Chart:
    return load_chart_file(ORDER)


def transitions(root: etree._Element) -> list[etree._Element]:
    return root.findall(f".//{{{SVG_NS}}}g[@data-source]")


def test_transitions_are_arrows_labelled_with_their_events(order: Chart) -> None:
    root = parse(render_svg(order))
    arrows = {(g.get("data-source"), g.get("data-target")): g for g in transitions(root)}
    assert set(arrows) == {
        ("awaiting_payment", "paid"),
        ("awaiting_payment", "cancelled"),
        ("packing", "shipped"),
        ("drafting", "invoiced"),
        ("paid", "completed"),
    }
    received = arrows[("awaiting_payment", "paid")]
    assert received.get("data-event") == "payment.received [_event.data.amount > 0]"
    for g in arrows.values():
        assert len(g.findall(f"{{{SVG_NS}}}path")) == 2  # the line and its arrowhead
    texts = [t.text for t in root.iter(f"{{{SVG_NS}}}text") if "sc-event" in classes(t)]
    assert {"payment.timeout", "packed", "invoice.sent", "done.state.paid"} <= set(texts)
    assert "payment.received" in texts and "[_event.data.amount > 0]" in texts


def test_a_targetless_transition_is_listed_inside_its_state(order: Chart) -> None:
    group = state_groups(parse(render_svg(order)))["awaiting_payment"]
    lines = [t.text for t in group.iter(f"{{{SVG_NS}}}text") if "sc-line" in classes(t)]
    assert lines == ["payment.reminder / assign, log"]


def test_parallel_regions_sit_side_by_side_between_dashed_lines(order: Chart) -> None:
    root = parse(render_svg(order))
    groups = state_groups(root)
    shipping, invoicing = box_of(groups["shipping"]), box_of(groups["invoicing"])
    assert shipping.x2 <= invoicing.x and shipping.y == invoicing.y
    separators = groups["paid"].findall(f"{{{SVG_NS}}}line[@class='sc-separator']")
    assert len(separators) == 1
    line = separators[0]
    assert line.get("stroke-dasharray")
    assert shipping.x2 < float(line.get("x1")) == float(line.get("x2")) < invoicing.x


def test_initial_states_get_a_dot_and_an_arrow(order: Chart) -> None:
    root = parse(render_svg(order))
    initials = root.findall(f".//{{{SVG_NS}}}g[@class='sc-initial']")
    assert {(g.get("data-owner"), g.get("data-target")) for g in initials} == {
        ("", "awaiting_payment"),
        ("shipping", "packing"),
        ("invoicing", "drafting"),
    }
    for g in initials:
        assert g.find(f"{{{SVG_NS}}}circle") is not None
        assert g.find(f"{{{SVG_NS}}}path") is not None


def test_final_states_have_a_double_border(order: Chart) -> None:
    groups = state_groups(parse(render_svg(order)))
    for state_id in ("shipped", "invoiced", "completed", "cancelled"):
        inner = groups[state_id].find(f"{{{SVG_NS}}}rect[@class='sc-inner']")
        assert inner is not None
        assert inside(rect_of(inner), box_of(groups[state_id]))
    assert groups["packing"].find(f"{{{SVG_NS}}}rect[@class='sc-inner']") is None


# ---- highlighting ----------------------------------------------------------------------------


def test_exactly_the_active_states_are_highlighted(order: Chart) -> None:
    root = parse(render_svg(order, active=("packing", "drafting")))
    assert active_ids(root) == {"packing", "drafting"}
    groups = state_groups(root)
    active_box = next(c for c in groups["packing"] if "sc-box" in classes(c))
    plain_box = next(c for c in groups["shipped"] if "sc-box" in classes(c))
    assert active_box.get("fill") != plain_box.get("fill")
    assert active_box.get("stroke") != plain_box.get("stroke")
    assert active_ids(parse(render_svg(order))) == set()


def test_the_configuration_of_a_running_execution_is_highlighted(order: Chart) -> None:
    driver = MemoryDriver()
    session = driver.start(order)
    session.send("payment.received", {"amount": 10})
    assert session.configuration == {"paid", "shipping", "invoicing", "packing", "drafting"}
    root = parse(render_svg(order, active=session.configuration))
    assert active_ids(root) == set(session.configuration)


def test_unknown_active_ids_are_ignored(order: Chart) -> None:
    svg = render_svg(order, active=["packing", "no-such-state"])
    assert active_ids(parse(svg)) == {"packing"}
    assert "no-such-state" not in svg


# ---- other shapes ---------------------------------------------------------------------------


SHAPES = f"""<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript" initial="main">
  <state id="main" initial="idle">
    <history id="back" type="shallow"><transition target="idle"/></history>
    <history id="deep_back" type="deep"><transition target="busy"/></history>
    <state id="idle">
      <transition event="tick" target="idle"/>
      <transition event="tock" target="idle"/>
      <transition event="go" target="busy"/>
      <transition event="both" target="busy other"/>
    </state>
    <state id="busy">
      <transition cond="true" target="idle"/>
      <transition event="up" target="main"/>
    </state>
    <parallel id="other">
      <state id="r1"/><state id="r2"/><state id="r3"/>
    </parallel>
    <transition event="reset" target="back"/>
  </state>
</scxml>"""


def test_self_loops_history_eventless_and_multiple_targets() -> None:
    chart = load_chart(SHAPES)
    root = check_diagram(chart, render_svg(chart))
    groups = state_groups(root)
    assert box_of(groups["back"]).w == box_of(groups["back"]).h  # circles
    marks = {
        state_id: groups[state_id].find(f"{{{SVG_NS}}}text").text
        for state_id in ("back", "deep_back")
    }
    assert marks == {"back": "H", "deep_back": "H*"}

    arrows = transitions(root)
    loops = [g for g in arrows if g.get("data-source") == g.get("data-target") == "idle"]
    assert len(loops) == 2
    for g in loops:
        assert "C" in g.find(f"{{{SVG_NS}}}path").get("d")  # a curve, not a line
    both = [g.get("data-target") for g in arrows if g.get("data-event") == "both"]
    assert sorted(both) == ["busy", "other"]  # one arrow per target
    always = [g for g in arrows if g.get("data-event") == "(always) [true]"]
    assert [g.get("data-source") for g in always] == ["busy"]
    defaults = [g for g in arrows if "sc-default" in classes(g)]
    assert {(g.get("data-source"), g.get("data-target")) for g in defaults} == {
        ("back", "idle"),
        ("deep_back", "busy"),
    }
    assert not _overlapping_labels(root)


def test_a_long_condition_is_shortened_on_the_arrow_but_whole_in_the_tooltip() -> None:
    cond = "order.total &gt; 100 &amp;&amp; order.customer.tier === 'gold' &amp;&amp; !order.flag"
    chart = load_chart(
        f'<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript">'
        f'<state id="a"><transition event="pay" cond="{cond}" target="b"/></state>'
        '<final id="b"/></scxml>'
    )
    root = parse(render_svg(chart))
    (arrow,) = transitions(root)
    whole = "pay [order.total > 100 && order.customer.tier === 'gold' && !order.flag]"
    assert arrow.get("data-event") == whole
    assert whole in arrow.find(f"{{{SVG_NS}}}title").text
    texts = [t.text for t in root.iter(f"{{{SVG_NS}}}text") if "sc-event" in classes(t)]
    assert texts[0] == "pay"
    assert texts[1].endswith("\u2026") and len(texts[1]) <= 36


# ---- escaping ---------------------------------------------------------------------------------

HOSTILE = f"""<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript"
    name="&lt;script&gt;alert(1)&lt;/script&gt;">
  <state id="a">
    <transition event="go&lt;&amp;&quot;x" cond="x &lt; 1 &amp;&amp; y == &quot;&lt;/text&gt;&quot;"
        target="b"/>
    <transition event="stay&gt;" cond="&apos;&lt;svg onload=alert(1)&gt;&apos;"/>
  </state>
  <final id="b"/>
</scxml>"""


def renamed(chart: Chart, old: str, new: str) -> Chart:
    """A copy of ``chart`` with one state id changed (the core refuses such ids in documents;
    the renderer must not rely on that)."""
    index = chart.ids[old]
    states = tuple(dataclasses.replace(s, id=new) if s.index == index else s for s in chart.states)
    ids = {(new if k == old else k): v for k, v in chart.ids.items()}
    return dataclasses.replace(chart, states=states, ids=ids)


def test_text_from_the_document_is_escaped() -> None:
    evil_id = "<g onload=\"alert('x')\">&amp;"
    chart = renamed(load_chart(HOSTILE), "a", evil_id)
    svg = render_svg(chart, active=[evil_id])
    assert "<script" not in svg and "<svg onload" not in svg and "<g onload" not in svg
    root = check_diagram(chart, svg)
    assert root.find(f"{{{SVG_NS}}}title").text == "<script>alert(1)</script>"
    assert active_ids(root) == {evil_id}
    (arrow,) = transitions(root)
    assert arrow.get("data-source") == evil_id
    assert arrow.get("data-event") == 'go<&"x [x < 1 && y == "</text>"]'
    texts = {t.text for t in root.iter(f"{{{SVG_NS}}}text")}
    assert 'go<&"x' in texts and '[x < 1 && y == "</text>"]' in texts
    assert "stay> ['<svg onload=alert(1)>']" in texts  # the targetless line, in the box


def test_characters_xml_cannot_carry_do_not_break_the_document(order: Chart) -> None:
    chart = renamed(order, "packing", "pack\x01ing\ufffe")
    root = parse(render_svg(chart))
    assert "pack\ufffding\ufffd" in state_groups(root)


# ---- determinism and size -------------------------------------------------------------------


def test_rendering_is_deterministic(order: Chart) -> None:
    first = render_svg(order, active=("packing", "drafting"))
    assert render_svg(order, active=["drafting", "packing"]) == first
    assert render_svg(load_chart_file(ORDER), active=("packing", "drafting")) == first
    script = (
        "import sys; from statecharts.core import load_chart_file; "
        "from statecharts.diagram import render_svg; "
        f"sys.stdout.write(render_svg(load_chart_file({str(ORDER)!r}), "
        "active=('packing', 'drafting')))"
    )
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, check=True
        )
        assert out.stdout.decode() == first


def big_chart(groups: int, per_group: int) -> str:
    """Hundreds of states: compound and parallel groups of small compounds, transitions
    between neighbours, across groups, out of groups, and to a shared final state."""
    parts = [f'<scxml xmlns="{NS}" version="1.0">']
    for g in range(groups):
        kind = "parallel" if g % 3 == 0 else "state"
        parts.append(f'<{kind} id="g{g}">')
        for i in range(per_group):
            nxt = f"g{(g + 1) % groups}s{(i + 1) % per_group}a"
            parts.append(
                f'<state id="g{g}s{i}"><state id="g{g}s{i}a">'
                f'<transition event="e{i}" target="{nxt}"/></state>'
                f'<state id="g{g}s{i}b"><transition event="x" target="done"/></state></state>'
            )
        parts.append(f'<transition event="out" target="g{(g + 2) % groups}"/></{kind}>')
    parts.append('<final id="done"/></scxml>')
    return "".join(parts)


def test_a_chart_of_hundreds_of_states_renders_whole() -> None:
    """(How fast is measured by benchmarks/diagram_rendering.py, not by a timed test.)"""
    chart = load_chart(big_chart(20, 10))
    assert len(chart.states) > 600
    check_diagram(chart, render_svg(chart))


def test_every_kind_of_state_is_covered_by_these_tests() -> None:
    kinds = {s.kind for s in load_chart(SHAPES).states} | {
        s.kind for s in load_chart_file(ORDER).states
    }
    assert kinds == set(Kind)


# ---- where labels go -------------------------------------------------------------------------


def path_points(d: str) -> list[tuple[float, float]]:
    """An SVG path of M, L and C commands (what the renderer writes) as one polyline, each
    curve sampled at 32 points."""
    points: list[tuple[float, float]] = []
    for command, numbers in re.findall(r"([MLC])([^MLC]*)", d):
        values = [float(v) for v in numbers.split()]
        if command in "ML":
            points.append((values[0], values[1]))
            continue
        (x0, y0), (x1, y1, x2, y2, x3, y3) = points[-1], values
        for i in range(1, 33):
            t = i / 32
            u = 1 - t
            points.append(
                (
                    u**3 * x0 + 3 * u * u * t * x1 + 3 * u * t * t * x2 + t**3 * x3,
                    u**3 * y0 + 3 * u * u * t * y1 + 3 * u * t * t * y2 + t**3 * y3,
                )
            )
    return points


def crosses(p: tuple[float, float], q: tuple[float, float], rect: Rect) -> bool:
    """Whether the segment pq enters the rectangle (sampled finely: segments are short)."""
    steps = max(1, int(max(abs(q[0] - p[0]), abs(q[1] - p[1]))))
    for i in range(steps + 1):
        t = i / steps
        x, y = p[0] + (q[0] - p[0]) * t, p[1] + (q[1] - p[1]) * t
        if rect.x + EPSILON < x < rect.x2 - EPSILON and rect.y + EPSILON < y < rect.y2 - EPSILON:
            return True
    return False


def label_problems(root: etree._Element) -> list[str]:
    """Labels that cross a state's border, cover a state or a separator, or lie on an arrow."""
    problems: list[str] = []
    boxes = {state_id: box_of(group) for state_id, group in state_groups(root).items()}
    leaves = {
        state_id
        for state_id, group in state_groups(root).items()
        if classes(group) & {"sc-atomic", "sc-final", "sc-history"}
    }
    arrows = [
        path_points(path.get("d"))
        for g in root.iter(f"{{{SVG_NS}}}g")
        if classes(g) & {"sc-transition", "sc-initial"}
        for path in g.findall(f"{{{SVG_NS}}}path")
        if "sc-head" not in classes(path)
    ]
    separators = [
        ((float(s.get("x1")), float(s.get("y1"))), (float(s.get("x2")), float(s.get("y2"))))
        for s in root.iter(f"{{{SVG_NS}}}line")
        if "sc-separator" in classes(s)
    ]
    for group in root.iter(f"{{{SVG_NS}}}g"):
        if classes(group) != {"sc-label"}:
            continue
        label = rect_of(group.find(f"{{{SVG_NS}}}rect"))
        text = " ".join(t.text for t in group.findall(f"{{{SVG_NS}}}text"))
        for state_id, box in boxes.items():
            if overlap(label, box) and (state_id in leaves or not inside(label, box)):
                problems.append(f"{text!r} crosses the border of {state_id}")
        for line in arrows:
            if any(crosses(p, q, label) for p, q in pairwise(line)):
                problems.append(f"{text!r} lies on an arrow")
        if any(crosses(p, q, label) for p, q in separators):
            problems.append(f"{text!r} lies on a separator")
    return problems


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_labels_cross_no_border_and_lie_on_no_arrow(path: Path) -> None:
    # The loan example had "score.ready" across reviewing's border and its long guard label
    # over the arrows it sat between.
    chart = load_chart_file(path)
    assert label_problems(parse(render_svg(chart))) == []
