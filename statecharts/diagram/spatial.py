"""Uniform-cell spatial indexes: "what is under this rectangle, or along this segment"."""

from __future__ import annotations

import math
from collections.abc import Iterator

from statecharts.diagram.geometry import Point, Rect, segment_meets

Key = tuple[int, int]


class _Cells:
    def __init__(self, cell: float) -> None:
        self.cell = cell
        self.cells: dict[Key, list[int]] = {}
        self.work = 0  # stored items looked at by queries: what a caller may budget
        self.filed = 0  # cells items were filed in: what a caller may budget too

    def _file(self, number: int, keys: Iterator[Key]) -> None:
        for key in keys:
            self.cells.setdefault(key, []).append(number)
            self.filed += 1

    def _in(self, keys: Iterator[Key]) -> Iterator[int]:
        for key in keys:
            items = self.cells.get(key, ())
            self.work += 1 + len(items)
            yield from items

    def _box_keys(self, rect: Rect) -> Iterator[Key]:
        x0, x1 = math.floor(rect.x / self.cell), math.floor(rect.x2 / self.cell)
        y0, y1 = math.floor(rect.y / self.cell), math.floor(rect.y2 / self.cell)
        for gx in range(x0, x1 + 1):
            for gy in range(y0, y1 + 1):
                yield (gx, gy)

    def _line_keys(self, p: Point, q: Point) -> Iterator[Key]:
        """The cells the segment passes through, in order (a grid walk, one cell a step)."""
        x0, y0, x1, y1 = p[0] / self.cell, p[1] / self.cell, q[0] / self.cell, q[1] / self.cell
        gx, gy = math.floor(x0), math.floor(y0)
        steps = abs(math.floor(x1) - gx) + abs(math.floor(y1) - gy)
        dx, dy = x1 - x0, y1 - y0
        step_x, step_y = (1 if dx > 0 else -1), (1 if dy > 0 else -1)
        # parameter t (0..1 along the segment) of the next vertical / horizontal cell border
        next_x = ((gx + (dx > 0)) - x0) / dx if dx else math.inf
        next_y = ((gy + (dy > 0)) - y0) / dy if dy else math.inf
        every_x = abs(1 / dx) if dx else math.inf
        every_y = abs(1 / dy) if dy else math.inf
        yield (gx, gy)
        for _ in range(steps):
            if next_x < next_y:
                gx += step_x
                next_x += every_x
            else:
                gy += step_y
                next_y += every_y
            yield (gx, gy)


class Grid(_Cells):
    """Rectangles, each with an integer tag."""

    def __init__(self, cell: float = 96.0) -> None:
        super().__init__(cell)
        self.rects: list[Rect] = []
        self.tags: list[int] = []

    def add(self, rect: Rect, tag: int = -1) -> None:
        self.rects.append(rect)
        self.tags.append(tag)
        self._file(len(self.rects) - 1, self._box_keys(rect))

    def overlapping(self, rect: Rect) -> list[int]:
        """Numbers of the stored rectangles overlapping ``rect``, ascending."""
        found = {n for n in self._in(self._box_keys(rect)) if self.rects[n].overlaps(rect)}
        return sorted(found)

    def along(self, p: Point, q: Point) -> set[int]:
        """Numbers of the stored rectangles the segment pq touches."""
        return {n for n in self._in(self._line_keys(p, q)) if segment_meets(p, q, self.rects[n])}


class Lines(_Cells):
    """Line segments, each with an integer tag."""

    def __init__(self, cell: float = 96.0) -> None:
        super().__init__(cell)
        self.segments: list[tuple[Point, Point]] = []
        self.tags: list[int] = []

    def add(self, p: Point, q: Point, tag: int) -> None:
        self.segments.append((p, q))
        self.tags.append(tag)
        self._file(len(self.segments) - 1, self._line_keys(p, q))

    def tags_through(self, rect: Rect) -> set[int]:
        """Tags of the stored segments that touch ``rect``."""
        return {
            self.tags[n]
            for n in self._in(self._box_keys(rect))
            if segment_meets(*self.segments[n], rect)
        }

    def crossing(self, p: Point, q: Point) -> set[int]:
        """Numbers of the stored segments the segment ``p``-``q`` crosses (touching at an
        end point counts)."""
        return {
            n
            for n in self._in(self._line_keys(p, q))
            if _segments_cross(p, q, *self.segments[n])
        }


def _segments_cross(p: Point, q: Point, a: Point, b: Point) -> bool:
    def side(o: Point, u: Point, v: Point) -> float:
        return (u[0] - o[0]) * (v[1] - o[1]) - (u[1] - o[1]) * (v[0] - o[0])

    d1, d2 = side(a, b, p), side(a, b, q)
    d3, d4 = side(p, q, a), side(p, q, b)
    return d1 * d2 <= 0 and d3 * d4 <= 0 and (d1, d2) != (0, 0)
