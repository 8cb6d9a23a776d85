"""Where each arrow's label goes.

A label tries a few spots along its arrow (beside it first, then on it) and takes the first
that covers nothing; failing that, the one that covers least (see :meth:`Scene.covered`).
Labels are placed in arrow order, each one then becoming something the next ones avoid.
"""

from __future__ import annotations

from dataclasses import replace

from statecharts.diagram.edges import Relation
from statecharts.diagram.geometry import Path, Rect, path_at, path_tangent
from statecharts.diagram.routing import Route
from statecharts.diagram.scene import Scene
from statecharts.diagram.text import label_size

_ALONG = (0.5, 0.38, 0.62, 0.26, 0.74, 0.15, 0.85)  # where on the arrow, in order of taste
_GAP = 5.0  # between an arrow and a label beside it


def place_labels(routes: list[Route], scene: Scene) -> list[Route]:
    for number, r in enumerate(routes):
        scene.trace(number, r.path)
    return [_place(number, r, scene) for number, r in enumerate(routes)]


def _place(number: int, r: Route, scene: Scene) -> Route:
    if r.edge is None or not r.edge.label:
        return r
    size = label_size(r.edge.label)
    if r.edge.relation is Relation.SELF:
        spots = _loop_spots(r.path, size)
    else:
        spots = _line_spots(r.path, size)
    related = scene.lineage(r.source, r.target)
    if scene.crowded:  # a huge chart: no more looking around
        spots = spots[:1]
    best: tuple[int, Rect] | None = None
    for spot in spots:
        score = scene.covered(spot, number, related)
        if best is None or score < best[0]:
            best = (score, spot)
        if score == 0:
            break
    assert best is not None
    scene.take(best[1])
    return replace(r, label=best[1])


def _loop_spots(path: Path, size: tuple[float, float]) -> list[Rect]:
    """Right of a self-transition's loop, then a little above or below."""
    x, y = path_at(path, 0.5)
    w, h = size
    return [Rect(x + 4, y - h / 2 + dy, w, h) for dy in (0.0, -16.0, 16.0, -32.0, 32.0)]


def _line_spots(path: Path, size: tuple[float, float]) -> list[Rect]:
    spots = []
    w, h = size
    for t in _ALONG:
        x, y = path_at(path, t)
        dx, dy = path_tangent(path, t)
        if abs(dy) >= abs(dx):  # mostly vertical: right of it, left of it
            spots.append(Rect(x + _GAP, y - h / 2, w, h))
            spots.append(Rect(x - _GAP - w, y - h / 2, w, h))
        else:  # mostly horizontal: above, below
            spots.append(Rect(x - w / 2, y - h - _GAP + 2, w, h))
            spots.append(Rect(x - w / 2, y + _GAP - 2, w, h))
        spots.append(Rect(x - w / 2, y - h / 2, w, h))
    return spots
