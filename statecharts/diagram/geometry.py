"""Plain 2-D geometry for the diagram: rectangles, segments, cubic curves and paths.

Everything is a float in SVG user units (pixels), y pointing down.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import pairwise

Point = tuple[float, float]


@dataclass(frozen=True, slots=True)
class Rect:
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

    @property
    def center(self) -> Point:
        return (self.x + self.w / 2, self.y + self.h / 2)

    def inflate(self, d: float) -> Rect:
        return Rect(self.x - d, self.y - d, self.w + 2 * d, self.h + 2 * d)

    def contains(self, other: Rect) -> bool:
        return (
            self.x <= other.x and self.y <= other.y and other.x2 <= self.x2 and other.y2 <= self.y2
        )

    def overlaps(self, other: Rect) -> bool:
        return self.x < other.x2 and other.x < self.x2 and self.y < other.y2 and other.y < self.y2

    def union(self, other: Rect) -> Rect:
        x, y = min(self.x, other.x), min(self.y, other.y)
        return Rect(x, y, max(self.x2, other.x2) - x, max(self.y2, other.y2) - y)


def exit_point(rect: Rect, inside: Point, toward: Point, *, round_: bool = False) -> Point:
    """Where the ray from ``inside`` (a point in ``rect``) toward ``toward`` leaves ``rect``.

    ``round_`` treats the rectangle as the circle inscribed in it (history pseudo-states)."""
    dx, dy = toward[0] - inside[0], toward[1] - inside[1]
    if dx == 0 and dy == 0:
        return inside
    if round_:
        cx, cy = rect.center
        r = min(rect.w, rect.h) / 2
        length = math.hypot(toward[0] - cx, toward[1] - cy) or 1.0
        return (cx + (toward[0] - cx) / length * r, cy + (toward[1] - cy) / length * r)
    limits = []
    if dx > 0:
        limits.append((rect.x2 - inside[0]) / dx)
    elif dx < 0:
        limits.append((rect.x - inside[0]) / dx)
    if dy > 0:
        limits.append((rect.y2 - inside[1]) / dy)
    elif dy < 0:
        limits.append((rect.y - inside[1]) / dy)
    t = max(0.0, min(limits))
    return (inside[0] + dx * t, inside[1] + dy * t)


Cubic = tuple[Point, Point, Point, Point]


def line_cubic(p0: Point, p1: Point) -> Cubic:
    """A straight segment as a cubic Bézier (so every route has one shape)."""
    return (p0, _lerp(p0, p1, 1 / 3), _lerp(p0, p1, 2 / 3), p1)


def quad_cubic(p0: Point, control: Point, p1: Point) -> Cubic:
    """The cubic equal to the quadratic Bézier (p0, control, p1)."""
    return (p0, _lerp(p0, control, 2 / 3), _lerp(p1, control, 2 / 3), p1)


def cubic_at(c: Cubic, t: float) -> Point:
    u = 1 - t
    a, b, d, e = u * u * u, 3 * u * u * t, 3 * u * t * t, t * t * t
    return (
        a * c[0][0] + b * c[1][0] + d * c[2][0] + e * c[3][0],
        a * c[0][1] + b * c[1][1] + d * c[2][1] + e * c[3][1],
    )


def cubic_tangent(c: Cubic, t: float) -> Point:
    u = 1 - t
    a, b, d = 3 * u * u, 6 * u * t, 3 * t * t
    return (
        a * (c[1][0] - c[0][0]) + b * (c[2][0] - c[1][0]) + d * (c[3][0] - c[2][0]),
        a * (c[1][1] - c[0][1]) + b * (c[2][1] - c[1][1]) + d * (c[3][1] - c[2][1]),
    )


def is_line(c: Cubic) -> bool:
    """Whether the control points lie on the chord (the segment is drawn as a line)."""
    (x0, y0), (x3, y3) = c[0], c[3]
    return all(abs((x3 - x0) * (p[1] - y0) - (y3 - y0) * (p[0] - x0)) < 1e-6 for p in c[1:3])


# A path: cubic segments, each starting where the previous one ends.
Path = tuple[Cubic, ...]


def _span(c: Cubic) -> float:
    """The length of the control polygon: an upper bound of the segment's length."""
    return math.dist(c[0], c[1]) + math.dist(c[1], c[2]) + math.dist(c[2], c[3])


def _locate(path: Path, t: float) -> tuple[Cubic, float]:
    """The segment at fraction ``t`` of the path's length, and the parameter within it."""
    spans = [_span(c) for c in path]
    goal = t * sum(spans)
    for c, span in zip(path, spans, strict=True):
        if goal <= span or c is path[-1]:
            return c, (goal / span if span else 0.0)
        goal -= span
    return path[-1], 1.0


def path_at(path: Path, t: float) -> Point:
    c, u = _locate(path, t)
    return cubic_at(c, min(1.0, u))


def path_tangent(path: Path, t: float) -> Point:
    c, u = _locate(path, t)
    return cubic_tangent(c, min(1.0, u))


def chords(path: Path) -> list[tuple[Point, Point]]:
    """The path as straight pieces: a line segment as itself, a curve as up to 16 chords."""
    pieces: list[tuple[Point, Point]] = []
    for c in path:
        if is_line(c):
            pieces.append((c[0], c[3]))
            continue
        n = max(4, min(16, int(_span(c) / 30)))
        points = [cubic_at(c, i / n) for i in range(n + 1)]
        pieces.extend(pairwise(points))
    return pieces


def segment_meets(p: Point, q: Point, rect: Rect) -> bool:
    """Whether the segment pq touches ``rect`` (Liang-Barsky clipping)."""
    dx, dy = q[0] - p[0], q[1] - p[1]
    low, high = 0.0, 1.0
    for step, room in (
        (-dx, p[0] - rect.x),
        (dx, rect.x2 - p[0]),
        (-dy, p[1] - rect.y),
        (dy, rect.y2 - p[1]),
    ):
        if step == 0:
            if room < 0:
                return False
            continue
        t = room / step
        if step < 0:
            low = max(low, t)
        else:
            high = min(high, t)
        if low > high:
            return False
    return True


def path_bounds(path: Path) -> Rect:
    """A box containing the path (the hull of its control points)."""
    xs = [p[0] for c in path for p in c]
    ys = [p[1] for c in path for p in c]
    return Rect(min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys))


def unit(dx: float, dy: float) -> Point:
    length = math.hypot(dx, dy)
    if length == 0:
        return (1.0, 0.0)
    return (dx / length, dy / length)


def _lerp(a: Point, b: Point, t: float) -> Point:
    return (a[0] + (b[0] - a[0]) * t, a[1] + (b[1] - a[1]) * t)
