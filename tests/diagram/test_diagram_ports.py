"""Where arrows meet a box (statecharts/diagram/ports.py): ends on one side spread apart in
the order the arrows come in, each moving as little as it can, fixed ends staying put."""

from __future__ import annotations

import math

from statecharts.diagram.geometry import Rect
from statecharts.diagram.ports import MIN_GAP, PORT_GAP, ArrowEnd, Side, side_of, spread

BOX = Rect(100.0, 100.0, 120.0, 40.0)  # top side from x 100 to 220 at y 100


def top(x: float, toward_x: float, *, fixed: bool = False, box: int = 1) -> ArrowEnd:
    """An arrow ending on BOX's top at x, coming down from (toward_x, 40)."""
    return ArrowEnd(box, BOX, (x, 100.0), (toward_x, 40.0), fixed=fixed)


def placed(ends: list[ArrowEnd]) -> list[tuple[float, float]]:
    return [new or end.point for end, new in zip(ends, spread(ends), strict=True)]


def test_ends_far_enough_apart_do_not_move() -> None:
    assert spread([top(130, 130), top(130 + PORT_GAP, 150), top(190, 190)]) == [None] * 3


def test_ends_at_one_point_spread_round_it_in_the_order_they_come_in() -> None:
    # three arrows meeting at x 160, from the right, the left and straight above
    points = placed([top(160, 260), top(160, 60), top(160, 160)])
    xs = [x for x, _ in points]
    assert all(y == 100.0 for _, y in points)  # still on the top side
    assert xs[1] < xs[2] < xs[0]  # left to right as they come in: they do not cross
    assert math.isclose(sum(xs) / 3, 160)  # centred where they met
    assert min(b - a for a, b in zip(sorted(xs), sorted(xs)[1:], strict=False)) >= PORT_GAP - 1e-9


def test_a_fixed_end_stays_and_the_others_make_room() -> None:
    ends = [top(160, 160, fixed=True), top(161, 200), top(159, 120)]
    moved = spread(ends)
    assert moved[0] is None
    assert moved[1] is not None and moved[1][0] >= 160 + MIN_GAP
    assert moved[2] is not None and moved[2][0] <= 160 - MIN_GAP


def test_ends_on_other_boxes_or_sides_are_not_bunched_together() -> None:
    left = ArrowEnd(1, BOX, (100.0, 120.0), (40.0, 120.0))
    assert side_of(left) is Side.LEFT
    assert spread([top(160, 160), top(160, 160, box=2), left]) == [None] * 3


def test_a_side_too_short_passes_its_outermost_end_round_the_corner() -> None:
    small = Rect(0.0, 0.0, 30.0, 30.0)  # its top side has room for two heads
    ends = [ArrowEnd(1, small, (15.0, 0.0), (x, -60.0)) for x in (-90.0, 15.0, 130.0)]
    points = placed(ends)
    assert points[0][1] == 0.0 and points[1][1] == 0.0  # these two stay on top
    assert points[2][0] == 30.0 and points[2][1] < 15.0  # the one from furthest out: the
    # right side, near its top
    for a, b in ((0, 1), (1, 2), (0, 2)):
        assert math.dist(points[a], points[b]) >= MIN_GAP
