"""The computation of one durable step, with no database: input in, new state and effects out.

The Django stepper (``statecharts.stepper``) wraps this in a transaction; replay calls it on a
fresh interpreter and must get byte-identical positions. Everything a step depends on is an
argument: the state, the input, and the host (``statecharts.core.host.Host``: the registered
types and the answers to "is session X reachable?"), which the stepper records so replay can
hand back the same.

Every effect is planned (``statecharts.core.plan``). Deliveries to the session itself
(``deliver_self``) are performed here, inside the step, up to ``send_budget`` events: they
never leave the process, so they need no outbox. Every other instruction is returned, in the
order the core emitted its effect, for the host to perform.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any

from statecharts.core.effects import Effect
from statecharts.core.events import Event
from statecharts.core.host import Host
from statecharts.core.interpreter import Interpreter
from statecharts.core.plan import Instruction, InstructionKind, plan_one
from statecharts.core.state import State

START = "start"
EVENT = "event"  # an external event (from a caller, another execution, a timer, a child)
INTERNAL = "internal"  # an event for the internal queue (delayed #_internal, platform errors)
CANCEL = "cancel"
# The host replaces its entries of _ioprocessors (an operator rotated a capability address,
# an import minted a new one): no chart code runs; recorded like any input, so replay sees the
# same _ioprocessors at every step.
READDRESS = "readdress"
INPUT_KINDS = frozenset({START, EVENT, INTERNAL, CANCEL, READDRESS})

DEFAULT_SEND_BUDGET = 1_000

# Outcomes that end an execution as failed rather than completed or cancelled.
FAILED_OUTCOMES = frozenset({"datamodel_error"})
# A cancel from outside, and a child cancelled because its parent left the invoking state
# (it then sends its parent nothing more, not even done.invoke: spec 6.4).
CANCELLED_BY_PARENT = "cancelled_by_parent"
CANCELLED_OUTCOMES = frozenset({"cancelled", CANCELLED_BY_PARENT})


@dataclass(frozen=True, slots=True)
class Input:
    """One input fed to an execution: what the history records and replay re-feeds."""

    kind: str
    event: Event | None = None
    data: dict[str, Any] | None = None  # start: overrides of top-level <data>
    session_id: str | None = None  # start: the _sessionid the chart sees
    # start, readdress: host entries of _ioprocessors (type -> location)
    io_processors: dict[str, str] | None = None
    parent_session_id: str | None = None  # start of an invoked child: its parent
    invokeid: str | None = None  # start of an invoked child: the id its parent knows it by
    # cancel: why. "cancelled_by_parent" becomes the outcome; anything else is the caller's
    # words (recorded with the input), and the outcome is "cancelled".
    reason: str | None = None
    # Who sent (or started, or cancelled) it, when a door checked
    # (statecharts.policies.authorization):
    # the user's id and name, and the rule that allowed it. Recorded, never re-checked:
    # replay trusts the history.
    sender: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.kind not in INPUT_KINDS:
            raise ValueError(f"unknown input kind {self.kind!r}")
        if self.kind in (EVENT, INTERNAL) and self.event is None:
            raise ValueError(f"a {self.kind!r} input needs an event")
        if self.kind == START and not self.session_id:
            raise ValueError("a start input needs a session id")
        if self.kind == READDRESS and not isinstance(self.io_processors, dict):
            raise ValueError("a readdress input needs the new io_processors")

    @classmethod
    def start(
        cls,
        session_id: str,
        data: dict[str, Any] | None = None,
        io_processors: dict[str, str] | None = None,
        *,
        parent_session_id: str | None = None,
        invokeid: str | None = None,
        sender: dict[str, Any] | None = None,
    ) -> Input:
        return cls(
            START,
            data=data,
            session_id=session_id,
            io_processors=io_processors or None,
            parent_session_id=parent_session_id,
            invokeid=invokeid,
            sender=sender,
        )

    @classmethod
    def external(cls, event: Event) -> Input:
        return cls(EVENT, event=event)

    @classmethod
    def internal(cls, event: Event) -> Input:
        return cls(INTERNAL, event=event)

    @classmethod
    def cancel(cls, reason: str | None = None, sender: dict[str, Any] | None = None) -> Input:
        return cls(CANCEL, reason=reason, sender=sender)

    @classmethod
    def readdress(
        cls,
        io_processors: dict[str, str],
        reason: str | None = None,
        sender: dict[str, Any] | None = None,
    ) -> Input:
        """The host's entries of ``_ioprocessors`` from now on (all of them: an entry left
        out is removed), with who did it and why."""
        return cls(READDRESS, io_processors=dict(io_processors), reason=reason, sender=sender)

    def to_dict(self) -> dict[str, Any]:
        raw: dict[str, Any] = {"kind": self.kind}
        if self.event is not None:
            raw["event"] = self.event.to_dict()
        if self.kind == START:
            raw["session_id"] = self.session_id
            raw["data"] = self.data
            if self.io_processors:
                raw["io_processors"] = dict(self.io_processors)
            if self.parent_session_id is not None:
                raw["parent_session_id"] = self.parent_session_id
                raw["invokeid"] = self.invokeid
        if self.kind == READDRESS:
            raw["io_processors"] = dict(self.io_processors or {})
        if self.reason is not None:
            raw["reason"] = self.reason
        if self.sender is not None:
            raw["sender"] = dict(self.sender)
        return raw

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Input:
        event = Event.from_dict(raw["event"]) if raw.get("event") is not None else None
        return cls(
            raw["kind"],
            event=event,
            data=raw.get("data"),
            session_id=raw.get("session_id"),
            io_processors=raw.get("io_processors"),
            parent_session_id=raw.get("parent_session_id"),
            invokeid=raw.get("invokeid"),
            reason=raw.get("reason"),
            sender=raw["sender"] if isinstance(raw.get("sender"), dict) else None,
        )


@dataclass(slots=True)
class Advance:
    """What one step produced."""

    state: State
    effects: list[Effect] = field(default_factory=list)  # every effect, in order
    # One instruction per effect (the planner's), in the same order.
    instructions: list[Instruction] = field(default_factory=list)
    # The instructions left for the host: all but the self-deliveries drained here.
    outgoing: list[Instruction] = field(default_factory=list)
    self_events: int = 0  # self-sends drained inside the step
    # Set when the step went over a budget ({"budget", "limit", "used"}): the step is rolled
    # back (the core returned the state it was given), and a host keeps nothing of it.
    halted: dict[str, Any] | None = None
    # An event input that no transition selected (``Step.unhandled``: the input's own event,
    # not the self-sends drained after it).
    unhandled: bool = False


def advance(
    interpreter: Interpreter,
    state: State | None,
    step_input: Input,
    *,
    send_budget: int = DEFAULT_SEND_BUDGET,
    host: Host | None = None,
) -> Advance:
    """Apply ``step_input`` to ``state`` and drain self-sends until quiescent (bounded).

    ``state`` is None only for a start input. ``host`` is what the host tells the core for
    this step (None: the interpreter's own). Raises NotRunningError when the state has
    stopped (the stepper checks the execution's status first, so it never sees that).
    """
    if host is not None and host.clock is not None and host.started is None:
        # One time budget for the whole step: the input and every self-send drained below.
        host = replace(host, started=host.clock())
    if step_input.kind == START:
        assert step_input.session_id is not None
        step = interpreter.initialize(
            step_input.session_id,
            data=step_input.data,
            parent_session_id=step_input.parent_session_id,
            invokeid=step_input.invokeid,
            io_processors=step_input.io_processors,
            host=host,
        )
    else:
        if state is None:
            raise ValueError(f"a {step_input.kind!r} input needs a state")
        if step_input.kind == EVENT:
            assert step_input.event is not None
            step = interpreter.handle_event(state, step_input.event, host=host)
        elif step_input.kind == INTERNAL:
            assert step_input.event is not None
            step = interpreter.deliver_internal(state, step_input.event, host=host)
        elif step_input.kind == READDRESS:
            # Data only: the next step's _ioprocessors has the new entries (a new State object,
            # so the interpreter rebuilds its datamodel's system variables from it).
            return Advance(state.evolve(io_processors=dict(step_input.io_processors or {}) or None))
        else:
            # The outcome says how it was cancelled (from outside, or by its invoking parent);
            # any other reason is the caller's words, kept with the input in the history.
            reason = step_input.reason
            outcome = reason if reason in CANCELLED_OUTCOMES else "cancelled"
            step = interpreter.cancel(state, reason=outcome, host=host)
    result = Advance(step.state)
    if step.unhandled and step_input.kind == EVENT:
        result.unhandled = True
    pending: deque[Event] = deque()
    _collect(result, step.effects, pending)
    while pending and result.state.running and result.halted is None:
        if result.self_events >= send_budget:
            # A chart that keeps sending to itself would hold the row lock forever.
            result.halted = {"budget": "sends", "limit": send_budget, "used": send_budget + 1}
            break
        result.self_events += 1
        # One output budget for the whole step: this call counts on from the earlier ones.
        host = replace(host or interpreter.host, output_bytes_spent=step.output_bytes)
        step = interpreter.handle_event(result.state, pending.popleft(), host=host)
        result.state = step.state
        _collect(result, step.effects, pending)
    return result


def _collect(result: Advance, effects: tuple[Effect, ...], pending: deque[Event]) -> None:
    for effect in effects:
        result.effects.append(effect)
        instruction = plan_one(effect)
        result.instructions.append(instruction)
        if instruction.kind is InstructionKind.DELIVER_SELF:
            assert instruction.event is not None
            pending.append(instruction.event)  # performed here: this session's next event
        else:
            if instruction.kind is InstructionKind.HALT:
                result.halted = dict(instruction.data)
            result.outgoing.append(instruction)


def status_of(state: State) -> str:
    """The execution status a state maps to (a halted step is never persisted: the stepper
    keeps the position it had and marks the execution halted itself)."""
    if state.running:
        return "active"
    if state.outcome in CANCELLED_OUTCOMES:
        return "cancelled"
    if state.outcome in FAILED_OUTCOMES:
        return "failed"
    return "completed"
