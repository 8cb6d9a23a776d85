"""Where each arrow's label goes.

A label tries spots along its arrow, beside it (clear of the arrow's own line, measured on
the path where the label would sit), and takes the first that covers nothing: no name, box
or other label, no container border or region separator, no arrow (see
:meth:`Scene.covered`). When none is free it tries again with its lines wrapped narrower
(``documents.uploaded`` over two lines fits beside an arrow where it did not on one), and
failing that takes the spot that covers least, whichever wrapping that is. Labels are placed
in arrow order, each one then becoming something the next ones avoid.
"""

from __future__ import annotations

from dataclasses import replace

from statecharts.diagram.edges import Relation
from statecharts.diagram.geometry import Path, Point, Rect, chords, path_at, path_tangent
from statecharts.diagram.routing import Route
from statecharts.diagram.scene import Scene
from statecharts.diagram.text import label_size, wrap_lines

_ALONG = (0.5, 0.38, 0.62, 0.26, 0.74, 0.15, 0.85)  # where on the arrow, in order of taste
_GAP = 5.0  # between an arrow and a label beside it
_WRAPS = (14, 9)  # narrower wrappings tried, in characters per line


def place_labels(routes: list[Route], scene: Scene) -> list[Route]:
    for number, r in enumerate(routes):
        scene.trace(number, r.path)
    return [_place(number, r, scene) for number, r in enumerate(routes)]


def _place(number: int, r: Route, scene: Scene) -> Route:
    if r.edge is None or not r.edge.label:
        return r
    if scene.crowded:
        # A huge chart: the first spot, unscored. Scoring it would look at every label and
        # arrow already near it, and on a chart whose arrows share a place (thousands of
        # transitions between two states) that is all of them: quadratic in the arrows.
        # (What the scoring below ends with on a crowded scene: the first spot of the label
        # as written.)
        lines = r.edge.label
        spot = _spots(r, label_size(lines))[0]
        scene.take(spot)
        return replace(r, label=spot, label_lines=lines)
    related = scene.lineage(r.source, r.target)
    best: tuple[int, Rect, tuple[str, ...]] | None = None
    for lines in _wrappings(r.edge.label):
        spots = _spots(r, label_size(lines))
        if scene.crowded:  # (it became so while this label looked around)
            spots = spots[:1]
        for spot in spots:
            score = scene.covered(spot, number, related)
            if best is None or score < best[0]:
                best = (score, spot, lines)
            if score == 0:
                break
        if best is not None and (best[0] == 0 or scene.crowded):
            break
    assert best is not None
    scene.take(best[1])
    return replace(r, label=best[1], label_lines=best[2])


def _spots(r: Route, size: tuple[float, float]) -> list[Rect]:
    assert r.edge is not None
    if r.edge.relation is Relation.SELF:
        return _loop_spots(r.path, size)
    return _line_spots(r.path, size)


def _wrappings(lines: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The label as written, then wrapped narrower, each different from the one before."""
    found = [lines]
    for limit in _WRAPS:
        wrapped = wrap_lines(lines, limit)
        if wrapped != found[-1]:
            found.append(wrapped)
    return found


def _loop_spots(path: Path, size: tuple[float, float]) -> list[Rect]:
    """Right of a self-transition's loop, then a little above or below."""
    x, y = path_at(path, 0.5)
    w, h = size
    return [Rect(x + 4, y - h / 2 + dy, w, h) for dy in (0.0, -16.0, 16.0, -32.0, 32.0)]


def _line_spots(path: Path, size: tuple[float, float]) -> list[Rect]:
    """Beside the arrow at each place along it (both sides, clear of the arrow's course
    across the label's height or width), then on it as the last resort."""
    pieces = chords(path)
    w, h = size
    beside: list[Rect] = []
    on: list[Rect] = []
    for t in _ALONG:
        x, y = path_at(path, t)
        dx, dy = path_tangent(path, t)
        if abs(dy) >= abs(dx):  # mostly vertical: right of it, left of it
            low, high = _extent(pieces, y - h / 2, y + h / 2, vertical=True, near=x)
            beside.append(Rect(high + _GAP, y - h / 2, w, h))
            beside.append(Rect(low - _GAP - w, y - h / 2, w, h))
        else:  # mostly horizontal: above, below
            low, high = _extent(pieces, x - w / 2, x + w / 2, vertical=False, near=y)
            beside.append(Rect(x - w / 2, low - _GAP - h, w, h))
            beside.append(Rect(x - w / 2, high + _GAP, w, h))
        on.append(Rect(x - w / 2, y - h / 2, w, h))
    return beside + on


def _extent(
    pieces: list[tuple[Point, Point]], start: float, end: float, *, vertical: bool, near: float
) -> tuple[float, float]:
    """How far the path reaches across a band: for a mostly vertical arrow, the least and
    greatest x of its course between heights ``start`` and ``end`` (for a horizontal one,
    the y between those x); ``near`` when it does not pass there."""
    along, across = (1, 0) if vertical else (0, 1)
    low = high = near
    for p, q in pieces:
        a, b = p[along], q[along]
        if max(a, b) < start or min(a, b) > end:
            continue
        for u in _clip(a, b, start, end):
            value = p[across] + (q[across] - p[across]) * u
            low, high = min(low, value), max(high, value)
    return low, high


def _clip(a: float, b: float, start: float, end: float) -> tuple[float, float]:
    """The parameters (0..1) where the segment from a to b enters and leaves [start, end]."""
    if a == b:
        return (0.0, 1.0)
    u1, u2 = (start - a) / (b - a), (end - a) / (b - a)
    return (max(0.0, min(u1, u2)), min(1.0, max(u1, u2)))
