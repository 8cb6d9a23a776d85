"""What a session can do now: the external events that would enable a transition.

A pure function of a compiled chart and a :class:`~statecharts.core.state.State` (no Django,
no clock, no I/O). It follows the spec's transition selection (Appendix D,
``selectTransitions``) for each candidate event name, without taking any transition:

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

The answer describes the state it was given. Between reading it and sending the event,
other inputs may move the session; the send is decided by the step, not by this answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from statecharts.core.datamodel import Datamodel, Limits, create_datamodel
from statecharts.core.errors import DatamodelError, StatechartError
from statecharts.core.events import split_descriptor
from statecharts.core.interpreter import ioprocessors
from statecharts.core.model import Chart, Expr, Transition
from statecharts.core.state import State

# A guard gets at most this long to answer here (the chart's own limit may be lower): an
# availability question must stay cheap, whatever the chart's guards do.
GUARD_TIME_LIMIT_MS = 50
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
    them, though the chart reacts to them.
    """

    name: str
    availability: Availability
    transitions: tuple[TransitionOption, ...]
    any_name: bool = False
    family: bool = False
    reserved: bool = False

    @property
    def enabled(self) -> bool:
        return self.availability is Availability.ENABLED


def available_events(
    chart: Chart,
    state: State,
    *,
    limits: Limits | None = None,
    reserved: Iterable[str] = ("done", "error"),
) -> tuple[AvailableEvent, ...]:
    """The events that would enable a transition from ``state``'s configuration, in document
    order of their first transition (see the module docstring for the rules). A session that
    is not running has none. ``reserved``: the event roots outsiders may not send (marked,
    not left out). ``limits``: the sandbox's limits (each guard gets at most
    :data:`GUARD_TIME_LIMIT_MS` whatever they say)."""
    if not state.running:
        return ()
    states = chart.states
    active = set(state.configuration)
    atomics = sorted(s for s in active if states[s].is_atomic)
    # Per atomic state, its candidate transitions in the interpreter's order.
    per_state: list[tuple[Transition, ...]] = [
        tuple(
            t
            for s in (atomic, *states[atomic].ancestors)
            for t in states[s].transitions
            if not t.eventless
        )
        for atomic in atomics
    ]
    # The candidate names: every descriptor of those transitions, in document order.
    names: dict[tuple[str, ...], tuple[bool, bool]] = {}  # parts -> (any_name, family)
    for transition in sorted({t for ts in per_state for t in ts}, key=lambda t: t.index):
        for text in (transition.event_text or "").split():
            parts = split_descriptor(text)
            any_name = parts == ()
            family = text.endswith("*")
            old = names.get(parts, (False, False))
            names[parts] = (any_name or old[0], family or old[1])
    roots = tuple(r for r in reserved if r)
    guards = _Guards(chart, state, limits)
    try:
        result = []
        for parts, (any_name, family) in names.items():
            options, availability = _select(chart, per_state, parts, guards)
            name = ".".join(parts) if parts else "*"
            result.append(
                AvailableEvent(
                    name=name,
                    availability=availability,
                    transitions=options,
                    any_name=any_name,
                    family=family and not any_name,
                    reserved=bool(parts)
                    and any(name == root or name.startswith(root + ".") for root in roots),
                )
            )
        return tuple(result)
    finally:
        guards.close()


def _side_effect_free(source: str) -> bool:
    # (imported here: the ECMAScript datamodel loads QuickJS, which a null chart never needs)
    from statecharts.core.datamodel.ecmascript import is_side_effect_free

    return is_side_effect_free(source)


def _matches(transition: Transition, parts: tuple[str, ...]) -> bool:
    n = len(parts)
    return any(len(d) <= n and parts[: len(d)] == d for d in transition.events)


def _select(
    chart: Chart,
    per_state: list[tuple[Transition, ...]],
    parts: tuple[str, ...],
    guards: _Guards,
) -> tuple[tuple[TransitionOption, ...], Availability]:
    """The spec's selection for an event named ``parts``, per active atomic state: the
    transitions it would look at, each with its guard's verdict, up to the first that
    surely holds."""
    options: dict[int, TransitionOption] = {}
    any_enabled = any_conditional = False
    for candidates in per_state:
        for transition in candidates:
            if not _matches(transition, parts):
                continue
            option = options.get(transition.index)
            if option is None:
                option = options[transition.index] = guards.option(transition)
            if option.availability is Availability.ENABLED:
                any_enabled = True
                break  # this state's selection stops at the first transition that holds
            if option.availability is Availability.CONDITIONAL:
                any_conditional = True
    if any_enabled:
        availability = Availability.ENABLED
    elif any_conditional:
        availability = Availability.CONDITIONAL
    else:
        availability = Availability.DISABLED
    ordered = tuple(options.values())  # in the order the selection looks at them
    return ordered, availability


class _Guards:
    """Evaluates guards on a throwaway datamodel restored from the state (created on the
    first guard that needs it, closed with :meth:`close`)."""

    def __init__(self, chart: Chart, state: State, limits: Limits | None) -> None:
        self.chart = chart
        self.state = state
        base = limits or Limits()
        self.limits = Limits(
            time_ms=min(base.time_ms, GUARD_TIME_LIMIT_MS),
            memory_bytes=base.memory_bytes,
            stack_bytes=base.stack_bytes,
        )
        self.active_ids = [chart.states[i].id for i in sorted(state.configuration) if i != 0]
        self._dm: Datamodel | None = None
        self._broken: str | None = None

    def option(self, transition: Transition) -> TransitionOption:
        states = self.chart.states
        cond = transition.cond
        common = {
            "source": states[transition.source].id,
            "targets": tuple(states[t].id for t in transition.targets),
            "event": transition.event_text or "",
            "cond": cond.source if cond is not None else None,
        }
        if cond is None:
            return TransitionOption(**common, guard=GuardKind.NONE,
                                    availability=Availability.ENABLED)
        ecmascript = self.chart.datamodel == "ecmascript"
        if ecmascript and _READS_EVENT.search(cond.source):
            return TransitionOption(
                **common, guard=GuardKind.READS_EVENT, availability=Availability.CONDITIONAL,
                reason="the guard reads _event: it depends on the event's data",
            )
        if ecmascript and not _side_effect_free(cond.source):
            return TransitionOption(
                **common, guard=GuardKind.SIDE_EFFECTS, availability=Availability.CONDITIONAL,
                reason="the guard may have side effects: it is not evaluated here",
            )
        try:
            holds = self._evaluate(cond)
        except (StatechartError, DatamodelError) as exc:
            return TransitionOption(
                **common, guard=GuardKind.FAILED, availability=Availability.CONDITIONAL,
                reason=f"the guard could not be evaluated: {exc}",
            )
        if holds:
            return TransitionOption(**common, guard=GuardKind.EVALUATED,
                                    availability=Availability.ENABLED)
        return TransitionOption(
            **common, guard=GuardKind.EVALUATED, availability=Availability.DISABLED,
            reason="the guard is false now",
        )

    def _evaluate(self, cond: Expr) -> bool:
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
        return dm.evaluate_cond(cond)

    def _in_state(self, state_id: str) -> bool:
        index = self.chart.ids.get(state_id)
        return index is not None and index in self.state.configuration

    def close(self) -> None:
        if self._dm is not None:
            self._dm.close()
            self._dm = None
