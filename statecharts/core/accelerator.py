"""The interpreter's accelerator: answers of Appendix D that are worked out once and kept.

The interpreter (``statecharts.core.interpreter``) reads as the spec: each event it selects
transitions by walking the atomic states and their ancestors, each microstep it computes the
exit and entry sets. Many of those answers depend on the chart alone (or on the chart and a
key such as the event's name), so the interpreter asks for them through this module, which
computes each one the first time and keeps it:

- the transitions of a state and its ancestors whose descriptors match an event name
  (``matching``), and the eventless ones (``eventless``);
- the transitions an event selects in a configuration, when no candidate has a guard or
  targets a history state (``keep_selection``: the answer then depends on the event's name
  and the configuration alone);
- a transition's domain, when it has no history target (``domain``);
- the exit set of a set of transitions from a configuration, when none targets a history
  state (``exit_set``);
- the entry set of a set of transitions, when its computation met no history state
  (``entry_set``);
- for an exit or entry set kept, whether it is *quiet*: none of its states has executable
  content to run on the way (``<onexit>``, ``<onentry>``, an initial transition's content),
  an invocation, ``<data>`` or is final. The interpreter then changes the configuration in one
  set operation instead of visiting the states one by one (the same result: nothing runs in
  between), and is given the atomic states among them;
- the ids of the states of a configuration (``ids``; the ECMAScript datamodel keeps the list
  it was last given, so the same configuration gives the same list object);
- the event a ``<raise>`` puts on the internal queue (events are immutable);
- the expressions the datamodel answers without its engine (the ECMAScript datamodel's
  integer and boolean expressions over its scalar globals, ``datamodel/scalar.py``), compiled
  once per chart and kept in ``scalar_programs`` (which the datamodel fills: the table
  outlives the datamodel, which is rebuilt when a session is restored).

With the accelerator off (``Interpreter(chart, accelerated=False)``, or the environment
variable ``STATECHARTS_ACCELERATOR=off`` for every interpreter of the process) each answer is
computed again every time it is asked for, and every expression runs in the datamodel's
engine: the same effects, only slower
(tests/core/test_accelerator.py holds that). The step budgets (``core/budget.py``) are not
here: they are the interpreter's, and are on either way.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Generic, TypeVar

from statecharts.core.events import INTERNAL, Event
from statecharts.core.model import Kind, Raise, StateNode, Transition

# Bounds of the tables whose keys come from outside the chart (event names) or grow with its
# run (configurations): a table that reaches its bound starts again empty.
_EVENT_NAMES = 1024
_CONFIGURATIONS = 1024
_SELECTIONS = 4096  # (event name, configuration) pairs
_EXIT_SETS = 4096  # (configuration, transitions) pairs

ENABLED = os.environ.get("STATECHARTS_ACCELERATOR", "on").strip().lower() not in (
    "off", "0", "false", "no",
)

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
# (states to enter in entry order, states entered by default, default history content, the
# atomic states among them when the set is quiet, else None)
EntrySet = tuple[list[int], frozenset[int], dict[int, Any], tuple[int, ...] | None]
# (states to exit, the same in exit order, the atomic states among them when quiet, else None)
ExitSet = tuple[frozenset[int], list[int], tuple[int, ...] | None]


class Guarded:
    """A selection that depends on more than the event's name and the configuration (a
    guard was among the candidates, or a selected transition targets a history state): it is
    computed every time, from ``candidates``, the candidate transitions of the atomic states
    that have any (in document order)."""

    __slots__ = ("candidates",)

    def __init__(self, candidates: tuple[tuple[Transition, ...], ...]) -> None:
        self.candidates = candidates



class _Kept(dict, Generic[K, V]):  # type: ignore[type-arg]
    """``table[key]`` is ``compute(key)``, computed on first use and kept (a hit is one dict
    lookup, in C)."""

    __slots__ = ("_compute",)

    def __init__(self, compute: Callable[[Any], Any]) -> None:
        super().__init__()
        self._compute = compute

    def __missing__(self, key: Any) -> Any:
        value = self[key] = self._compute(key)
        return value


class _Recomputing:
    """The same table, computed every time: ``table[key]`` calls ``compute(key)``."""

    __slots__ = ("_compute",)

    def __init__(self, compute: Callable[[Any], Any]) -> None:
        self._compute = compute

    def __getitem__(self, key: Any) -> Any:
        return self._compute(key)


class Accelerator:
    """What one interpreter keeps about its chart between events. One per interpreter."""

    enabled = True

    def __init__(self, states: Sequence[StateNode]) -> None:
        self._states = states
        # Event name -> (state -> matching transitions): read by the interpreter directly.
        self.tables: dict[str, Any] = {}
        # Transition index -> domain, for the domains kept: read by the interpreter directly.
        self.domains: dict[int, int | None] = {}
        # Transition index (or indexes, several transitions) -> entry set, for those kept:
        # read by the interpreter directly for a single transition.
        self.entry_sets: dict[int | tuple[int, ...], EntrySet] = {}
        # (event name, configuration) -> the transitions selected, or Guarded: read by the
        # interpreter directly.
        self.selections: dict[tuple[str, tuple[int, ...]], tuple[Transition, ...] | Guarded] = {}
        self._exit_sets: dict[tuple[tuple[int, ...], Any], ExitSet] = {}
        self._ids: dict[tuple[int, ...], list[str]] = {}
        self._raised: dict[int, Event] = {}
        # Expression index -> compiled scalar program or None: handed to the datamodel.
        self.scalar_programs: dict[int, Any] | None = {}

    def _table(self, compute: Callable[[Any], Any]) -> Any:
        return _Kept(compute)

    def matching(
        self, event: Event, compute: Callable[[int, Event], tuple[Transition, ...]]
    ) -> Any:
        """For ``event``'s name: state index -> ``compute(state, event)`` (the transitions of
        the state and its ancestors whose descriptors match the name), kept in ``tables``."""
        if len(self.tables) >= _EVENT_NAMES:  # (names come from outside)
            self.tables.clear()
        table = self.tables[event.name] = self._table(lambda state: compute(state, event))
        return table

    def eventless(self, compute: Callable[[int], tuple[Transition, ...]]) -> Any:
        """State index -> ``compute(state)`` (its and its ancestors' eventless transitions)."""
        return self._table(compute)

    def domain(self, t: Transition, compute: Callable[[Transition], int | None]) -> int | None:
        """``compute(t)``, kept when it is a function of the transition alone (no target is
        a history state, whose meaning depends on the history values)."""
        found = compute(t)
        if t.index >= 0 and not any(self._states[s].is_history for s in t.targets):
            self.domains[t.index] = found
        return found

    def keep_selection(
        self,
        key: tuple[str, tuple[int, ...]],
        enabled: list[Transition],
        candidates: Sequence[tuple[Transition, ...]],
    ) -> None:
        """Keep ``enabled``, what the event named ``key[0]`` selected in the configuration
        ``key[1]`` out of ``candidates`` (those of each atomic state), when that answer
        depends on the name and the configuration alone: no candidate has a guard or targets
        a history state (whose domain, which settles conflicts between the transitions,
        depends on the history values). Otherwise the key keeps the candidates that are not
        empty (Guarded), so that it is not examined again."""
        if len(self.selections) >= _SELECTIONS:  # (names come from outside)
            self.selections.clear()
        states = self._states
        keep = all(
            t.cond is None and not any(states[s].is_history for s in t.targets)
            for ts in candidates
            for t in ts
        )
        self.selections[key] = (
            tuple(enabled) if keep else Guarded(tuple(ts for ts in candidates if ts))
        )

    def exit_set(
        self,
        configuration: tuple[int, ...],
        transitions: list[Transition],
        compute: Callable[[list[Transition]], set[int]],
    ) -> ExitSet:
        """``compute(transitions)`` (the states they exit from ``configuration``) and those
        states in exit order (reverse document order); kept when no transition targets a
        history state (the answer then depends on the configuration and the transitions)."""
        ids = transitions[0].index if len(transitions) == 1 else tuple(t.index for t in transitions)
        key = (configuration, ids)
        kept = self._exit_sets.get(key)
        if kept is not None:
            return kept
        found = frozenset(compute(transitions))
        ordered = sorted(found, reverse=True)
        states = self._states
        quiet = all(
            not states[s].invokes and not any(block.actions for block in states[s].onexit)
            for s in ordered
        )
        kept = (found, ordered, self._atomic(ordered) if quiet else None)
        if all(t.index >= 0 for t in transitions) and not any(
            states[s].is_history for t in transitions for s in t.targets
        ):
            if len(self._exit_sets) >= _EXIT_SETS:
                self._exit_sets.clear()
            self._exit_sets[key] = kept
        return kept

    def entry_set(
        self, transitions: list[Transition], compute: Callable[[list[Transition]], Any]
    ) -> EntrySet:
        """``compute(transitions)``: (states to enter in entry order, states for default
        entry, default history content, history met); kept when the computation met no
        history state (then it depends on the transitions alone)."""
        key: int | tuple[int, ...] | None = None
        if all(t.index >= 0 for t in transitions):
            key = (
                transitions[0].index
                if len(transitions) == 1
                else tuple(t.index for t in transitions)
            )
            kept = self.entry_sets.get(key)
            if kept is not None:
                return kept
        ordered, defaults, history_content, history_met = compute(transitions)
        entry: EntrySet = (
            ordered,
            defaults,
            history_content,
            self._atomic(ordered) if self._quiet_entry(ordered, defaults, history_content)
            else None,
        )
        if key is not None and not history_met:
            self.entry_sets[key] = entry
        return entry

    def _quiet_entry(
        self, ordered: list[int], defaults: frozenset[int], history_content: dict[int, Any]
    ) -> bool:
        if history_content:
            return False
        states = self._states
        for s in ordered:
            node = states[s]
            if node.invokes or node.datas or node.kind == Kind.FINAL:
                return False
            if any(block.actions for block in node.onentry):
                return False
            if s in defaults and node.initial is not None and node.initial.body.actions:
                return False
        return True

    def _atomic(self, ordered: list[int]) -> tuple[int, ...]:
        states = self._states
        return tuple(s for s in ordered if states[s].is_atomic)

    def ids(self, configuration: tuple[int, ...]) -> list[str]:
        """The ids of the states ``configuration`` (sorted indexes) holds, in that order."""
        ids = self._ids.get(configuration)
        if ids is None:
            if len(self._ids) >= _CONFIGURATIONS:
                self._ids.clear()
            states = self._states
            ids = self._ids[configuration] = [states[i].id for i in configuration]
        return ids

    def raised(self, action: Raise) -> Event:
        """The event ``action`` (a ``<raise>``) puts on the internal queue."""
        event = self._raised.get(id(action))
        if event is None:
            event = self._raised[id(action)] = Event(action.event, INTERNAL)
        return event


class Unaccelerated(Accelerator):
    """The accelerator off: every answer computed when asked for, nothing kept."""

    enabled = False

    def __init__(self, states: Sequence[StateNode]) -> None:
        super().__init__(states)
        self.scalar_programs = None  # (every expression runs in the datamodel's engine)

    def _table(self, compute: Callable[[Any], Any]) -> Any:
        return _Recomputing(compute)

    def matching(
        self, event: Event, compute: Callable[[int, Event], tuple[Transition, ...]]
    ) -> Any:
        return _Recomputing(lambda state: compute(state, event))  # (tables stays empty)

    def domain(self, t: Transition, compute: Callable[[Transition], int | None]) -> int | None:
        return compute(t)

    def keep_selection(
        self,
        key: tuple[str, tuple[int, ...]],
        enabled: list[Transition],
        candidates: Sequence[tuple[Transition, ...]],
    ) -> None:
        pass  # (selections stays empty)

    def exit_set(
        self,
        configuration: tuple[int, ...],
        transitions: list[Transition],
        compute: Callable[[list[Transition]], set[int]],
    ) -> ExitSet:
        found = compute(transitions)
        return frozenset(found), sorted(found, reverse=True), None  # (visited one by one)

    def entry_set(
        self, transitions: list[Transition], compute: Callable[[list[Transition]], Any]
    ) -> EntrySet:
        ordered, defaults, history_content, _ = compute(transitions)
        return ordered, defaults, history_content, None  # (visited one by one)

    def ids(self, configuration: tuple[int, ...]) -> list[str]:
        states = self._states
        return [states[i].id for i in configuration]

    def raised(self, action: Raise) -> Event:
        return Event(action.event, INTERNAL)


def accelerator_for(states: Sequence[StateNode], enabled: bool | None = None) -> Accelerator:
    """The accelerator of one interpreter; ``enabled`` None: as ``ENABLED`` (the environment)."""
    on = ENABLED if enabled is None else enabled
    return Accelerator(states) if on else Unaccelerated(states)
