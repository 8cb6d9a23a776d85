"""Charts that load but cannot run within the step budgets, found at load without running them.

Counted from the compiled chart in one pass over its states (linear in its size, no chart
code runs), and compared with the step time budget (:mod:`statecharts.core.budget`) at the
rates a step does that work, measured on this project's 2-CPU machine (docs/charts.md):

- **starting it**: every ``<data>`` bound at start (all of them with early binding, those of
  the states entered at start with late binding) is one evaluation;
  :data:`DATA_BOUND_PER_SECOND` fit a second. Past the budget the start is refused
  (``StartRefused``), every time;
- **one event**: the transitions one event can select in one microstep (those with the same
  descriptor in states that can be active at once: the regions of a ``<parallel>``) are
  compared pairwise for conflicts; :data:`CONFLICT_CHECKS_PER_SECOND` pairs fit a second.
  Past the budget the event halts the execution.

These are estimates (a faster machine does more, a chart's code may do less): a host reports
them as warnings, and as errors only when asked to be strict (``statechart validate
--strict``).
"""

from __future__ import annotations

from collections import Counter

from statecharts.core.errors import Problem
from statecharts.core.model import Chart, Kind

# What one step does in a second on this project's 2-CPU machine (2026-12-07, measured
# with the ECMAScript datamodel: 63,000 <data expr> bound at start take about 5 s; 5,000
# parallel regions taking one event each take over 5 s, 3,000 about 1.3 s).
DATA_BOUND_PER_SECOND = 12_000
CONFLICT_CHECKS_PER_SECOND = 5_000_000


def entered_at_start(chart: Chart) -> set[int]:
    """The states the start enters (the root's initial configuration, ancestors included)."""
    states = chart.states
    entered: set[int] = set()
    todo = [0]
    while todo:
        index = todo.pop()
        if index in entered:
            continue
        entered.add(index)
        node = states[index]
        children = [c for c in node.children if not states[c].is_history]
        if node.kind is Kind.PARALLEL:
            todo.extend(children)
        elif node.initial is not None and node.initial.targets:
            for target in node.initial.targets:
                todo.append(target)
                todo.extend(a for a in states[target].ancestors if a not in entered)
        elif children:
            todo.append(children[0])
    return entered


def widest_event(chart: Chart) -> tuple[int, str, int]:
    """The most transitions one event can select in one microstep: (how many, the event
    descriptor, the state whose regions hold them). Bounded by how many atomic states can be
    active at once under that state (the sum over a ``<parallel>``'s regions)."""
    states = chart.states
    width = [1] * len(states)
    for index in range(len(states) - 1, -1, -1):  # children after their parent
        node = states[index]
        children = [width[c] for c in node.children if not states[c].is_history]
        if children:
            width[index] = sum(children) if node.kind is Kind.PARALLEL else max(children)
    best = (0, "", 0)
    for index, node in enumerate(states):
        if node.kind is not Kind.PARALLEL or width[index] <= best[0]:
            continue
        counts: Counter[str] = Counter()
        for below in _subtree(chart, index):
            for transition in states[below].transitions:
                for descriptor in set((transition.event_text or "").split()):
                    counts[descriptor] += 1
        if counts:
            descriptor, count = counts.most_common(1)[0]
            count = min(count, width[index])
            if count > best[0]:
                best = (count, descriptor, index)
    return best


def _subtree(chart: Chart, index: int) -> range:
    """The states under ``index`` (numbered in document order: one range)."""
    structure = chart.states[index].structure
    if structure is not None:
        return range(index + 1, structure.stops[index])
    stop, states = index + 1, chart.states
    while stop < len(states) and index in states[stop].ancestors:
        stop += 1
    return range(index + 1, stop)


def runnability_problems(chart: Chart, time_ms: int | None, *, strict: bool) -> list[Problem]:
    """What the step time budget ``time_ms`` will refuse of ``chart`` however it is used:
    warnings, or errors when ``strict``."""
    if not time_ms:
        return []
    severity = "error" if strict else "warning"
    found: list[Problem] = []
    entered = entered_at_start(chart) if chart.binding == "late" else None
    bound = sum(
        len(node.datas)
        for index, node in enumerate(chart.states)
        if entered is None or index in entered
    )
    start_ms = bound * 1000 // DATA_BOUND_PER_SECOND
    if start_ms > time_ms:
        found.append(Problem(1, 1, (
            f"this chart cannot start within the step time budget: starting it binds {bound} "
            f"<data>, about {start_ms} ms of work at {DATA_BOUND_PER_SECOND} a second, and "
            f"one step may take {time_ms} ms (STEP_TIME_BUDGET_MS): every start would be "
            f"refused. Bind the data late (binding=\"late\") or hold it in fewer <data>"
        ), severity))
    count, descriptor, where = widest_event(chart)
    checks = count * count
    event_ms = checks * 1000 // CONFLICT_CHECKS_PER_SECOND
    if event_ms > time_ms:
        node = chart.states[where]
        found.append(Problem(node.line or 1, node.column or 1, (
            f"an event {descriptor!r} selects {count} transitions at once in <parallel "
            f"id={node.id!r}>; comparing them takes about {event_ms} ms ({checks} pairs at "
            f"{CONFLICT_CHECKS_PER_SECOND} a second), and one step may take {time_ms} ms "
            f"(STEP_TIME_BUDGET_MS): it would halt the execution. Use fewer regions"
        ), severity))
    return found
