"""Write a laid-out, routed chart as one self-contained SVG document.

Only inline presentation attributes and an inline ``<style>``: no scripts, no links, no
fonts or images from anywhere. Every piece of text from the chart goes through
:func:`~statecharts.diagram.text.escape`. Coordinates are absolute (no transforms), so a
state's box is exactly the ``x``/``y``/``width``/``height`` of its first shape.
"""

from __future__ import annotations

from collections.abc import Set

from statecharts.core.model import Chart, Kind
from statecharts.diagram.geometry import Path, Point, Rect, is_line, path_bounds
from statecharts.diagram.layout import MARGIN, PAD, Box, Layout
from statecharts.diagram.routing import DOT_RADIUS, Route
from statecharts.diagram.text import LABEL_LINE, escape, number

SVG_NS = "http://www.w3.org/2000/svg"
FONT = "Verdana, 'DejaVu Sans', 'Bitstream Vera Sans', sans-serif"
INK = "#1d2433"
LINE = "#56657f"
ARROW = "#3b4252"
ACTIVE_LINE = "#1e7b34"

# role -> (fill, stroke, stroke width) when inactive, and when active
_STYLE = {
    "root": (("#fcfcfd", "#c5ccd8", 1.0), ("#fcfcfd", "#c5ccd8", 1.0)),
    "atomic": (("#f3f6fb", LINE, 1.2), ("#c9efd0", ACTIVE_LINE, 2.6)),
    "final": (("#f3f6fb", LINE, 1.2), ("#c9efd0", ACTIVE_LINE, 2.6)),
    "history": (("#ffffff", LINE, 1.2), ("#c9efd0", ACTIVE_LINE, 2.2)),
    "compound": (("#ffffff", LINE, 1.2), ("#f0faf2", ACTIVE_LINE, 2.2)),
    "parallel": (("#ffffff", LINE, 1.2), ("#f0faf2", ACTIVE_LINE, 2.2)),
    "region": (("none", "none", 0.0), ("#f0faf2", ACTIVE_LINE, 1.2)),
}
_RADIUS = {"root": 4.0, "atomic": 8.0, "final": 8.0, "compound": 10.0, "parallel": 10.0}

STYLE = (
    ".sc-diagram .sc-transition:hover path{stroke:#c62828}"
    ".sc-diagram .sc-transition:hover .sc-head{fill:#c62828}"
    ".sc-diagram .sc-state.active>.sc-name{font-weight:bold}"
)


def write_svg(
    chart: Chart,
    layout: Layout,
    routes: list[Route],
    active: Set[str],
    invoking: Set[str] = frozenset(),
) -> str:
    frame = frame_of(layout, routes)
    bounds = frame.inflate(MARGIN)
    name = escape(chart.name or "scxml")
    out: list[str] = [
        f'<svg xmlns="{SVG_NS}" class="sc-diagram" width="{number(bounds.w)}" '
        f'height="{number(bounds.h)}" viewBox="{_box(bounds)}" role="img" aria-label="{name}" '
        f'font-family="{escape(FONT)}" font-size="12" fill="{INK}">',
        f"<title>{name}</title>",
        f"<style>{STYLE}</style>",
        '<g class="sc-states">',
    ]
    _States(out, chart, layout, active, invoking).write(0, frame)
    out.append("</g>")
    out.append('<g class="sc-transitions">')
    for r in routes:
        _route(out, chart, r)
    out.append("</g>")
    out.append('<g class="sc-labels">')
    for r in routes:
        if r.label is not None and r.edge is not None:
            _label(out, r.label, r.label_lines or r.edge.label)
    out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


# How far a label keeps from the chart's frame when the frame grows to hold it.
LABEL_CLEARANCE = 4.0


def frame_of(layout: Layout, routes: list[Route]) -> Rect:
    """The chart's own box, grown to hold every arrow and label (a label clear of its line)."""
    area = layout.boxes[0].rect
    for r in routes:
        area = area.union(path_bounds(r.path))
        if r.label is not None:
            area = area.union(r.label.inflate(LABEL_CLEARANCE))
    return area


def _box(rect: Rect) -> str:
    return " ".join(number(v) for v in (rect.x, rect.y, rect.w, rect.h))


class _States:
    """The nested state groups: each state's group holds its shape, its text, then the
    groups of its children, so the document tree mirrors the chart."""

    def __init__(
        self,
        out: list[str],
        chart: Chart,
        layout: Layout,
        active: Set[str],
        invoking: Set[str] = frozenset(),
    ) -> None:
        self.out = out
        self.chart = chart
        self.boxes = layout.boxes
        self.active = active
        self.invoking = invoking
        self.separators: dict[int, list[tuple[Point, Point]]] = {}
        for parallel, a, b in layout.separators:
            self.separators.setdefault(parallel, []).append((a, b))

    def write(self, index: int, frame: Rect | None = None) -> None:
        out = self.out
        node = self.chart.states[index]
        box = self.boxes[index]
        r = frame if frame is not None else box.rect
        is_active = index != 0 and node.id in self.active
        fill, stroke, width = _STYLE[box.role][is_active]
        if index == 0:
            out.append('<g class="sc-chart">')
        else:
            status = "active" if is_active else "inactive"
            invoking = node.id in self.invoking
            out.append(
                f'<g class="sc-state sc-{box.role} {status}'
                f'{" invoking" if invoking else ""}" data-state="{escape(node.id)}">'
                f"<title>{escape(node.id)}{' (invoking)' if invoking else ''}</title>"
            )
        paint = f'fill="{fill}" stroke="{stroke}" stroke-width="{number(width)}"'
        if box.role == "history":
            cx, cy = r.center
            out.append(
                f'<circle class="sc-box" cx="{number(cx)}" cy="{number(cy)}" '
                f'r="{number(r.w / 2)}" {paint}/>'
            )
            mark = "H*" if node.kind == Kind.HISTORY_DEEP else "H"
            out.append(_text(cx, cy + 4, mark, 'text-anchor="middle" font-size="10"', "sc-name"))
            out.append("</g>")
            return
        dash = ' stroke-dasharray="4 3"' if box.role == "region" else ""
        radius = number(_RADIUS.get(box.role, 6))
        out.append(f'<rect class="sc-box" {_rect(r)} rx="{radius}" {paint}{dash}/>')
        if box.role == "final":
            out.append(
                f'<rect class="sc-inner" {_rect(r.inflate(-3.5))} rx="5" fill="none" '
                f'stroke="{stroke}" stroke-width="{number(min(width, 1.6))}"/>'
            )
        if box.role in ("atomic", "final"):
            _leaf_text(out, box)
        else:
            _container_text(out, box, r)
        if index != 0 and node.id in self.invoking:
            # A running invocation: a small filled badge in the top right corner.
            out.append(
                f'<circle class="sc-invoking" cx="{number(r.x2 - 7)}" cy="{number(r.y + 7)}" '
                f'r="3.5" fill="{stroke}"/>'
            )
        for a, b in self.separators.get(index, ()):
            out.append(
                f'<line class="sc-separator" x1="{number(a[0])}" y1="{number(a[1])}" '
                f'x2="{number(b[0])}" y2="{number(b[1])}" stroke="{LINE}" '
                f'stroke-width="1.2" stroke-dasharray="6 4"/>'
            )
        for child in node.children:
            self.write(child)
        out.append("</g>")


def _leaf_text(out: list[str], box: Box) -> None:
    r = box.rect
    out.append(_text(r.x + r.w / 2, r.y + 21, box.label, 'text-anchor="middle"', "sc-name"))
    if box.lines:
        y = r.y + 34
        out.append(
            f'<line x1="{number(r.x)}" y1="{number(y)}" x2="{number(r.x2)}" y2="{number(y)}" '
            f'stroke="{LINE}" stroke-width="0.6"/>'
        )
        for i, line in enumerate(box.lines):
            out.append(
                _text(
                    r.x + 8, y + 15 + 14 * i, line, 'font-size="11" font-style="italic"', "sc-line"
                )
            )


def _container_text(out: list[str], box: Box, r: Rect) -> None:
    style = 'font-weight="bold"' if box.role != "region" else 'font-style="italic"'
    if box.role == "root":
        style += ' fill="#6b7587"'
    out.append(_text(r.x + PAD, r.y + 18, box.label, style, "sc-name"))
    for i, line in enumerate(box.lines):
        out.append(
            _text(
                r.x + PAD, r.y + 33 + 14 * i, line, 'font-size="11" font-style="italic"', "sc-line"
            )
        )


def _route(out: list[str], chart: Chart, r: Route) -> None:
    path = _path_data(r.path)
    head = "M" + "L".join(_xy(p) for p in r.head) + "Z"
    target = chart.states[r.target].id
    if r.kind == "initial" and r.dot is not None:
        owner = chart.states[r.source].id if r.source else ""
        out.append(
            f'<g class="sc-initial" data-owner="{escape(owner)}" data-target="{escape(target)}">'
            f'<circle cx="{number(r.dot[0])}" cy="{number(r.dot[1])}" r="{number(DOT_RADIUS)}" '
            f'fill="{ARROW}"/>'
        )
    else:
        source = chart.states[r.source].id
        title = r.edge.title if r.edge is not None else ""
        event = title if r.kind == "transition" else "default"
        tooltip = f"{source} \u2192 {target}: {event}"
        out.append(
            f'<g class="sc-transition sc-{r.kind}" data-source="{escape(source)}" '
            f'data-target="{escape(target)}" data-event="{escape(event)}">'
            f"<title>{escape(tooltip)}</title>"
        )
    dash = ' stroke-dasharray="5 3"' if r.kind == "default" else ""
    out.append(f'<path d="{path}" fill="none" stroke="{ARROW}" stroke-width="1.3"{dash}/>')
    out.append(f'<path class="sc-head" d="{head}" fill="{ARROW}"/>')
    out.append("</g>")


def _label(out: list[str], rect: Rect, lines: tuple[str, ...]) -> None:
    out.append(f'<g class="sc-label"><rect {_rect(rect)} rx="3" fill="#fff" fill-opacity="0.9"/>')
    for i, line in enumerate(lines):
        y = rect.y + LABEL_LINE * (i + 1) - 1
        out.append(_text(rect.x + 3, y, line, 'font-size="11"', "sc-event"))
    out.append("</g>")


def _xy(p: Point) -> str:
    return f"{number(p[0])} {number(p[1])}"


def _path_data(path: Path) -> str:
    data = ["M", _xy(path[0][0])]
    for c in path:
        if is_line(c):
            data += ["L", _xy(c[3])]
        else:
            data += ["C", _xy(c[1]), " ", _xy(c[2]), " ", _xy(c[3])]
    return "".join(data)


def _rect(r: Rect) -> str:
    return f'x="{number(r.x)}" y="{number(r.y)}" width="{number(r.w)}" height="{number(r.h)}"'


def _text(x: float, y: float, text: str, attrs: str, css: str) -> str:
    return f'<text class="{css}" x="{number(x)}" y="{number(y)}" {attrs}>{escape(text)}</text>'
