"""The effect planner: which instruction each effect is, decided once, for every host.

The interpreter emits effects (``statecharts.core.effects``); a host must act on them. *What*
each effect asks for is decided here, purely, with no I/O, in one place: ``plan(effects)``
returns one :class:`Instruction` per effect, **in exactly the order the core emitted them**
(never regrouped by kind). Drivers differ only in *how* they perform an instruction: the
in-memory driver enqueues, the durable stepper writes rows. No code outside this module
branches on a target kind.

A delayed send is planned twice, by the same rule: once when the core emits it (``SCHEDULE``,
carrying the delivery it will become) and once when its timer fires (``delivery``, from the
stored target and event), so a fired timer is delivered exactly as an immediate send to the
same target would have been.

Instruction kinds (the design documents' ``Effects.plan`` vocabulary, typed):

========================  =======================================================================
``deliver_self``          the event goes on this session's external queue (a self-send)
``deliver_internal``      the event goes on this session's internal queue (a fired ``#_internal``)
``deliver_session``       to another session (``#_scxml_<id>``), by its session id
``deliver_parent``        to the session that invoked this one
``deliver_child``         to an invoked child (``#_<invokeid>``)
``deliver_route``         to a host-registered route (a ``<send type>`` that is not SCXML)
``schedule``              keep a delayed send until it is due (a timer), then deliver it
``schedule_route``        keep a delayed send on a route (the route timer queue) until due
``cancel_timers``         cancel this session's delayed sends under a send id (spec 6.3)
``start_invocation``      start an ``<invoke>``
``cancel_invocation``     stop an invocation (its state was exited, or the session stopped)
``autoforward``           forward an external event, unmodified, to an invocation
``finish``                the session stopped (final state, cancel, datamodel error)
``halt``                  the round budget ran out
``log``                   a ``<log>``
``observe``               nothing is owed (a datamodel change, a trace effect)
``unroutable``            the host cannot act on it (with a reason); never dropped silently
========================  =======================================================================
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from statecharts.core.effects import Effect, EffectKind
from statecharts.core.events import Event
from statecharts.core.state import positional_constructor
from statecharts.core.targets import Target, TargetError, TargetKind


class InstructionKind(StrEnum):
    DELIVER_SELF = "deliver_self"
    DELIVER_INTERNAL = "deliver_internal"
    DELIVER_SESSION = "deliver_session"
    DELIVER_PARENT = "deliver_parent"
    DELIVER_CHILD = "deliver_child"
    DELIVER_ROUTE = "deliver_route"
    SCHEDULE = "schedule"
    SCHEDULE_ROUTE = "schedule_route"
    CANCEL_TIMERS = "cancel_timers"
    START_INVOCATION = "start_invocation"
    CANCEL_INVOCATION = "cancel_invocation"
    AUTOFORWARD = "autoforward"
    FINISH = "finish"
    HALT = "halt"
    LOG = "log"
    OBSERVE = "observe"
    UNROUTABLE = "unroutable"

    @property
    def is_delivery(self) -> bool:
        return self in _DELIVERIES


_DELIVERIES = frozenset(
    {
        InstructionKind.DELIVER_SELF,
        InstructionKind.DELIVER_INTERNAL,
        InstructionKind.DELIVER_SESSION,
        InstructionKind.DELIVER_PARENT,
        InstructionKind.DELIVER_CHILD,
        InstructionKind.DELIVER_ROUTE,
    }
)

# Where a delivery to each target kind goes.
_DELIVERY_OF: Mapping[TargetKind, InstructionKind] = {
    TargetKind.SELF: InstructionKind.DELIVER_SELF,
    TargetKind.INTERNAL: InstructionKind.DELIVER_INTERNAL,
    TargetKind.SESSION: InstructionKind.DELIVER_SESSION,
    TargetKind.PARENT: InstructionKind.DELIVER_PARENT,
    TargetKind.INVOKE: InstructionKind.DELIVER_CHILD,
    TargetKind.ROUTE: InstructionKind.DELIVER_ROUTE,
}

# Effects whose instruction depends on nothing but their kind.
_BY_KIND: Mapping[EffectKind, InstructionKind] = {
    EffectKind.CANCEL: InstructionKind.CANCEL_TIMERS,
    EffectKind.INVOKE: InstructionKind.START_INVOCATION,
    EffectKind.CANCEL_INVOKE: InstructionKind.CANCEL_INVOCATION,
    EffectKind.AUTOFORWARD: InstructionKind.AUTOFORWARD,
    EffectKind.DONE: InstructionKind.FINISH,
    EffectKind.BUDGET_EXHAUSTED: InstructionKind.HALT,
    EffectKind.LOG: InstructionKind.LOG,
    EffectKind.DATAMODEL_CHANGE: InstructionKind.OBSERVE,
    EffectKind.DATAMODEL_INIT: InstructionKind.OBSERVE,
    EffectKind.ERROR: InstructionKind.OBSERVE,
    EffectKind.TRACE_EVENT: InstructionKind.OBSERVE,
    EffectKind.TRACE_TRANSITIONS: InstructionKind.OBSERVE,
    EffectKind.TRACE_EXIT: InstructionKind.OBSERVE,
    EffectKind.TRACE_ENTRY: InstructionKind.OBSERVE,
    EffectKind.TRACE_STABLE: InstructionKind.OBSERVE,
    EffectKind.TRACE_RAISED: InstructionKind.OBSERVE,
    EffectKind.TRACE_GUARD: InstructionKind.OBSERVE,
    EffectKind.TRACE_HISTORY: InstructionKind.OBSERVE,
    EffectKind.TRACE_MICROSTEP: InstructionKind.OBSERVE,
}

# The effect kinds planned as ``observe`` (nothing to perform; the position holds them). A
# driver that watches no instructions may skip planning these: what plan_one would return
# for them is decided here, by the same table.
OBSERVED: frozenset[EffectKind] = frozenset(
    kind for kind, instruction in _BY_KIND.items() if instruction is InstructionKind.OBSERVE
)


@dataclass(frozen=True, slots=True)
class Instruction:
    """One thing a host must do, typed. ``effect`` is the effect it was planned from (None for
    a fired timer's delivery, planned from a stored row); ``target`` and ``event`` are set for
    deliveries and schedules; ``reason`` for ``unroutable``."""

    kind: InstructionKind
    effect: Effect | None = None
    target: Target | None = None
    event: Event | None = None
    reason: str = ""

    @property
    def data(self) -> dict[str, Any]:
        """The effect's data ({} for a fired timer's delivery)."""
        return self.effect.data if self.effect is not None else {}

    def summary(self) -> dict[str, Any]:
        """A JSON-compatible description (kind, target, event name), for traces and tests."""
        raw: dict[str, Any] = {"kind": self.kind.value}
        if self.target is not None:
            raw["target"] = self.target.to_dict()
        if self.event is not None:
            raw["event"] = self.event.name
        if self.reason:
            raw["reason"] = self.reason
        return raw


# Planning is on every driver's hot path (one instruction per effect): the frozen dataclass's
# generated __init__ costs about twice this constructor, which takes every field in order.
_new_instruction = positional_constructor(Instruction)


def plan(effects: Iterable[Effect]) -> list[Instruction]:
    """One instruction per effect, in the order given."""
    return [plan_one(effect) for effect in effects]


def plan_one(effect: Effect) -> Instruction:
    kind = effect.kind
    if type(kind) is not EffectKind:  # an effect built by hand with a plain string
        try:
            kind = EffectKind(kind)
        except ValueError:
            return Instruction(
                InstructionKind.UNROUTABLE, effect, reason=f"unknown effect kind {kind!r}"
            )
    if kind is EffectKind.SEND or kind is EffectKind.SEND_DELAYED:
        data = effect.data
        try:
            target = Target.from_dict(data["target"])
            event = Event.from_dict(data["event"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            return Instruction(InstructionKind.UNROUTABLE, effect, reason=_why(exc))
        if kind is EffectKind.SEND_DELAYED:
            schedule = (
                InstructionKind.SCHEDULE_ROUTE
                if target.kind is TargetKind.ROUTE
                else InstructionKind.SCHEDULE
            )
            return _new_instruction(schedule, effect, target, event, "")
        return _new_instruction(_DELIVERY_OF[target.kind], effect, target, event, "")
    return _new_instruction(_BY_KIND[kind], effect, None, None, "")


def delivery(target: object, event: object) -> Instruction:
    """The delivery a stored delayed send becomes when its timer fires.

    ``target`` and ``event`` are what the timer row holds (dicts) or typed values. A row that
    cannot be read back is ``unroutable`` with the reason (a host discards such a row as
    undecodable: no retry makes it readable).
    """
    try:
        typed_target = Target.from_dict(target)
        typed_event = event if isinstance(event, Event) else Event.from_dict(event)  # type: ignore[arg-type]
        if not isinstance(typed_event.name, str):
            raise TargetError("the event has no name")
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return Instruction(InstructionKind.UNROUTABLE, reason=_why(exc))
    return Instruction(_DELIVERY_OF[typed_target.kind], None, typed_target, typed_event)


def _why(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"
