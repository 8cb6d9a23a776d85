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
_GAPS = (PORT_GAP, 16.0, 13.0, MIN_GAP)  # tried in turn, widest first
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

    A side with more ends than fit MIN_GAP apart between its rounded corners passes the
    outermost to the sides round the corners (an arrow from the top left then ends on the
    left side, near its top); when those are full too, ends may meet (a box too small for
    its arrows)."""
    groups: dict[tuple[int, Side], list[tuple[int, Point]]] = {}
    for number, end in enumerate(ends):
        groups.setdefault((end.box, side_of(end)), []).append((number, end.point))
    for (box, side), members in list(groups.items()):
        _overflow(ends, box, side, members, groups)
    moved: list[Point | None] = [None] * len(ends)
    for (_, side), members in groups.items():
        if len(members) > 1:
            _spread_side(ends, side, members, moved)
        elif members[0][1] != ends[members[0][0]].point:  # passed round a corner, alone
            moved[members[0][0]] = members[0][1]
    return moved


_NEXT = {  # the sides round the corners at the low and the high end of a side
    Side.TOP: (Side.LEFT, Side.RIGHT),
    Side.BOTTOM: (Side.LEFT, Side.RIGHT),
    Side.LEFT: (Side.TOP, Side.BOTTOM),
    Side.RIGHT: (Side.TOP, Side.BOTTOM),
}


def _overflow(
    ends: list[ArrowEnd],
    box: int,
    side: Side,
    members: list[tuple[int, Point]],
    groups: dict[tuple[int, Side], list[tuple[int, Point]]],
) -> None:
    """Pass the ends a side has no room for to its neighbours, from whichever of its two
    ends reaches further out, each to the corner it is nearest."""
    rect = ends[members[0][0]].rect
    low, high = _extent(rect, side)
    fits = int((high - low) / MIN_GAP) + 1
    if len(members) <= fits:
        return
    members.sort(key=lambda member: _key(ends[member[0]], side, member[1]))
    middle = (low + high) / 2
    while len(members) > fits:
        first, last = members[0], members[-1]
        outward_low = middle - _key(ends[first[0]], side, first[1])[0]
        outward_high = _key(ends[last[0]], side, last[1])[0] - middle
        at_low = outward_low >= outward_high
        number = first[0] if at_low else last[0]
        if ends[number].fixed:
            break
        members.pop(0 if at_low else -1)
        neighbour = _NEXT[side][0 if at_low else 1]
        n_low, n_high = _extent(rect, neighbour)
        near = side in (Side.TOP, Side.LEFT)  # the corner at the neighbour's low end
        place = n_low if near else n_high
        groups.setdefault((box, neighbour), []).append(
            (number, _on_side(ends[number], neighbour, place))
        )


def _extent(rect: Rect, side: Side) -> tuple[float, float]:
    """Where along a side arrows may meet it: clear of its rounded corners."""
    low, high = (rect.x, rect.x2) if side in (Side.TOP, Side.BOTTOM) else (rect.y, rect.y2)
    room = min(CORNER_ROOM, (high - low) / 4)
    return low + room, high - room


def _key(end: ArrowEnd, side: Side, point: Point) -> tuple[float, float]:
    """Where the arrow is LOOK_BACK away from the side (the arrow meeting it at ``point``):
    sorted by it, the arrows do not cross in that last stretch."""
    horizontal = side in (Side.TOP, Side.BOTTOM)
    s, t = (point[0], end.toward[0]) if horizontal else (point[1], end.toward[1])
    distance = abs(end.toward[1] - point[1]) if horizontal else abs(end.toward[0] - point[0])
    ahead = s + (t - s) * min(1.0, LOOK_BACK / distance) if distance > 1.0 else s
    return (round(ahead, 6), round(s, 6))


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
    ends: list[ArrowEnd],
    side: Side,
    members: list[tuple[int, Point]],
    moved: list[Point | None],
) -> None:
    horizontal = side in (Side.TOP, Side.BOTTOM)
    order = sorted(members, key=lambda m: (*_key(ends[m[0]], side, m[1]), m[0]))
    low, high = _extent(ends[order[0][0]].rect, side)
    count = len(order)
    wanted = [point[0] if horizontal else point[1] for _, point in order]
    weights = [_FIXED if ends[n].fixed else ends[n].weight for n, _ in order]
    # The widest gap at which no heavier end (a straight arrow's, a fixed one) moves once
    # the bunches are pushed in from the corners; else the narrowest, or what the side has.
    gaps = [gap for gap in _GAPS if (count - 1) * gap <= high - low]
    places = wanted
    for gap in gaps or [(high - low) / (count - 1)]:
        places = _bunch(wanted, weights, gap)
        for i in range(count):
            places[i] = max(places[i], low + i * gap)
        for i in reversed(range(count)):
            places[i] = min(places[i], high - (count - 1 - i) * gap)
        if all(
            w == 1.0 or abs(p - q) < 1.0 for w, p, q in zip(weights, places, wanted, strict=True)
        ):
            break
    for (number, _), place in zip(order, places, strict=True):
        end = ends[number]
        point = _on_side(end, side, place)
        if not end.fixed and math.dist(point, end.point) >= 0.01:
            moved[number] = point


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
