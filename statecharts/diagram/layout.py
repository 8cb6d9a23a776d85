"""Nested-box layout of a compiled chart: where every state's box goes.

Sizes are computed bottom-up and positions top-down, both by walking state indices (a
child's index is always greater than its parent's), so there is no recursion and the cost is
linear in states and transitions plus the layer sorts.

- An atomic or final state is a box sized to its name and its targetless transitions.
- A compound state (and the chart itself) has a title area, then its children in layers
  (see :mod:`statecharts.diagram.layering`), each layer a centred row, wrapped when wide. A
  filled dot above the initial child starts the initial arrow.
- A parallel state has a title area, then its regions side by side, with dashed separators.
- History pseudo-states are small circles at the right end of their parent's title area.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise

from statecharts.core.model import Chart, Kind, StateNode
from statecharts.diagram.edges import Edge, Relation, chart_edges, lift, targetless_lines
from statecharts.diagram.geometry import Point, Rect
from statecharts.diagram.layering import layer
from statecharts.diagram.ports import CORNER_ROOM, MIN_GAP
from statecharts.diagram.text import SMALL_FONT, STATE_FONT, label_size, text_width, wrap_lines

MARGIN = 16.0  # around the chart
PAD = 12.0  # inside a container, around its children
MIN_WIDTH = 72.0
ATOMIC_HEIGHT = 34.0
LINE_HEIGHT = 14.0
TITLE_HEIGHT = 28.0
HISTORY_SIZE = 22.0
H_GAP = 32.0  # between boxes of a row
V_GAP = 38.0  # between rows
REGION_GAP = 24.0  # between parallel regions (the separator runs down its middle)
INITIAL_SPACE = 28.0  # above the first row, for the initial dot
MAX_ROW_WIDTH = 760.0  # a layer wider than this wraps
MAX_LAYERS = 10  # a container with more layers packs them into shared rows
LOOP_SIZE = 22.0  # how far a self-transition loop reaches right of its box
LABEL_CAP = 200.0  # the widest label the gaps make room for
LABEL_WRAP = 14  # characters per line of a label wrapped to sit beside a vertical arrow
MAX_ARRIVALS = 12  # a box grows wider for this many arrows ending on it at most
LABEL_SIDE = 8.0  # between an arrow and a label beside it, and between the label and a border


@dataclass(slots=True)
class Box:
    index: int
    parent: int  # -1 for the chart itself
    role: str  # root, atomic, final, compound, region, parallel, history
    label: str
    lines: tuple[str, ...]  # targetless transitions, listed inside
    rect: Rect
    title: float  # height of the title area (name and lines)


@dataclass(slots=True)
class Layout:
    boxes: list[Box]  # by state index; boxes[0] is the chart itself
    edges: list[Edge]
    separators: list[tuple[int, Point, Point]] = field(default_factory=list)  # (parallel, a, b)
    # (container, dot centre, targets of its initial transition)
    initials: list[tuple[int, Point, tuple[int, ...]]] = field(default_factory=list)


def layout_chart(chart: Chart) -> Layout:
    return _Layouter(chart).run()


class _Layouter:
    def __init__(self, chart: Chart) -> None:
        self.chart = chart
        n = len(chart.states)
        self.size: list[tuple[float, float]] = [(0.0, 0.0)] * n
        self.offset: list[Point] = [(0.0, 0.0)] * n  # relative to the parent's corner
        self.title: list[float] = [0.0] * n
        self.lines: list[tuple[str, ...]] = [targetless_lines(s) for s in chart.states]
        self.edges = chart_edges(chart)
        self.loop_room = [0.0] * n  # extra room right of a box for its self loops
        self.arrivals = [0] * n  # arrows from boxes apart ending on each state
        # container -> (child holding the source, child holding the target, label width,
        # the label's width wrapped narrow)
        self.sibling_edges: dict[int, list[tuple[int, int, float, float]]] = {}
        self.separators: list[tuple[int, Point, Point]] = []
        self.dots: list[tuple[int, Point, tuple[int, ...]]] = []  # relative to the container
        self._index_edges()

    def _index_edges(self) -> None:
        loops: dict[int, list[float]] = {}
        for edge in self.edges:
            if edge.relation is Relation.SELF:
                loops.setdefault(edge.source, []).append(label_size(edge.label)[0])
            elif edge.relation is Relation.APART:
                self.arrivals[edge.target] += 1
            if edge.relation is Relation.APART and not edge.default:
                lifted = lift(self.chart, edge.source, edge.target)
                if lifted is not None:
                    parent, a, b = lifted
                    width = min(label_size(edge.label)[0], LABEL_CAP)
                    narrow = min(width, label_size(wrap_lines(edge.label, LABEL_WRAP))[0])
                    self.sibling_edges.setdefault(parent, []).append((a, b, width, narrow))
        for state, widths in loops.items():
            self.loop_room[state] = LOOP_SIZE + 8 * len(widths) + min(max(widths), LABEL_CAP)

    # -- sizes, bottom-up ------------------------------------------------------------------

    def run(self) -> Layout:
        states = self.chart.states
        for node in reversed(states):
            if node.is_history:
                self.size[node.index] = (HISTORY_SIZE, HISTORY_SIZE)
            elif node.kind in (Kind.ATOMIC, Kind.FINAL):
                self._atomic(node)
            elif node.kind == Kind.PARALLEL:
                self._parallel(node)
            else:
                self._compound(node)
        return self._place()

    def _lines_width(self, index: int) -> float:
        return max((text_width(line, SMALL_FONT) for line in self.lines[index]), default=0.0)

    def _atomic(self, node: StateNode) -> None:
        lines = self.lines[node.index]
        width = max(
            MIN_WIDTH,
            text_width(node.id, STATE_FONT) + 28,
            self._lines_width(node.index) + 16,
            self._arrival_room(node.index),
        )
        if node.history:  # an atomic state may own history states: circles at its right end
            width += len(node.history) * (HISTORY_SIZE + 6) + 6
        height = ATOMIC_HEIGHT + (8 + LINE_HEIGHT * len(lines) if lines else 0)
        self.size[node.index] = (width, height)
        self.title[node.index] = height
        self._histories(node, width)

    def _arrival_room(self, index: int) -> float:
        """The width at which the arrows arriving on a state could all end on its top side,
        apart enough for their heads not to meet (statecharts.diagram.ports): a state many
        arrows end on (a test's ``fail``) grows wider, up to MAX_ARRIVALS of them (past that,
        the ends spread round its other sides too)."""
        return 2 * CORNER_ROOM + (min(self.arrivals[index], MAX_ARRIVALS) - 1) * (MIN_GAP + 2)

    def _title(self, node: StateNode) -> tuple[float, float]:
        """(width, height) of a container's title area: name, lines and history circles."""
        name = self._name(node)
        width = 2 * PAD + text_width(name, STATE_FONT, bold=True)
        if node.history:
            width += 12 + len(node.history) * (HISTORY_SIZE + 6)
        width = max(width, 2 * PAD + self._lines_width(node.index))
        height = TITLE_HEIGHT + LINE_HEIGHT * len(self.lines[node.index])
        self.title[node.index] = height
        return width, height

    def _name(self, node: StateNode) -> str:
        if node.kind == Kind.ROOT:
            return self.chart.name or "scxml"
        return node.id

    def _histories(self, node: StateNode, width: float) -> None:
        x = width - PAD - len(node.history) * (HISTORY_SIZE + 6) + 6
        for h in node.history:
            self.offset[h] = (x, 3.0)
            x += HISTORY_SIZE + 6

    def _compound(self, node: StateNode) -> None:
        title_w, title_h = self._title(node)
        regular = [c for c in node.children if not self.chart.states[c].is_history]
        first = self._initial_child(node)
        layers = layer(
            regular, ((a, b) for a, b, *_ in self.sibling_edges.get(node.index, ())), first
        )
        gaps = self._pair_gaps(node.index)
        rows = self._rows(layers, gaps)
        targets = node.initial.targets if node.initial is not None else ()
        top = title_h + (INITIAL_SPACE if targets else 0)
        row_widths = [self._row_width(row, gaps) for row in rows]
        width = max(
            title_w,
            max(row_widths, default=0.0) + 2 * PAD,
            MIN_WIDTH,
            self._side_room(node.index, rows),
        )
        y = top
        row_gaps = self._row_gaps(node.index, rows)
        for r, row in enumerate(rows):
            height = max(self.size[c][1] for c in row)
            x = PAD + (width - 2 * PAD - row_widths[r]) / 2
            for i, c in enumerate(row):
                w, h = self.size[c]
                self.offset[c] = (x, y + (height - h) / 2)
                x += w + self.loop_room[c]
                if i + 1 < len(row):
                    x += gaps.get(_pair(c, row[i + 1]), H_GAP)
            y += height
            if r + 1 < len(rows):
                y += row_gaps[r]
        self.size[node.index] = (width, y + PAD)
        self._histories(node, width)
        if first is not None:
            fx, fy = self.offset[first]
            self.dots.append(
                (node.index, (fx + self._centre_in(targets[0], first), fy - 22), targets)
            )
        elif targets:  # the initial state is a history pseudo-state, up in the title area
            self.dots.append((node.index, (PAD + 6, title_h + 8), targets))

    def _centre_in(self, state: int, ancestor: int) -> float:
        """The x of ``state``'s centre, from the left side of ``ancestor`` (or itself)."""
        x = self.size[state][0] / 2
        while state != ancestor:
            x += self.offset[state][0]
            state = self.chart.states[state].parent
        return x

    def _initial_child(self, node: StateNode) -> int | None:
        """The child holding the first initial target (None if that is a history state)."""
        if node.initial is None or not node.initial.targets:
            return None
        target = node.initial.targets[0]
        for c in node.children:
            if c == target or target in self.chart.states[c].descendants:
                return None if self.chart.states[c].is_history else c
        return None

    def _side_room(self, parent: int, rows: list[list[int]]) -> float:
        """The width a container needs so that the label of an arrow running down between
        its rows fits beside the arrow (wrapped narrow), on one side of the middle, inside the
        container's border: rows are centred, so such an arrow runs near the middle."""
        row_of = {c: r for r, row in enumerate(rows) for c in row}
        need = 0.0
        for a, b, _width, narrow in self.sibling_edges.get(parent, ()):
            if row_of.get(a) != row_of.get(b):
                need = max(need, 2 * (narrow + 2 * LABEL_SIDE))
        return need

    def _pair_gaps(self, parent: int) -> dict[tuple[int, int], float]:
        """Room between two boxes that an arrow joins: enough for its label."""
        gaps: dict[tuple[int, int], float] = {}
        for a, b, width, _narrow in self.sibling_edges.get(parent, ()):
            key = _pair(a, b)
            gaps[key] = max(gaps.get(key, H_GAP), width + 24)
        return gaps

    def _rows(self, layers: list[list[int]], gaps: dict[tuple[int, int], float]) -> list[list[int]]:
        """Each layer a row, wrapped when too wide. Past MAX_LAYERS layers (long chains),
        layers share rows instead, read like text: left to right, then the next row."""
        widest = max((self.size[c][0] + self.loop_room[c] for ls in layers for c in ls), default=0)
        limit = max(MAX_ROW_WIDTH, widest)
        packing = len(layers) > MAX_LAYERS
        rows: list[list[int]] = []
        row: list[int] = []
        width = 0.0
        for items in layers:
            if row and not packing:
                rows.append(row)
                row, width = [], 0.0
            for c in items:
                extra = self.size[c][0] + self.loop_room[c]
                if row:
                    extra += gaps.get(_pair(row[-1], c), H_GAP)
                if row and width + extra > limit:
                    rows.append(row)
                    row, width = [], 0.0
                    extra = self.size[c][0] + self.loop_room[c]
                row.append(c)
                width += extra
        if row:
            rows.append(row)
        return rows

    def _row_width(self, row: list[int], gaps: dict[tuple[int, int], float]) -> float:
        width = sum(self.size[c][0] + self.loop_room[c] for c in row)
        return width + sum(gaps.get(_pair(a, b), H_GAP) for a, b in pairwise(row))

    def _row_gaps(self, parent: int, rows: list[list[int]]) -> list[float]:
        """Room between each row and the next: more when several labelled arrows cross it
        (an arrow joining the two rows). One pass over the arrows for all the gaps (a pass
        per gap made a container of thousands of states quadratic)."""
        row_of = {c: r for r, row in enumerate(rows) for c in row}
        crossing = [0] * len(rows)
        for a, b, _width, _narrow in self.sibling_edges.get(parent, ()):
            ra, rb = row_of.get(a), row_of.get(b)
            if ra is not None and rb is not None and abs(ra - rb) == 1:
                crossing[min(ra, rb)] += 1
        return [V_GAP + 15 * max(0, min(count, 8) - 1) for count in crossing]

    def _parallel(self, node: StateNode) -> None:
        title_w, title_h = self._title(node)
        regions = [c for c in node.children if not self.chart.states[c].is_history]
        height = max((self.size[c][1] for c in regions), default=0.0)
        for c in regions:
            if self.chart.states[c].kind == Kind.COMPOUND:
                self.size[c] = (self.size[c][0], height)
        pair_gaps = self._pair_gaps(node.index)
        gaps = [max(REGION_GAP, pair_gaps.get(_pair(a, b), 0.0)) for a, b in pairwise(regions)]
        row = sum(self.size[c][0] + self.loop_room[c] for c in regions) + sum(gaps)
        width = max(title_w, row + 2 * PAD, MIN_WIDTH)
        x = PAD + (width - 2 * PAD - row) / 2
        for i, c in enumerate(regions):
            self.offset[c] = (x, title_h)
            x += self.size[c][0] + self.loop_room[c]
            if i < len(gaps):
                middle = x + gaps[i] / 2
                self.separators.append(
                    (node.index, (middle, title_h - 4), (middle, title_h + height + 4))
                )
                x += gaps[i]
        self.size[node.index] = (width, title_h + height + (PAD if regions else 8))
        self._histories(node, width)

    # -- positions, top-down ---------------------------------------------------------------

    def _place(self) -> Layout:
        states = self.chart.states
        corner: list[Point] = [(MARGIN, MARGIN)] * len(states)
        boxes: list[Box] = []
        for node in states:
            if node.parent >= 0:
                px, py = corner[node.parent]
                dx, dy = self.offset[node.index]
                corner[node.index] = (px + dx, py + dy)
            x, y = corner[node.index]
            w, h = self.size[node.index]
            boxes.append(
                Box(
                    node.index,
                    node.parent,
                    _role(self.chart, node),
                    self._name(node),
                    self.lines[node.index],
                    Rect(x, y, w, h),
                    self.title[node.index],
                )
            )
        layout = Layout(boxes, self.edges)
        layout.separators = [_moved(corner[p], a, b, p) for p, a, b in self.separators]
        layout.initials = [(c, _shift(corner[c], dot), ts) for c, dot, ts in self.dots]
        return layout


def _pair(a: int, b: int) -> tuple[int, int]:
    return (a, b) if a < b else (b, a)


def _shift(corner: Point, p: Point) -> Point:
    return (corner[0] + p[0], corner[1] + p[1])


def _moved(corner: Point, a: Point, b: Point, parent: int) -> tuple[int, Point, Point]:
    return (parent, _shift(corner, a), _shift(corner, b))


def _role(chart: Chart, node: StateNode) -> str:
    if node.kind == Kind.ROOT:
        return "root"
    if node.is_history:
        return "history"
    if node.kind == Kind.PARALLEL:
        return "parallel"
    if node.kind == Kind.COMPOUND:
        parent = chart.states[node.parent]
        return "region" if parent.kind == Kind.PARALLEL else "compound"
    return "final" if node.kind == Kind.FINAL else "atomic"
