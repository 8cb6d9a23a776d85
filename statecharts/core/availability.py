"""What a session can do now: the external events that would enable a transition.

A pure function of a compiled chart and a :class:`~statecharts.core.state.State` (no Django,
no I/O; a clock only when the host gives one, for the guards' time). It follows the spec's
transition selection (Appendix D, ``selectTransitions``) for each candidate event name,
without taking any transition:

- the candidates are the event descriptors of the transitions of the active atomic states
  and of their ancestors (spec 3.12.1: a descriptor ``order`` matches ``order`` and every
  name under it, ``order.paid``; ``order.*`` is the same descriptor; ``*`` matches any name);
- for each candidate, each active atomic state looks at its matching transitions in document
  order, its own before its ancestors', as the interpreter does: the first whose guard holds
  is the one that would be taken.

**Guards.** A guard is *evaluated* only when evaluating it cannot change anything:

1. it is side-effect free by its text (the sandbox's own purity test: no assignment, no
   ``++``/``--``, no ``delete``/``new``, no call but ``In()``, no tagged template), and
2. it does not read ``_event`` (what it answers would depend on the data of an event not yet
   sent), and
3. it is evaluated in a *throwaway* datamodel restored from the state's snapshot, never in
   one that steps the session: whatever it did would be discarded with it anyway.

Every other guard is :attr:`Availability.CONDITIONAL`: it may or may not hold when the event
arrives. A guard that fails to evaluate (an error, a time limit) is conditional too, with
the reason. With the null datamodel the only guards are ``In('id')``, always evaluated.

**Cost.** Linear in the size of the transitions the selection looks at, whatever the chart's
shape (many names, long descriptor lists, a prefix descriptor shared by thousands of
transitions): the descriptors go into a trie once (token by token), and a name is matched by
the descriptors on its path from the root, so each name's availability comes from one walk
of the trie, and each guard is evaluated at most once per answer (not at all when an
earlier transition already decides). Only the states with a transition a name matches are
visited for its transitions list. Those lists can hold, in all, more than the chart (a guard
that is false now on a prefix descriptor is listed under every name below it): what they
hold is counted against a **work budget** linear in the chart's size
(:func:`default_work_budget`), and past it the lists are cut short and the events marked
``truncated``; the names and their availability are always complete. With a host clock
(:class:`GuardTime`), the guards of one answer (or of several: a list page's rows) share a
wall-clock allowance; past it, guards are not evaluated (conditional, with the reason).

The answer describes the state it was given. Between reading it and sending the event,
other inputs may move the session; the send is decided by the step, not by this answer.
"""

from __future__ import annotations

import heapq
import re
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from itertools import repeat

from statecharts.core.datamodel import Datamodel, Limits, create_datamodel
from statecharts.core.errors import DatamodelError, StatechartError
from statecharts.core.interpreter import ioprocessors
from statecharts.core.model import Chart, Expr, Transition
from statecharts.core.state import State

# A guard gets at most this long to answer here (the chart's own limit may be lower): an
# availability question must stay cheap, whatever the chart's guards do.
GUARD_TIME_LIMIT_MS = 50
# With a host clock, all the guards of one answer (or of the answers sharing a GuardTime)
# get at most this long together.
GUARDS_TIME_BUDGET_MS = 1_000
# The transitions lists of one answer may use this many work units, plus
# WORK_BUDGET_PER_UNIT per unit of the chart's size (see default_work_budget).
WORK_BUDGET_BASE = 100_000
WORK_BUDGET_PER_UNIT = 4
_READS_EVENT = re.compile(r"\b_event\b")


class Availability(StrEnum):
    """Whether an event sent now would enable a transition."""

    ENABLED = "enabled"  # a transition without a guard, or whose guard holds now
    CONDITIONAL = "conditional"  # only transitions whose guards could not be evaluated
    DISABLED = "disabled"  # every matching transition's guard is false now


class GuardKind(StrEnum):
    """How a transition's guard was treated."""

    NONE = "none"  # no guard: the transition is taken when its event matches
    EVALUATED = "evaluated"  # side-effect free, evaluated on a throwaway datamodel
    READS_EVENT = "reads_event"  # depends on the data of the event (not evaluated)
    SIDE_EFFECTS = "side_effects"  # its text may change something (not evaluated)
    FAILED = "failed"  # evaluating it failed (an error or a time limit)


@dataclass(frozen=True, slots=True)
class TransitionOption:
    """One transition an event would select from an active state, and its guard's verdict."""

    source: str  # the state id the transition belongs to (an active state or an ancestor)
    targets: tuple[str, ...]  # target state ids; () for a targetless transition
    event: str  # the transition's event attribute as written
    cond: str | None  # the guard's source, or None
    guard: GuardKind
    availability: Availability
    reason: str = ""  # why it is conditional or disabled, in words


@dataclass(frozen=True, slots=True)
class AvailableEvent:
    """One event name the session's active states react to now.

    ``name`` is the descriptor as written without a trailing ``.*`` (``"*"`` for the
    wildcard). Sending ``name`` itself matches it; so does any name under it
    (``order`` matches ``order.paid``), and with :attr:`any_name` (the ``*`` descriptor)
    any name at all. :attr:`family` marks a descriptor written as a family (``order.*``):
    its author meant names under it to be sent. :attr:`reserved` marks names the platform
    keeps for its own events (``error.*``, ``done.*`` by default): outsiders cannot send
    them, though the chart reacts to them. :attr:`truncated` marks a :attr:`transitions`
    list cut short by the answer's work budget (see the module docstring).
    """

    name: str
    availability: Availability
    transitions: tuple[TransitionOption, ...]
    any_name: bool = False
    family: bool = False
    reserved: bool = False
    # Its transitions list is cut short: the answer's work budget ran out (the name and its
    # availability are exact; the list holds the first transitions the selection looks at).
    truncated: bool = False

    @property
    def enabled(self) -> bool:
        return self.availability is Availability.ENABLED


@dataclass(slots=True)
class GuardTime:
    """A wall-clock allowance for the guards evaluated by one answer, or by several that
    share it (the rows of a list page): ``clock`` is the host's monotonic clock in seconds.
    Each guard gets at most what is left (and at most :data:`GUARD_TIME_LIMIT_MS`); once
    it is spent, guards are not evaluated (conditional, with the reason)."""

    clock: Callable[[], float]
    budget_ms: float = GUARDS_TIME_BUDGET_MS
    spent_ms: float = 0.0

    @property
    def left_ms(self) -> float:
        return self.budget_ms - self.spent_ms


def available_events(
    chart: Chart,
    state: State,
    *,
    limits: Limits | None = None,
    reserved: Iterable[str] = ("done", "error"),
    guard_time: GuardTime | None = None,
    work_budget: int | None = None,
) -> tuple[AvailableEvent, ...]:
    """The events that would enable a transition from ``state``'s configuration, in document
    order of their first transition (see the module docstring for the rules). A session that
    is not running has none. ``reserved``: the event roots outsiders may not send (marked,
    not left out). ``limits``: the sandbox's limits (each guard gets at most
    :data:`GUARD_TIME_LIMIT_MS` whatever they say). ``guard_time``: a wall-clock allowance
    for all the guards evaluated (several answers may share one). ``work_budget``: the work
    units the transitions lists may use (None: :func:`default_work_budget`)."""
    if not state.running:
        return ()
    states = chart.states
    atomics = sorted(s for s in state.configuration if states[s].is_atomic)
    # The states the selection looks at: the active atomic states and their ancestors.
    looked_at: set[int] = set()
    for atomic in atomics:
        s = atomic
        while s >= 0 and s not in looked_at:
            looked_at.add(s)
            s = states[s].parent
    transitions = sorted(
        (t for s in looked_at for t in states[s].transitions if not t.eventless),
        key=_by_index,
    )
    trie, names = _descriptor_trie(transitions)
    roots = tuple(r for r in reserved if r)
    guards = _Guards(chart, state, limits, guard_time)
    try:
        _availability(trie, names, guards)
        selection = _Selection(
            chart,
            atomics,
            guards,
            default_work_budget(transitions) if work_budget is None else work_budget,
        )
        result = []
        for node in names:
            parts = node.parts
            options, truncated = selection.options(node)
            name = ".".join(parts) if parts else "*"
            result.append(
                AvailableEvent(
                    name=name,
                    availability=node.availability,
                    transitions=options,
                    any_name=node.any_name,
                    family=node.family and not node.any_name,
                    reserved=bool(parts)
                    and any(name == root or name.startswith(root + ".") for root in roots),
                    truncated=truncated,
                )
            )
        return tuple(result)
    finally:
        guards.close()


def default_work_budget(transitions: Iterable[Transition]) -> int:
    """The work the transitions lists of one answer may use: :data:`WORK_BUDGET_BASE`, plus
    :data:`WORK_BUDGET_PER_UNIT` per unit of the size of the transitions the selection looks
    at (:func:`option_size` of each, and one per descriptor). Linear in the chart: the lists
    of any shape whose lists are linear are complete, and the others are cut short."""
    size = sum(option_size(t) + len(t.events) for t in transitions)
    return WORK_BUDGET_BASE + WORK_BUDGET_PER_UNIT * size


def option_size(transition: Transition) -> int:
    """What listing ``transition`` once costs, in work units: about the characters of its
    :class:`TransitionOption` (its event attribute, its guard, its source and targets are
    repeated in every list that holds it)."""
    cond = transition.cond
    return (
        _OPTION_UNITS
        + len(transition.event_text or "")
        + (len(cond.source) if cond is not None else 0)
        + len(transition.targets) * _TARGET_UNITS
    )


_OPTION_UNITS = 16  # the fixed part of an option (its source, guard kind, availability)
_TARGET_UNITS = 8  # one target state's id, about


def _by_index(transition: Transition) -> int:
    return transition.index


def _first(item: tuple[int, int]) -> int:
    return item[0]


class _Node:
    """A node of the trie of the descriptors the selection looks at: one per token prefix
    (``()`` is the root: the ``*`` descriptor). A node whose prefix is a descriptor of some
    transition is a *name*: its transitions, grouped by source state (document order in
    each), and the answer's availability for the name."""

    __slots__ = (
        "any_name",
        "availability",
        "by_source",
        "children",
        "conditional",
        "enabled",
        "family",
        "parts",
        "scanned",
        "sources",
        "transitions",
        "up",
    )

    def __init__(self, parts: tuple[str, ...] = ()) -> None:
        self.parts = parts  # a name's descriptor (set on names only: copying each prefix
        # of a descriptor of thousands of tokens was quadratic in it)
        self.children: dict[str, _Node] = {}
        self.transitions: list[Transition] = []  # document order; empty: not a name
        self.by_source: dict[int, list[Transition]] = {}
        self.sources: list[int] | None = None  # by_source's keys, last first (when needed)
        self.any_name = self.family = False
        self.up: _Node | None = None  # the nearest name above (a shorter descriptor)
        self.scanned = self.enabled = self.conditional = False
        self.availability = Availability.DISABLED


def _descriptor_trie(transitions: list[Transition]) -> tuple[_Node, list[_Node]]:
    """The trie of the descriptors of ``transitions`` (document order), and its names in
    document order of their first transition."""
    root = _Node(())
    names: list[_Node] = []
    for transition in transitions:
        texts = (transition.event_text or "").split()
        for text, parts in zip(texts, transition.events, strict=True):
            node = root
            for token in parts:
                child = node.children.get(token)
                if child is None:
                    child = node.children[token] = _Node()
                node = child
            if not node.transitions:
                node.parts = parts
                names.append(node)
            if not node.transitions or node.transitions[-1] is not transition:
                # (not a descriptor written twice)
                node.transitions.append(transition)
                node.by_source.setdefault(transition.source, []).append(transition)
            node.any_name = node.any_name or parts == ()
            node.family = node.family or text.endswith("*")
    return root, names


def _availability(root: _Node, names: list[_Node], guards: _Guards) -> None:
    """Sets each name's availability: spec 3.12.1, a name is matched by every descriptor on
    its path from the root, so it is enabled when a transition of one of them surely holds,
    else conditional when one may hold. Each name is decided once, from the nearest name
    above it, in document order (the order guards are evaluated in); each node's guards are
    evaluated at most once, and not at all under a name already enabled."""
    stack: list[tuple[_Node, _Node | None]] = [(root, None)]
    while stack:  # the nearest name above each name
        node, up = stack.pop()
        if node.transitions:
            node.up = up
            up = node
        stack.extend((child, up) for child in node.children.values())
    decided: set[int] = set()
    for name in names:
        chain = []  # the names above it not decided yet, nearest first
        node: _Node | None = name
        while node is not None and id(node) not in decided:
            chain.append(node)
            node = node.up
        enabled = node is not None and node.availability is Availability.ENABLED
        conditional = node is not None and node.availability is Availability.CONDITIONAL
        for node in reversed(chain):
            if not enabled:
                _scan(node, guards)
                enabled = node.enabled
                conditional = conditional or node.conditional
            node.availability = (
                Availability.ENABLED
                if enabled
                else Availability.CONDITIONAL
                if conditional
                else Availability.DISABLED
            )
            decided.add(id(node))


def _scan(node: _Node, guards: _Guards) -> None:
    """Whether one of ``node``'s transitions surely holds (up to the first that does), and
    whether one may hold."""
    if node.scanned:
        return
    node.scanned = True
    for transition in node.transitions:
        availability = guards.option(transition).availability
        if availability is Availability.ENABLED:
            node.enabled = True
            return
        if availability is Availability.CONDITIONAL:
            node.conditional = True


class _Selection:
    """The transitions list of each name: what the spec's selection looks at, per active
    atomic state, up to the first transition that surely holds (the interpreter's order: a
    state's own transitions before its ancestors', document order in each), shared between
    the states (each listed once, where the first state to look at it does).

    Only the states with a transition the name matches are visited (the *matched* states:
    the sources of the names on its path in the trie), deepest subtrees first (from the
    last in document order), and only until every active atomic state has found a
    transition that surely holds. Each matched state is reached by the active atomic states
    below it that have not stopped below it. What it costs is counted against the answer's
    work budget; past it, lists are cut short (``truncated``)."""

    def __init__(self, chart: Chart, atomics: list[int], guards: _Guards, budget: int) -> None:
        self.states = chart.states
        self.atomics = atomics
        self.guards = guards
        self.left = budget
        self._stops = _subtree_stops(chart)
        self._sizes: dict[int, int] = {}

    def options(self, node: _Node) -> tuple[tuple[TransitionOption, ...], bool]:
        """The transitions list of the name at ``node``, and whether it was cut short."""
        if self.left <= 0:
            return (), True
        reached = self._reached(node)
        if reached is None:
            return (), True
        # Listed in the order the selection looks at them: by the first atomic state (in
        # document order) that gets to the state, then deepest first.
        states = self.states
        order = sorted(reached, key=lambda s: (reached[s][0], -states[s].depth))
        guards = self.guards
        out: list[TransitionOption] = []
        for source in order:
            for transition in reached[source][1]:
                self.left -= self._size(transition)
                if self.left < 0:
                    return tuple(out), True
                out.append(guards.option(transition))
        return tuple(out), False

    def _reached(self, node: _Node) -> dict[int, tuple[int, list[Transition]]] | None:
        """The matched states of the name at ``node`` that some active atomic state gets to:
        for each, the first such atomic state (in document order) and the transitions it
        looks at there. None when the work budget runs out."""
        stops, atomics = self._stops, self.atomics
        reached: dict[int, tuple[int, list[Transition]]] = {}
        walking: dict[int, int] = {}  # reached state -> the atomic states that get to it
        holds: set[int] = set()  # reached states where a transition surely holds
        tops: list[int] = []  # matched states whose matched parent is not met yet
        left = len(atomics)  # the atomic states that have not stopped yet
        for s, lists in self._matched(node):
            self.left -= 1
            if self.left <= 0:
                return None
            children = []  # its nearest matched descendants, in document order
            stop = stops[s]
            while tops and tops[-1] < stop:
                children.append(tops.pop())
            tops.append(s)
            # The atomic states under s with no matched state in between (the first of
            # them, and how many), and those that walked up through its matched children.
            lo = bisect_left(atomics, s)
            hi = bisect_left(atomics, stop, lo)
            count, at, first = hi - lo, lo, -1
            for child in children:
                child_lo = bisect_left(atomics, child, at)
                child_hi = bisect_left(atomics, stops[child], child_lo)
                count -= child_hi - child_lo
                if first < 0 and child_lo > at:
                    first = atomics[at]
                at = child_hi
                got = reached.get(child)
                if got is not None and child not in holds:
                    count += walking[child]
                    if first < 0 or got[0] < first:
                        first = got[0]
            if first < 0 and at < hi:
                first = atomics[at]
            self.left -= len(children)
            if count == 0:
                continue
            looked = self._look(lists)
            if looked is None:
                return None
            reached[s] = (first, looked)
            walking[s] = count
            if looked and self.guards.option(looked[-1]).availability is Availability.ENABLED:
                holds.add(s)
                left -= count
                if left == 0:
                    break  # every atomic state has stopped: no matched state above is seen
        return reached

    def _matched(self, node: _Node) -> Iterator[tuple[int, list[list[Transition]]]]:
        """The matched states of the name at ``node``, last in document order first (a
        state's matched descendants before it), each with its transitions for the name (a
        list per descriptor that matches)."""
        names: list[_Node] = []
        name: _Node | None = node
        while name is not None:
            names.append(name)
            name = name.up
        self.left -= len(names)
        if len(names) == 1:
            by_source = node.by_source
            for s in _sources(node):
                yield s, [by_source[s]]
            return
        # (each source tagged with its name, so that a state's lists are found without
        # asking every name on the path)
        streams = [zip(_sources(name), repeat(j)) for j, name in enumerate(names)]
        current = -1
        lists: list[list[Transition]] = []
        for s, j in heapq.merge(*streams, key=_first, reverse=True):
            self.left -= 1
            if s != current:
                if lists:
                    yield current, lists
                current, lists = s, []
            lists.append(names[j].by_source[s])
        if lists:
            yield current, lists

    def _look(self, found: list[list[Transition]]) -> list[Transition] | None:
        """A state's transitions for the name in document order, up to the first that surely
        holds; None when the work budget runs out."""
        merged: Iterable[Transition] = (
            found[0] if len(found) == 1 else heapq.merge(*found, key=_by_index)
        )
        looked: list[Transition] = []
        option = self.guards.option
        for transition in merged:
            if looked and looked[-1] is transition:  # matched by two descriptors
                continue
            self.left -= 1
            if self.left <= 0:
                return None
            looked.append(transition)
            if option(transition).availability is Availability.ENABLED:
                break
        return looked

    def _size(self, transition: Transition) -> int:
        size = self._sizes.get(transition.index)
        if size is None:
            size = self._sizes[transition.index] = option_size(transition)
        return size


def _sources(node: _Node) -> list[int]:
    """The source states of ``node``'s transitions, last in document order first (sorted
    once per answer)."""
    ordered = node.sources
    if ordered is None:
        ordered = node.sources = sorted(node.by_source, reverse=True)
    return ordered


def _subtree_stops(chart: Chart) -> list[int]:
    """For each state, the index after its subtree (states are numbered in document order):
    the chart's structure has them (a chart made otherwise: from the parents, linear)."""
    structure = chart.states[0].structure if chart.states else None
    if structure is not None:
        return structure.stops
    return _stops_from_parents([node.parent for node in chart.states])


def _stops_from_parents(parents: list[int]) -> list[int]:
    """The index after each state's subtree, from its parent's index (document order)."""
    count = len(parents)
    stops = list(range(1, count + 1))
    for index in range(count - 1, 0, -1):
        parent = parents[index]
        if parent >= 0 and stops[index] > stops[parent]:
            stops[parent] = stops[index]
    return stops


def _side_effect_free(source: str) -> bool:
    # (imported here: the ECMAScript datamodel loads QuickJS, which a null chart never needs)
    from statecharts.core.datamodel.ecmascript import is_side_effect_free

    return is_side_effect_free(source)


class _Guards:
    """Each transition's guard verdict, made once per answer: evaluated on a throwaway
    datamodel restored from the state (created on the first guard that needs it, closed with
    :meth:`close`)."""

    def __init__(
        self, chart: Chart, state: State, limits: Limits | None, time: GuardTime | None
    ) -> None:
        self.chart = chart
        self.state = state
        base = limits or Limits()
        self.limits = Limits(
            time_ms=min(base.time_ms, GUARD_TIME_LIMIT_MS),
            memory_bytes=base.memory_bytes,
            stack_bytes=base.stack_bytes,
        )
        self.time = time
        self.active_ids = [chart.states[i].id for i in sorted(state.configuration) if i != 0]
        self.evaluations = 0  # guards evaluated (each at most once)
        self._options: dict[int, TransitionOption] = {}
        self._dm: Datamodel | None = None
        self._broken: str | None = None

    def option(self, transition: Transition) -> TransitionOption:
        option = self._options.get(transition.index)
        if option is None:
            option = self._options[transition.index] = self._option(transition)
        return option

    def _option(self, transition: Transition) -> TransitionOption:
        states = self.chart.states
        cond = transition.cond
        common = {
            "source": states[transition.source].id,
            "targets": tuple(states[t].id for t in transition.targets),
            "event": transition.event_text or "",
            "cond": cond.source if cond is not None else None,
        }
        if cond is None:
            return TransitionOption(
                **common, guard=GuardKind.NONE, availability=Availability.ENABLED
            )
        ecmascript = self.chart.datamodel == "ecmascript"
        if ecmascript and _READS_EVENT.search(cond.source):
            return TransitionOption(
                **common,
                guard=GuardKind.READS_EVENT,
                availability=Availability.CONDITIONAL,
                reason="the guard reads _event: it depends on the event's data",
            )
        if ecmascript and not _side_effect_free(cond.source):
            return TransitionOption(
                **common,
                guard=GuardKind.SIDE_EFFECTS,
                availability=Availability.CONDITIONAL,
                reason="the guard may have side effects: it is not evaluated here",
            )
        time = self.time
        if time is not None and time.left_ms <= 0:
            return TransitionOption(
                **common,
                guard=GuardKind.FAILED,
                availability=Availability.CONDITIONAL,
                reason="the guard was not evaluated: the guards of this answer had "
                f"{time.budget_ms:g} ms in all",
            )
        try:
            holds = self._timed(cond)
        except (StatechartError, DatamodelError) as exc:
            return TransitionOption(
                **common,
                guard=GuardKind.FAILED,
                availability=Availability.CONDITIONAL,
                reason=f"the guard could not be evaluated: {exc}",
            )
        if holds:
            return TransitionOption(
                **common, guard=GuardKind.EVALUATED, availability=Availability.ENABLED
            )
        return TransitionOption(
            **common,
            guard=GuardKind.EVALUATED,
            availability=Availability.DISABLED,
            reason="the guard is false now",
        )

    def _timed(self, cond: Expr) -> bool:
        self.evaluations += 1
        time = self.time
        if time is None:
            return self._evaluate(cond, None)
        start = time.clock()
        try:
            return self._evaluate(cond, min(float(GUARD_TIME_LIMIT_MS), time.left_ms))
        finally:
            time.spent_ms += (time.clock() - start) * 1000

    def _evaluate(self, cond: Expr, time_ms: float | None) -> bool:
        if self._broken is not None:
            raise DatamodelError(self._broken)
        dm = self._dm
        if dm is None:
            state = self.state
            dm = create_datamodel(self.chart.datamodel, self.limits)
            try:
                dm.bind_system(
                    state.session_id,
                    state.name if state.name is not None else self.chart.name,
                    ioprocessors(state.session_id, state.io_processors),
                    self._in_state,
                    lambda: list(self.active_ids),
                )
                dm.restore(state.datamodel_json)
                dm.configuration_changed()
            except (StatechartError, DatamodelError) as exc:
                dm.close()
                self._broken = f"the datamodel cannot be restored: {exc}"
                raise DatamodelError(self._broken) from None
            self._dm = dm
        if time_ms is not None:
            dm.set_evaluation_time_limit(time_ms)
        return dm.evaluate_cond(cond)

    def _in_state(self, state_id: str) -> bool:
        index = self.chart.ids.get(state_id)
        return index is not None and index in self.state.configuration

    def close(self) -> None:
        if self._dm is not None:
            self._dm.close()
            self._dm = None
