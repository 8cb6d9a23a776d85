"""What is already on the canvas, for arrows and labels to keep clear of.

Spatial indexes over the laid-out boxes: things an arrow should not run through (leaf boxes
and container titles), containers (better not entered by an arrow or a label that belongs
to neither of their insides), things a label should not cover (names and earlier labels),
and the course of every arrow.
"""

from __future__ import annotations

from statecharts.diagram.geometry import Path, Rect, chords
from statecharts.diagram.layout import PAD, Box, Layout
from statecharts.diagram.spatial import Grid, Lines
from statecharts.diagram.text import SMALL_FONT, STATE_FONT, text_width

LEAVES = ("atomic", "final", "history")
# How much looking-for-a-better-course a diagram may do, in cells and items its indexes
# look at. Ordinary charts never come close; a chart of many hundreds of states spends it
# and its remaining arrows go straight, so rendering time stays bounded.
BUDGET = 150_000
LABEL_BUDGET = 150_000  # the same for finding places for labels
# Cells the courses of arrows are filed in, for labels to avoid them: a long arrow passes
# many cells, and a container of thousands of states has thousands of long arrows (their
# length grows with the container: quadratic in all). Past it, arrows are not traced.
TRACE_BUDGET = 300_000
BORDER_CLEARANCE = 2.0  # how near a label may come to a container's border

# What a course runs through, by kind: ("thing", n) for box n or title n of
# ``Scene.obstacles``, ("room", n) for container n of ``Scene.rooms``, ("wall", n) for
# region separator n of ``Scene.walls``.
Hit = tuple[str, int]


class Scene:
    def __init__(self, layout: Layout) -> None:
        self.boxes = layout.boxes
        self.obstacles = Grid()
        self.rooms = Grid()
        self.taken = Grid()
        self.arrows = Lines()
        self.walls = Lines()  # the dashed lines between parallel regions
        self.wall_of: list[int] = []  # the parallel state each separator divides
        for number, (parallel, a, b) in enumerate(layout.separators):
            self.walls.add(a, b, number)
            self.wall_of.append(parallel)
        for box in self.boxes:
            shape = box.rect if box.role in LEAVES else _title(box)
            self.obstacles.add(shape, box.index)
            self.taken.add(shape, box.index)
            if box.index and box.role not in LEAVES:
                self.rooms.add(box.rect, box.index)

    def lineage(self, *states: int) -> set[int]:
        """The states and all their ancestors."""
        found: set[int] = set()
        for index in states:
            while index >= 0 and index not in found:
                found.add(index)
                index = self.boxes[index].parent
        return found

    def rect(self, hit: Hit) -> Rect:
        if hit[0] == "wall":
            (ax, ay), (bx, by) = self.walls.segments[hit[1]]
            return Rect(min(ax, bx), min(ay, by), abs(bx - ax), abs(by - ay))
        grid = self.obstacles if hit[0] == "thing" else self.rooms
        return grid.rects[hit[1]]

    # -- arrows ------------------------------------------------------------------------------

    @property
    def exhausted(self) -> bool:
        """Whether arrows should stop looking for better courses."""
        return self.obstacles.work + self.rooms.work > BUDGET

    @property
    def crowded(self) -> bool:
        """Whether labels should stop looking for better places."""
        return self.taken.work + self.arrows.work > LABEL_BUDGET

    def crossing(self, path: Path, ends: tuple[int, int], related: set[int]) -> list[Hit]:
        """What the course runs through, ascending: boxes and titles other than its two
        ends, containers holding neither end, and the separators between the regions of a
        parallel state that does not hold both ends (an arrow between two regions crosses
        their separator; one leaving a region for outside the parallel need not)."""
        found: set[Hit] = set()
        shared = self.lineage(ends[0]) & self.lineage(ends[1])
        for p, q in chords(path):
            for n in self.walls.crossing(p, q):
                if self.wall_of[n] not in shared:
                    found.add(("wall", n))
            for n in self.obstacles.along(p, q):
                if self.obstacles.tags[n] not in ends:
                    found.add(("thing", n))
            for n in self.rooms.along(p, q):
                if self.rooms.tags[n] not in related:
                    found.add(("room", n))
        return sorted(found)

    @staticmethod
    def cost(hits: list[Hit]) -> int:
        """3 per box, title or region separator crossed, 1 per unrelated container
        entered."""
        return sum(1 if kind == "room" else 3 for kind, _ in hits)

    # -- labels ------------------------------------------------------------------------------

    def trace(self, number: int, path: Path) -> None:
        """Record an arrow's course, so that labels prefer not to sit on it (not past
        TRACE_BUDGET)."""
        if self.arrows.filed > TRACE_BUDGET:
            return
        for p, q in chords(path):
            self.arrows.add(p, q, number)

    def covered(self, spot: Rect, own: int, related: set[int]) -> int:
        """How bad a label here would be: 10 per name, box or label covered, per container
        border or region separator it crosses (a label is inside a box or outside it, never
        astride its line), 4 per arrow it lies on (its own too: a label on its arrow's line
        breaks the line), 3 per container holding neither end of its arrow."""
        things = len(self.taken.overlapping(spot))
        near = spot.inflate(BORDER_CLEARANCE)
        borders = rooms = 0
        for n in self.rooms.overlapping(near):
            if not self.rooms.rects[n].contains(near):
                borders += 1
            elif self.rooms.tags[n] not in related:
                rooms += 1
        walls = len(self.walls.tags_through(spot))
        arrows = len(self.arrows.tags_through(spot))
        return 10 * (things + borders + walls) + 4 * arrows + 3 * rooms

    def take(self, spot: Rect) -> None:
        self.taken.add(spot)


def _title(box: Box) -> Rect:
    """The title area of a container: its name and listed lines, not its whole width."""
    lines = max((text_width(line, SMALL_FONT) for line in box.lines), default=0.0)
    width = max(text_width(box.label, STATE_FONT, bold=True), lines) + 2 * PAD
    return Rect(box.rect.x, box.rect.y, min(width, box.rect.w), box.title)
