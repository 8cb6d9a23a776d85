"""Mapping a position of one chart version onto another: pure, no database, no chart code.

A position stores states by their index in its chart; another version numbers them
differently. The mapping goes through state ids: every state keeps its id unless the plan
maps it (``{"review": "approval"}``: renamed, split onto a compound, or removed onto another
state). What it does with each part of the state:

- **configuration**: each active atomic state maps to a state of the new version; the new
  configuration is those states, their ancestors, and, where that leaves a compound state
  without an active child or a parallel state without one of its regions, the default entry
  of what is missing (its ``initial``; no ``<onentry>`` runs: a migration runs no chart code;
  ``Mapped.onentry_not_run`` lists the newly active states whose ``<onentry>`` so did not run).
  Two mapped states that would both be active children of one compound state, a mapped state
  that is a history pseudo-state, or a ``<final>`` are refused.
- **history values**: a history state kept in the new version keeps what it remembers, mapped
  the same way (refused if a remembered state has no counterpart); a history state the new
  version does not have is dropped (nothing could restore it).
- **running invocations**: each must still be in an active state that has the same
  ``<invoke>`` (by position among the state's invokes), or the position is refused.
- **late-bound states** map like the configuration (those that have no counterpart are
  dropped: their data stays in the datamodel).
- **the datamodel, the counters, the session**: carried over as they are (the counters must
  be: timers are keyed on the send ordinal, unique forever). A datamodel transform, when the
  plan names one, is the caller's (``statecharts.operations.chart_migration.applying``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from statecharts.core.model import Chart as CompiledChart
from statecharts.core.model import Kind
from statecharts.core.state import Invocation, State


class Unmappable(ValueError):
    """The position cannot be mapped onto the new version; the message says why and what
    to map."""


@dataclass(frozen=True, slots=True)
class Mapped:
    state: State
    configuration: list[str]  # the new active atomic state ids
    entered: list[str] = field(default_factory=list)  # states entered by default entry
    dropped_history: list[str] = field(default_factory=list)
    # States active after the migration that were not before (under the renames): a
    # migration enters them without running any chart code, so their <onentry> did not run.
    newly_active: list[str] = field(default_factory=list)
    onentry_not_run: list[str] = field(default_factory=list)  # those with an <onentry>


def map_state(
    state: State,
    old: CompiledChart | None,
    new: CompiledChart,
    renames: Mapping[str, str],
    *,
    atomic_ids: Sequence[str] | None = None,
) -> Mapped:
    """``state`` (a position of ``old``) as a position of ``new``.

    ``old`` may be None when no stored chart has the source the position was written for (a
    source edited in place): then ``atomic_ids`` (the execution row's configuration) stand
    for the configuration, and a position that remembers history or runs invocations is
    refused, since their indexes cannot be read without it.
    """
    versions = _Versions(old, new, renames)
    atomic = _active_atomic_ids(state, old, atomic_ids)
    configuration, entered = _complete(new, _new_atomic_states(versions, atomic))
    history, dropped = _map_history(versions, state)
    invocations = tuple(_map_invocation(inv, old, new, versions.target, configuration)
                        for inv in state.invocations)  # fmt: skip
    mapped = state.evolve(
        configuration=tuple(sorted(configuration)),
        history=history,
        bound=_map_bound(versions, state),
        invocations=invocations,
    )
    ids = [new.states[i].id for i in mapped.configuration if new.states[i].is_atomic]
    newly = _newly_active(versions, state, atomic, mapped)
    not_run = [i for i in newly if new.states[new.ids[i]].onentry]
    return Mapped(mapped, ids, entered, dropped, newly, not_run)


@dataclass(frozen=True, slots=True)
class _Versions:
    """The two versions and the plan's renames: how a state of one is found in the other."""

    old: CompiledChart | None
    new: CompiledChart
    renames: Mapping[str, str]

    def target(self, old_id: str) -> int | None:
        """The index in the new version of the state ``old_id`` maps to (None: it has none)."""
        return self.new.ids.get(self.renames.get(old_id, old_id))

    def old_id(self, index: int) -> str:
        assert self.old is not None
        return self.old.states[index].id


def _active_atomic_ids(
    state: State, old: CompiledChart | None, atomic_ids: Sequence[str] | None
) -> list[str]:
    """The ids of the position's active atomic states: read from ``old``, or, without it,
    the execution row's (when the position holds nothing else that needs ``old``)."""
    if old is not None:
        return [old.states[i].id for i in state.configuration if old.states[i].is_atomic]
    if atomic_ids is None:
        raise Unmappable("the chart it was written for is gone and no configuration is known")
    if state.history or state.invocations:
        raise Unmappable(
            "no stored chart has the source this position was written for, so its "
            "history values and invocations cannot be read: load that source again"
        )
    return list(atomic_ids)


def _new_atomic_states(versions: _Versions, atomic: list[str]) -> set[int]:
    """The states of the new version the active atomic states map to: each must exist and be
    a state one can be in (not a history pseudo-state, not a ``<final>``)."""
    new, renames = versions.new, versions.renames
    chosen: set[int] = set()
    for state_id in atomic:
        index = versions.target(state_id)
        if index is None:
            hint = renames.get(state_id, state_id)
            raise Unmappable(
                f"the active state {state_id!r} is not in the new version"
                + (f" (mapped to {hint!r}, which it does not have)" if hint != state_id else "")
                + f": map it to one of the new version's states ({state_id}=NEW_ID)"
            )
        node = new.states[index]
        if node.is_history or node.kind == Kind.FINAL:
            raise Unmappable(
                f"the active state {state_id!r} maps to {node.id!r}, a "
                f"{'history pseudo-state' if node.is_history else '<final>'} of the new version"
            )
        chosen.add(index)
    return chosen


def _map_history(
    versions: _Versions, state: State
) -> tuple[dict[int, tuple[int, ...]], list[str]]:
    """The history values the new version keeps (by its indexes), and the ids of the history
    states it does not have (dropped: nothing could restore them)."""
    history: dict[int, tuple[int, ...]] = {}
    dropped: list[str] = []
    for h, remembered in sorted(state.history.items()):
        h_id = versions.old_id(h)
        h_new = versions.target(h_id)
        if h_new is None or not versions.new.states[h_new].is_history:
            dropped.append(h_id)
            continue
        values = []
        for i in remembered:
            index = versions.target(versions.old_id(i))
            if index is None:
                raise Unmappable(
                    f"the history state {h_id!r} remembers {versions.old_id(i)!r}, which is "
                    f"not in the new version: map it ({versions.old_id(i)}=NEW_ID)"
                )
            values.append(index)
        history[h_new] = tuple(sorted(set(values)))
    return history, dropped


def _map_bound(versions: _Versions, state: State) -> tuple[int, ...]:
    """The late-bound states that have a counterpart (the others' data stays in the
    datamodel)."""
    if versions.old is None:  # only the root's index (0) is known; late-bound states bind again
        return (0,) if 0 in state.bound else ()
    mapped_bound = (versions.target(versions.old_id(i)) for i in state.bound)
    return tuple(sorted({b for b in mapped_bound if b is not None}))


def _newly_active(versions: _Versions, state: State, atomic: list[str], mapped: State) -> list[str]:
    """The ids of the states active after the migration that were not before (under the
    renames; without the old version, its atomic states are all that is known)."""
    renames, new = versions.renames, versions.new
    if versions.old is None:
        before = {renames.get(i, i) for i in atomic}  # (ancestors unknown: atomic ones only)
    else:
        old_id = versions.old_id
        before = {renames.get(old_id(i), old_id(i)) for i in state.configuration if i != 0}
    return [new.states[i].id for i in mapped.configuration
            if i != 0 and new.states[i].id not in before]  # fmt: skip


def _map_invocation(
    invocation: Invocation,
    old: CompiledChart | None,
    new: CompiledChart,
    target: Callable[[str], int | None],
    configuration: set[int],
) -> Invocation:
    assert old is not None
    old_state = old.states[invocation.state]
    new_index = target(old_state.id)
    position = [i.index for i in old_state.invokes].index(invocation.invoke)
    if new_index is None or new_index not in configuration:
        raise Unmappable(
            f"the invocation {invocation.invokeid!r} runs in {old_state.id!r}, which is not "
            "active in the new version"
        )
    invokes = new.states[new_index].invokes
    if position >= len(invokes):
        raise Unmappable(
            f"the invocation {invocation.invokeid!r} runs the <invoke> number {position + 1} "
            f"of {old_state.id!r}, which the new version's {new.states[new_index].id!r} "
            "does not have"
        )
    new_invoke = invokes[position]
    return Invocation(
        invocation.invokeid, new_index, new_invoke.index, new_invoke.autoforward,
        invocation.ordinal,
    )  # fmt: skip


def _complete(chart: CompiledChart, chosen: set[int]) -> tuple[set[int], list[str]]:
    """``chosen`` with their ancestors and the default entry of whatever is missing (a
    compound state's initial, a parallel state's every region), in the new chart."""
    active: set[int] = {0}
    for index in chosen:
        active.add(index)
        active.update(chart.states[index].ancestors)
    _refuse_two_active_children(chart, active)
    entered: list[str] = []
    pending = sorted(active)
    while pending:
        index = pending.pop(0)
        for entry in _missing_children(chart, index, active):
            for added in (entry, *chart.states[entry].ancestors):
                if added not in active:
                    active.add(added)
                    entered.append(chart.states[added].id)
                    pending.append(added)
    return active, entered


def _refuse_two_active_children(chart: CompiledChart, active: set[int]) -> None:
    """Two active children of one compound state cannot both be entered."""
    for index in active:
        node = chart.states[index]
        if node.kind in (Kind.COMPOUND, Kind.ROOT):
            children = [c for c in node.children if c in active]
            if len(children) > 1:
                names = ", ".join(repr(chart.states[c].id) for c in children)
                raise Unmappable(
                    f"{names} would all be active in {node.id!r}, where one state is active "
                    "at a time: map them onto one state"
                )


def _missing_children(chart: CompiledChart, index: int, active: set[int]) -> list[int]:
    """What the active state ``index`` lacks and its default entry gives: a parallel
    state's regions not active, a compound state's initial when no child is active (its
    first child that is not a history pseudo-state when it names none)."""
    node = chart.states[index]
    if node.kind == Kind.PARALLEL:
        return [c for c in node.children
                if c not in active and not chart.states[c].is_history]  # fmt: skip
    if node.kind in (Kind.COMPOUND, Kind.ROOT) and not any(c in active for c in node.children):
        targets = node.initial.targets if node.initial is not None else ()
        if not targets:
            targets = tuple(c for c in node.children if not chart.states[c].is_history)[:1]
        return list(targets)
    return []
