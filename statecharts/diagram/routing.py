"""The course of every arrow between the laid-out boxes.

An arrow is a path of cubic Bézier segments (straight lines are degenerate ones):

- between boxes apart: border to border along the line between their centres, arrows that
  join the same two boxes spread apart sideways. If that line runs through other boxes, the
  arrow may bow a little to either side, or detour: out of a side, along a lane just past
  what it would have crossed, and back in, with rounded corners; whichever crosses least
  (see :meth:`Scene.crossing`), the straight line winning ties. When each of those still
  crosses something, a polyline through one or two points just off the corners of what it
  ran into (:meth:`_Router._via`) is taken if it crosses less;
- a self-transition: a loop on the right side of its box;
- into a descendant, or out to an ancestor: a short straight arrow between the inner box and
  the nearest side of the outer one;
- an initial transition: from its container's dot to each target.

Then the ends of the arrows meeting each side of a box are spread along it
(:mod:`~statecharts.diagram.ports`), so that no two arrowheads overlap; an arrow whose ends
moved keeps them where moving them made it cross more. All of it is a function of the layout
alone (ties fall to document order): the same chart gives the same courses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from itertools import pairwise

from statecharts.diagram.edges import Edge, Relation
from statecharts.diagram.geometry import (
    Cubic,
    Path,
    Point,
    Rect,
    exit_point,
    line_cubic,
    quad_cubic,
    unit,
)
from statecharts.diagram.layout import LOOP_SIZE, Box, Layout
from statecharts.diagram.ports import ArrowEnd, spread
from statecharts.diagram.scene import Hit, Scene

SPREAD = 12.0  # between arrows joining the same two boxes
HEAD = 8.0  # arrowhead length
DOT_RADIUS = 4.5
LANE_GAP = 18.0  # between a detour and what it goes round
LANE_SPACING = 14.0  # between two detours side by side
CORNER = 10.0  # radius of a detour's corners
_BOWS = (1.0, -1.0)  # small bows tried before detours, in units of a fifth of the length
STRAIGHT_WEIGHT = 50.0  # a straight arrow's end moves this much less than a curve's
VIA_HITS = 4  # obstacles whose corners a course round them may pass
VIA_EXPAND = 6  # courses through one corner that still cross, tried with a second corner


@dataclass(frozen=True, slots=True)
class Route:
    kind: str  # transition, default (of a history state), initial
    source: int  # the state (for an initial arrow: the container owning the dot)
    target: int
    path: Path
    head: tuple[Point, Point, Point]
    edge: Edge | None = None
    label: Rect | None = None
    dot: Point | None = None  # an initial arrow's dot
    label_lines: tuple[str, ...] = ()  # what the label says, wrapped to fit its place


@dataclass(frozen=True, slots=True)
class _Lane:
    vertical: bool
    at: float  # x of a vertical lane, y of a horizontal one
    low: float  # the span it runs along
    high: float


def route(layout: Layout, scene: Scene) -> list[Route]:
    """Initial arrows first, then every edge of the layout in order; then the ends of the
    arrows on each side of a box are spread along it (:mod:`~statecharts.diagram.ports`)."""
    router = _Router(layout, scene)
    planned: list[tuple[str, int, int, _Course, Edge | None, Point | None]] = [
        ("initial", container, target, router.initial(dot, target), None, dot)
        for container, dot, targets in layout.initials
        for target in dict.fromkeys(targets)
    ]
    offsets = _spread(layout.edges)
    loops: dict[int, int] = {}
    for number, edge in enumerate(layout.edges):
        if edge.relation is Relation.SELF:
            k = loops.get(edge.source, 0)
            loops[edge.source] = k + 1
            course = _Course("loop", _loop(layout.boxes[edge.source].rect, k))
        elif edge.relation is Relation.APART:
            course = router.apart(edge, offsets[number])
        else:
            course = router.nested(edge, offsets[number])
        kind = "default" if edge.default else "transition"
        planned.append((kind, edge.source, edge.target, course, edge, None))
    courses = router.ports(
        [(source, target, course, edge) for _, source, target, course, edge, _ in planned]
    )
    routes: list[Route] = []
    for (kind, source, target, _, edge, dot), course in zip(planned, courses, strict=True):
        path = course.path()
        routes.append(Route(kind, source, target, path, _head(path), edge, dot=dot))
    return routes


@dataclass(frozen=True, slots=True)
class _Course:
    """An arrow's course as the points it is drawn from (the first its start, the last
    its end), so that its ends can move along the sides of their boxes (:meth:`moved`) and
    the course follow:

    - ``line``: (start, end), a straight arrow; when only its end moves, it leaves box
      ``box`` on the line from ``anchor`` (inside that box) to the new end;
    - ``shift``: (start, end), a short straight arrow between a box and its ancestor: it
      moves sideways as a whole;
    - ``dot``: (start, end), an initial arrow from its dot at ``anchor``;
    - ``bow``: (start, control, end), a quadratic curve;
    - ``poly``: the corners of a polyline, drawn with rounded corners (a detour): a first
      or last leg along an axis stays along it;
    - ``loop``: the four points of a self-transition's loop, which never moves.
    """

    shape: str
    points: tuple[Point, ...]
    anchor: Point | None = None
    box: Box | None = None
    cost: int = 0  # what it crosses (Scene.cost), when the router has looked

    @property
    def start(self) -> Point:
        return self.points[0]

    @property
    def end(self) -> Point:
        return self.points[-1]

    @property
    def approach(self) -> Point:
        """The point the arrow comes from, just before its end."""
        return self.anchor if self.shape == "dot" and self.anchor else self.points[-2]

    @property
    def leaving(self) -> Point:
        """The point the arrow goes to, just after its start."""
        return self.points[1]

    def path(self) -> Path:
        p = self.points
        if self.shape == "loop":
            return ((p[0], p[1], p[2], p[3]),)
        if self.shape == "bow":
            return (quad_cubic(p[0], p[1], p[2]),)
        if self.shape == "poly":
            return _rounded(list(p))
        return (line_cubic(p[0], p[1]),)

    def moved(self, start: Point | None = None, end: Point | None = None) -> _Course:
        """The course starting at ``start`` and ending at ``end`` instead (each a point on
        the same side of its box as before; None for an end that stays)."""
        p = list(self.points)
        if self.shape == "loop" or (start is None and end is None):
            return self
        if self.shape == "shift":  # moves as a whole, its end deciding
            old, new = (p[1], end) if end is not None else (p[0], start)
            assert new is not None
            dx, dy = new[0] - old[0], new[1] - old[1]
            return _Course("shift", tuple((x + dx, y + dy) for x, y in p))
        if end is not None:
            if self.shape == "poly":
                p[-2] = _keep_axis(p[-2], p[-1], end)
            p[-1] = end
        if start is not None:
            if self.shape == "poly":
                p[1] = _keep_axis(p[1], p[0], start)
            p[0] = start
        elif end is not None and self.anchor is not None:
            if self.shape == "line" and self.box is not None:
                p[0] = _exit(self.box, self.anchor, end)
            elif self.shape == "dot":
                ux, uy = unit(end[0] - self.anchor[0], end[1] - self.anchor[1])
                p[0] = (self.anchor[0] + ux * DOT_RADIUS, self.anchor[1] + uy * DOT_RADIUS)
        return _Course(self.shape, tuple(p), self.anchor, self.box, self.cost)


def _keep_axis(corner: Point, old: Point, new: Point) -> Point:
    """The corner next to an end moving from ``old`` to ``new``: moved with it across a leg
    that runs along an axis, so that the leg keeps running along it."""
    if abs(corner[1] - old[1]) < 1e-6:
        return (corner[0], corner[1] + new[1] - old[1])
    if abs(corner[0] - old[0]) < 1e-6:
        return (corner[0] + new[0] - old[0], corner[1])
    return corner


class _Router:
    def __init__(self, layout: Layout, scene: Scene) -> None:
        self.boxes = layout.boxes
        self.scene = scene
        self.lanes: dict[tuple[bool, int], list[_Lane]] = {}  # detours taken, by place

    def initial(self, dot: Point, target: int) -> _Course:
        box = self.boxes[target]
        end = _exit(box, box.rect.center, dot)
        dx, dy = unit(end[0] - dot[0], end[1] - dot[1])
        start = (dot[0] + dx * DOT_RADIUS, dot[1] + dy * DOT_RADIUS)
        return _Course("dot", (start, end), anchor=dot)

    def ports(self, arrows: list[tuple[int, int, _Course, Edge | None]]) -> list[_Course]:
        """The courses with their ends spread along the sides of their boxes: where each
        arrow arrives, and where it leaves (an initial arrow leaves a dot, not a box). A
        self loop, an initial arrow's end and a nested arrow's start stay; the others make
        room. An arrow between boxes apart keeps its ends where moving them would make it
        cross more (then tries moving its end alone)."""
        ends: list[ArrowEnd] = []
        owners: list[tuple[int, bool]] = []  # (arrow, whether it is that arrow's start)
        for number, (source, target, course, _) in enumerate(arrows):
            fixed = course.shape in ("loop", "dot")
            weight = STRAIGHT_WEIGHT if course.shape in ("line", "shift") else 1.0
            ends.append(self._end(target, course.end, course.approach, fixed, weight))
            owners.append((number, False))
            if course.shape != "dot":
                fixed = fixed or course.shape == "shift"
                ends.append(self._end(source, course.start, course.leaving, fixed, weight))
                owners.append((number, True))
        moves: dict[int, list[Point | None]] = {}
        for (number, is_start), point in zip(owners, spread(ends), strict=True):
            if point is not None:
                moves.setdefault(number, [None, None])[0 if is_start else 1] = point
        courses = [course for _, _, course, _ in arrows]
        for number, (start, end) in sorted(moves.items()):
            course, edge = courses[number], arrows[number][3]
            options = [course.moved(start, end)]
            if start is not None and end is not None:
                options.append(course.moved(None, end))
            if edge is None or edge.relation is not Relation.APART or self.scene.exhausted:
                courses[number] = options[0]
                continue
            before = course.cost
            for option in options:
                if self._cost(edge, option) <= before:
                    courses[number] = option
                    break
        return courses

    def _end(self, box: int, point: Point, toward: Point, fixed: bool, weight: float) -> ArrowEnd:
        rect, round_ = self.boxes[box].rect, self.boxes[box].role == "history"
        return ArrowEnd(box, rect, point, toward, fixed=fixed, weight=weight, round_=round_)

    def _cost(self, edge: Edge, course: _Course) -> int:
        ends = (edge.source, edge.target)
        hits = self.scene.crossing(course.path(), ends, self.scene.lineage(*ends))
        return self.scene.cost(hits)

    def apart(self, edge: Edge, offset: float) -> _Course:
        a, b = self.boxes[edge.source], self.boxes[edge.target]
        ca, cb = a.rect.center, b.rect.center
        if "history" in (a.role, b.role):
            offset = 0.0
        limit = 0.3 * min(a.rect.w, a.rect.h, b.rect.w, b.rect.h)
        offset = max(-limit, min(limit, offset))
        nx, ny = _normal(ca, cb, edge.source, edge.target)
        pa = (ca[0] + nx * offset, ca[1] + ny * offset)
        pb = (cb[0] + nx * offset, cb[1] + ny * offset)
        ends = (edge.source, edge.target)
        related = self.scene.lineage(*ends)

        straight = _Course("line", (_exit(a, pa, pb), _exit(b, pb, pa)), pa, a)
        if self.scene.exhausted:
            return straight
        hits = self.scene.crossing(straight.path(), ends, related)
        if not hits:
            return straight
        best = (self.scene.cost(hits), 0)
        step = math.dist(pa, pb) / 5
        candidates: list[tuple[_Course, _Lane | None]] = [(straight, None)]
        candidates += [(self._bowed(a, b, pa, pb, bow * step), None) for bow in _BOWS]
        candidates += self._detours(a, b, hits, abs(offset), ends, related)
        for rank, (course, _) in enumerate(candidates[1:], start=1):
            cost = self.scene.cost(self.scene.crossing(course.path(), ends, related))
            best = min(best, (cost, rank))
        if best[0] > 0 and not self.scene.exhausted:
            via = self._via(a, b, pa, pb, hits, ends, related)
            if via is not None and via[0] < best[0]:
                return replace(via[1], cost=via[0])
        course, lane = candidates[best[1]]
        if lane is not None:
            key = (lane.vertical, math.floor(lane.at / LANE_SPACING))
            self.lanes.setdefault(key, []).append(lane)
        return replace(course, cost=best[0])

    def _via(
        self,
        a: Box,
        b: Box,
        pa: Point,
        pb: Point,
        hits: list[Hit],
        ends: tuple[int, int],
        related: set[int],
    ) -> tuple[int, _Course] | None:
        """The best course through one or two points just off the corners of what the
        straight line ran into (and of what the best of those then runs into), by what it
        crosses, then by its length: a polyline round the obstacles."""
        dx, dy = unit(pb[0] - pa[0], pb[1] - pa[1])

        def corners(found: list[Hit]) -> list[Point]:
            points = []
            for hit in found[:VIA_HITS]:
                r = self.scene.rect(hit).inflate(LANE_GAP)
                points += [(r.x, r.y), (r.x2, r.y), (r.x, r.y2), (r.x2, r.y2)]
            return [p for p in points if not _inside(p, a.rect) and not _inside(p, b.rect)]

        def scored(vias: list[Point]) -> tuple[int, float, _Course, list[Hit]]:
            vias = sorted(vias, key=lambda p: (p[0] - pa[0]) * dx + (p[1] - pa[1]) * dy)
            corners_ = [_exit(a, pa, vias[0]), *vias, _exit(b, pb, vias[-1])]
            course = _Course("poly", tuple(corners_))
            found = self.scene.crossing(course.path(), ends, related)
            length = sum(math.dist(p, q) for p, q in pairwise(corners_))
            return (self.scene.cost(found), length, course, found)

        first = sorted((scored([v]) for v in corners(hits)), key=lambda s: s[:2])
        if not first:
            return None
        results = first[:1]
        for cost, _length, course, found in first[:VIA_EXPAND]:
            if cost == 0 or self.scene.exhausted:
                break
            via = course.points[1]
            results += [scored([via, v]) for v in corners(found)]
        best = min(results, key=lambda s: s[:2])
        return best[0], best[2]

    def _bowed(self, a: Box, b: Box, pa: Point, pb: Point, bow: float) -> _Course:
        nx, ny = unit(-(pb[1] - pa[1]), pb[0] - pa[0])
        control = ((pa[0] + pb[0]) / 2 + nx * bow * 2, (pa[1] + pb[1]) / 2 + ny * bow * 2)
        return _Course("bow", (_exit(a, pa, control), control, _exit(b, pb, control)))

    def _detours(
        self,
        a: Box,
        b: Box,
        hits: list[Hit],
        extra: float,
        ends: tuple[int, int],
        related: set[int],
    ) -> list[tuple[_Course, _Lane]]:
        """Detours on both sides of what the straight course ran into, the nearer side
        first: out of a side of the source, along a lane past the obstacles, into the same
        side of the target. A lane grows (at most twice) past anything new it runs into,
        and keeps clear of the lanes of earlier detours."""
        (ax, ay), (bx, by) = a.rect.center, b.rect.center
        vertical = abs(by - ay) >= abs(bx - ax)
        span = (min(ay, by), max(ay, by)) if vertical else (min(ax, bx), max(ax, bx))
        found: list[tuple[float, _Course, _Lane]] = []
        for side in (1.0, -1.0):
            seen = set(hits)
            things = [a.rect, b.rect, *(self.scene.rect(h) for h in hits)]
            lane = 0.0
            course = _Course("poly", ())
            for _ in range(3):
                lane = _lane(things, vertical, side) + side * extra
                lane = self._free(lane, side, vertical, span)
                course = self._orthogonal(a, b, lane, vertical)
                crossed = self.scene.crossing(course.path(), ends, related)
                more = [h for h in crossed if h not in seen]
                if not more:
                    break
                seen.update(more)
                things += [self.scene.rect(h) for h in more]
            middle = (ax + bx) / 2 if vertical else (ay + by) / 2
            found.append((abs(lane - middle), course, _Lane(vertical, lane, *span)))
        found.sort(key=lambda item: item[0])
        return [(course, lane) for _, course, lane in found]

    def _free(self, lane: float, side: float, vertical: bool, span: tuple[float, float]) -> float:
        """``lane``, moved outwards until no earlier detour's lane runs alongside it."""
        moved = True
        while moved:  # every move is outwards and past a lane: this ends
            moved = False
            bucket = math.floor(lane / LANE_SPACING)
            near = [
                other
                for b in (bucket - 1, bucket, bucket + 1)
                for other in self.lanes.get((vertical, b), ())
            ]
            for other in near:
                if (
                    abs(other.at - lane) < LANE_SPACING - 0.01
                    and other.low < span[1]
                    and span[0] < other.high
                ):
                    lane = other.at + side * LANE_SPACING
                    moved = True
        return lane

    def _orthogonal(self, a: Box, b: Box, lane: float, vertical: bool) -> _Course:
        """Out of a's side facing the lane, along the lane, into b's same side; rounded."""
        (ax, ay), (bx, by) = a.rect.center, b.rect.center
        if vertical:
            start = _exit(a, (ax, ay), (lane, ay))
            end = _exit(b, (bx, by), (lane, by))
            corners = [start, (lane, start[1]), (lane, end[1]), end]
        else:
            start = _exit(a, (ax, ay), (ax, lane))
            end = _exit(b, (bx, by), (bx, lane))
            corners = [start, (start[0], lane), (end[0], lane), end]
        return _Course("poly", tuple(corners))

    def nested(self, edge: Edge, offset: float) -> _Course:
        """An arrow between a box and one of its ancestors: straight, to the nearest side."""
        inward = edge.relation is Relation.INWARD
        outer = self.boxes[edge.source if inward else edge.target].rect
        inner_box = self.boxes[edge.target if inward else edge.source]
        inner = inner_box.rect
        sides = (
            (inner.x - outer.x, "left"),
            (outer.x2 - inner.x2, "right"),
            (outer.y2 - inner.y2, "bottom"),
            (inner.y - outer.y, "top"),
        )
        side = min(sides)[1]
        if side in ("left", "right"):
            y = inner.y + inner.h / 2 + max(-inner.h / 3, min(inner.h / 3, offset))
            a = (inner.x if side == "left" else inner.x2, y)
            b = (outer.x if side == "left" else outer.x2, y)
        else:
            x = inner.x + inner.w / 2 + max(-inner.w / 3, min(inner.w / 3, offset))
            a = (x, inner.y2 if side == "bottom" else inner.y)
            b = (x, outer.y2 if side == "bottom" else outer.y)
        if inner_box.role == "history":
            a = _exit(inner_box, inner.center, b)
        return _Course("shift", (b, a) if inward else (a, b))


def _exit(box: Box, inside: Point, toward: Point) -> Point:
    return exit_point(box.rect, inside, toward, round_=box.role == "history")


def _inside(p: Point, rect: Rect) -> bool:
    return rect.x < p[0] < rect.x2 and rect.y < p[1] < rect.y2


def _lane(things: list[Rect], vertical: bool, side: float) -> float:
    if vertical:
        edge = max(r.x2 for r in things) if side > 0 else min(r.x for r in things)
    else:
        edge = max(r.y2 for r in things) if side > 0 else min(r.y for r in things)
    return edge + side * LANE_GAP


def _loop(rect: Rect, k: int) -> Cubic:
    """The k-th self-transition loop of a box, on its right side, each one a little wider."""
    size = LOOP_SIZE + 8 * k
    x, y = rect.x2, rect.y + min(rect.h / 2, 24)
    spread = 5 + 3 * k
    reach = size * 4 / 3
    return (
        (x, y - spread),
        (x + reach, y - spread - size * 0.7),
        (x + reach, y + spread + size * 0.7),
        (x, y + spread),
    )


def _spread(edges: list[Edge]) -> list[float]:
    """Sideways offset of each arrow among the arrows joining the same two boxes."""
    groups: dict[tuple[int, int], list[int]] = {}
    for number, edge in enumerate(edges):
        if edge.relation is not Relation.SELF:
            key = (min(edge.source, edge.target), max(edge.source, edge.target))
            groups.setdefault(key, []).append(number)
    offsets = [0.0] * len(edges)
    for members in groups.values():
        middle = (len(members) - 1) / 2
        for i, number in enumerate(members):
            offsets[number] = (i - middle) * SPREAD
    return offsets


def _normal(ca: Point, cb: Point, source: int, target: int) -> Point:
    """The unit normal of the line between two centres, the same for both directions."""
    if source > target:
        ca, cb = cb, ca
    return unit(-(cb[1] - ca[1]), cb[0] - ca[0])


def _rounded(corners: list[Point]) -> Path:
    """A polyline through ``corners`` with its inner corners rounded."""
    segments: list[Cubic] = []
    here = corners[0]
    for i in range(1, len(corners) - 1):
        corner, after = corners[i], corners[i + 1]
        radius = min(CORNER, math.dist(here, corner) / 2, math.dist(corner, after) / 2)
        if radius < 0.5:  # no room to round: a sharp corner
            if math.dist(here, corner) > 0.01:
                segments.append(line_cubic(here, corner))
            here = corner
            continue
        into = unit(corner[0] - here[0], corner[1] - here[1])
        out = unit(after[0] - corner[0], after[1] - corner[1])
        p = (corner[0] - into[0] * radius, corner[1] - into[1] * radius)
        q = (corner[0] + out[0] * radius, corner[1] + out[1] * radius)
        if math.dist(here, p) > 0.01:
            segments.append(line_cubic(here, p))
        segments.append(quad_cubic(p, corner, q))
        here = q
    segments.append(line_cubic(here, corners[-1]))
    return tuple(segments)


def _head(path: Path) -> tuple[Point, Point, Point]:
    curve = path[-1]
    tip = curve[3]
    base = curve[2] if math.dist(curve[2], tip) > 0.01 else curve[0]
    dx, dy = unit(tip[0] - base[0], tip[1] - base[1])
    bx, by = tip[0] - dx * HEAD, tip[1] - dy * HEAD
    half = HEAD / 2
    return (tip, (bx - dy * half, by + dx * half), (bx + dy * half, by - dx * half))
