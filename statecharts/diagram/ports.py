"""Where arrows meet a box: spread along its sides so that no two arrowheads overlap.

Every arrow starts on a side of its source and ends on a side of its target (top, bottom,
left or right; a history circle's quarters count as its sides). The arrows meeting one side
keep the order in which they come in or go out (so they do not cross just beside the box)
and are moved apart along that side, at least :data:`PORT_GAP` from each other where the side
has room, each as little as it can: ends already far enough apart do not move, a bunch of
ends at one point is centred where they were (weighted: a straight arrow's end moves less
than a curve's, which bends to follow). Fixed ends (an initial arrow's, which comes
straight down from its dot; a self loop's) keep their place and the others make room round
them. Linear in the ends, plus one sort per side. Pure geometry: which arrow is which is the
caller's business.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

from statecharts.diagram.geometry import Point, Rect

PORT_GAP = 20.0  # between two ends on one side, when the side has room
MIN_GAP = 10.0  # closer than this two heads (8 long, 8 wide) could touch
CORNER_ROOM = 10.0  # how near a box's corner an arrow may meet it (its corners are rounded)
LOOK_BACK = 40.0  # how far from the side the order of the arrows is read
_FIXED = 1e6  # the weight of a fixed end: where it is, its bunch is


class Side(Enum):
    TOP = "top"
    BOTTOM = "bottom"
    LEFT = "left"
    RIGHT = "right"


@dataclass(frozen=True, slots=True)
class ArrowEnd:
    """One end of an arrow, where it meets a box."""

    box: int  # names the box: ends are grouped by it and by their side
    rect: Rect
    point: Point  # where the arrow meets the box now, on its border
    toward: Point  # a point of the arrow away from the box (to read the order they come in)
    fixed: bool = False  # never moved; the others make room
    weight: float = 1.0  # how much it resists moving: a bunch sits nearer its heavier ends
    round_: bool = False  # the box is drawn as the circle inscribed in ``rect``


def spread(ends: list[ArrowEnd]) -> list[Point | None]:
    """The new point of each end, in the same order; None for one that stays where it is.

    A side with more ends than fit at MIN_GAP between its rounded corners uses its whole
    length, and past that they may still meet (a box too small for its arrows)."""
    groups: dict[tuple[int, Side], list[int]] = {}
    for number, end in enumerate(ends):
        groups.setdefault((end.box, side_of(end)), []).append(number)
    moved: list[Point | None] = [None] * len(ends)
    for (_, side), members in groups.items():
        if len(members) > 1:
            _spread_side(ends, side, members, moved)
    return moved


def side_of(end: ArrowEnd) -> Side:
    """The side the end lies on (for a circle, the quarter); at a corner, the one facing
    the rest of the arrow."""
    rect, (x, y) = end.rect, end.point
    if end.round_:
        cx, cy = rect.center
        dx, dy = x - cx, y - cy
    else:
        distance = {
            Side.TOP: abs(y - rect.y),
            Side.BOTTOM: abs(y - rect.y2),
            Side.LEFT: abs(x - rect.x),
            Side.RIGHT: abs(x - rect.x2),
        }
        nearest = min(distance.values())
        candidates = [side for side, d in distance.items() if d <= nearest + 0.5]
        if len(candidates) == 1:
            return candidates[0]
        dx, dy = end.toward[0] - x, end.toward[1] - y
    if abs(dy) >= abs(dx):
        return Side.TOP if dy < 0 else Side.BOTTOM
    return Side.LEFT if dx < 0 else Side.RIGHT


def _spread_side(
    ends: list[ArrowEnd], side: Side, members: list[int], moved: list[Point | None]
) -> None:
    horizontal = side in (Side.TOP, Side.BOTTOM)
    rect = ends[members[0]].rect

    def along(p: Point) -> float:
        return p[0] if horizontal else p[1]

    def across(p: Point) -> float:
        return p[1] if horizontal else p[0]

    def key(number: int) -> tuple[float, float, int]:
        """Where the arrow is LOOK_BACK away from the side: sorted by it, the arrows do
        not cross in that last stretch."""
        end = ends[number]
        s, t = along(end.point), along(end.toward)
        distance = abs(across(end.toward) - across(end.point))
        ahead = s + (t - s) * min(1.0, LOOK_BACK / distance) if distance > 1.0 else s
        return (round(ahead, 6), round(s, 6), number)

    order = sorted(members, key=key)
    low, high = (rect.x, rect.x2) if horizontal else (rect.y, rect.y2)
    room = min(CORNER_ROOM, (high - low) / 4)
    low, high = low + room, high - room
    count = len(order)
    gap = PORT_GAP
    if (count - 1) * gap > high - low:
        gap = max(MIN_GAP, (high - low) / (count - 1))
        if (count - 1) * gap > high - low:  # the whole side, corners and all
            low, high = low - room, high + room
            gap = max(MIN_GAP, (high - low) / (count - 1))
    wanted = [along(ends[n].point) for n in order]
    places = _bunch(wanted, [_FIXED if ends[n].fixed else ends[n].weight for n in order], gap)
    if (count - 1) * gap <= high - low:  # within the side, keeping the gaps
        for i in range(count):
            places[i] = max(places[i], low + i * gap)
        for i in reversed(range(count)):
            places[i] = min(places[i], high - (count - 1 - i) * gap)
    for number, place, was in zip(order, places, wanted, strict=True):
        end = ends[number]
        if not end.fixed and abs(place - was) >= 0.01:
            moved[number] = _on_side(end, side, place)


def _bunch(wanted: list[float], weights: list[float], gap: float) -> list[float]:
    """Places as near ``wanted`` as can be, in the same order, at least ``gap`` apart: runs
    that would come closer merge, and each run sits at the weighted mean of where its
    members want to be (one pass, merging with the run before while they overlap)."""
    # a run: [first member, count, total weight, weighted sum of (wanted - offset in run)]
    runs: list[list[float]] = []
    for i, (w, weight) in enumerate(zip(wanted, weights, strict=True)):
        runs.append([i, 1, weight, weight * w])
        while len(runs) > 1:
            _, count, total, summed = runs[-1]
            first, p_count, p_total, p_summed = runs[-2]
            if p_summed / p_total + p_count * gap <= summed / total:
                break
            runs.pop()
            runs[-1] = [
                first,
                p_count + count,
                p_total + total,
                p_summed + summed - total * p_count * gap,
            ]
    places: list[float] = []
    for _, count, total, summed in runs:
        places.extend(summed / total + k * gap for k in range(int(count)))
    return places


def _on_side(end: ArrowEnd, side: Side, place: float) -> Point:
    rect = end.rect
    if side is Side.TOP:
        point = (place, rect.y)
    elif side is Side.BOTTOM:
        point = (place, rect.y2)
    elif side is Side.LEFT:
        point = (rect.x, place)
    else:
        point = (rect.x2, place)
    if not end.round_:
        return point
    cx, cy = rect.center
    r = min(rect.w, rect.h) / 2
    length = math.hypot(point[0] - cx, point[1] - cy) or 1.0
    return (cx + (point[0] - cx) / length * r, cy + (point[1] - cy) / length * r)
