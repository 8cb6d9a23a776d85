"""Performing instructions in a step: the performers' registry, and the stepper's own performers.

The planner (``statecharts.core.plan``) decides *which* instruction each effect is; a
performer decides *how* the durable stepper does it. Performers run inside the step's
transaction, after the execution row was locked, so whatever they write commits or rolls
back with the step. The lock order is always: the execution, then rows it owns.

Who performs what:

=====================  ============================================================
``deliver_session``    the stepper: an outbox row (delivered after the commit)
``deliver_parent``     the stepper: an outbox row
``log``                the stepper: the ``statecharts.chart.<name>`` logger
``observe``            nothing is owed
``finish``, ``halt``   the stepper records them on the execution itself; an app may
                       register a performer to act on them too
``schedule``,          the ``timers`` app (``TimersConfig.ready``)
``cancel_timers``
``start_invocation``,  the ``invocations`` app, when it registers them
``cancel_invocation``,
``autoforward``,
``deliver_child``
``deliver_route``,     the ``routes`` app: an outbox message delivered after the
``schedule_route``     commit; a delayed one through the route timer queue
=====================  ============================================================

An app registers its performers in ``AppConfig.ready()`` with :func:`register_performer`,
and the invoke / send types it can serve with :func:`register_invoke_types` /
:func:`register_send_type`: together they are the registered-types snapshot
(:func:`registered_types`) the core checks each ``<send>``/``<invoke>`` against, so an app
that is not installed contributes nothing and its types are ``error.execution`` in the chart.
``STATECHARTS["PERFORMERS"]`` overrides a registered performer by instruction kind (a dotted
path; ``None`` disables one). An instruction with no performer is recorded in the history as
``"unhandled": true`` and logged as a warning: nothing is silently dropped.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.core.signals import setting_changed
from django.utils.module_loading import import_string

from statecharts.conf import statecharts_settings
from statecharts.core.effects import Effect, EffectKind
from statecharts.core.host import RegisteredTypes, RouteAnswer
from statecharts.core.plan import Instruction, InstructionKind
from statecharts.core.state import State
from statecharts.drivers.durable import CANCELLED_BY_PARENT
from statecharts.models import Execution, OutboxMessage
from statecharts.policies import codecs
from statecharts.stepper import observing
from statecharts.stepper.sql import database

log = logging.getLogger("statecharts.stepper")


@dataclass(frozen=True, slots=True)
class StepContext:
    """What a performer is given, besides the instruction."""

    execution: Execution  # locked for the rest of the transaction
    state: State  # the state after the step
    now: datetime  # the step's injected clock
    seq: int  # the history sequence number of the step
    caller_context: dict[str, Any] | None = None  # opaque data the caller passed to the step
    # Outbox ids this step wrote: delivered after the commit (append to it).
    outbox: list[int] = field(default_factory=list)


# A performer may return a small JSON object of what it did: it is recorded with the effect in
# the step's history entry (the timers app says which timers a <cancel> cancelled).
Performer = Callable[[StepContext, Instruction], "dict[str, Any] | None"]
RouteChecker = Callable[[Execution, str, str, "str | None"], RouteAnswer]

# Kinds for which nothing is owed when no performer is registered: the stepper has already
# done what they mean (recorded the ending; the datamodel is in the position).
NOTHING_OWED = frozenset({InstructionKind.OBSERVE, InstructionKind.FINISH, InstructionKind.HALT})

# (the locked execution, the input, its cause, the state it would be applied to) -> a reason
# to discard it, or None
InputGuard = Callable[[Execution, Any, dict[str, Any], State], "str | None"]
_guards: list[InputGuard] = []


def register_input_guard(guard: InputGuard) -> None:
    """Let an app look at each input that has a cause (an outbox message, a timer) before it
    is applied; a reason returned has it recorded as discarded instead. The invocations app
    uses it for spec 6.4.3 (nothing a cancelled invocation sends after its cancellation is
    processed)."""
    if guard not in _guards:
        _guards.append(guard)


def guard_input(
    execution: Execution, step_input: Any, cause: dict[str, Any], state: State
) -> str | None:
    for guard in _guards:
        reason = guard(execution, step_input, cause, state)
        if reason is not None:
            return reason
    return None


# (the chart, the start's metadata) -> None, or raises an InvalidInput naming what is wrong
StartCheck = Callable[[Any, "dict[str, Any] | None"], None]
_start_checks: list[StartCheck] = []


def register_start_check(check: StartCheck) -> None:
    """Let an app refuse a start before anything is written: ``check(chart, metadata)``
    raises ``statecharts.policies.validation.InvalidInput`` (a ``ValueError``) with the path and the
    reason. The routes app refuses route overrides naming an unregistered route or an option
    the route does not let a scope override."""
    if check not in _start_checks:
        _start_checks.append(check)


def check_start(chart: Any, metadata: dict[str, Any] | None) -> None:
    for check in _start_checks:
        check(chart, metadata)


class NoPerformer(LookupError):
    """No performer is registered for an instruction kind (a fact about this deployment, not
    about the row that asked for it: a host retries later rather than giving up)."""


class _Registry:
    def __init__(self) -> None:
        self.performers: dict[InstructionKind, str | Performer] = {}
        self.invoke_types: dict[str, frozenset[str]] = {}  # owner -> types
        self.send_types: dict[str, dict[str, str]] = {}  # owner -> {type: route}
        # (execution, route, send type, target) -> RouteAnswer: asked while a <send> executes
        self.route_checker: RouteChecker | None = None
        self.lock = threading.Lock()
        self.resolved: dict[InstructionKind, Performer | None] = {}
        self.types: RegisteredTypes | None = None
        self.types_dict: dict[str, Any] | None = None

    def changed(self) -> None:
        with self.lock:
            self.resolved = {}
            self.types = None
            self.types_dict = None


_registry = _Registry()


def register_performer(kind: InstructionKind | str, performer: str | Performer) -> None:
    """Make ``performer`` (a callable or its dotted path) perform ``kind`` instructions."""
    _registry.performers[InstructionKind(kind)] = performer
    _registry.changed()


def register_invoke_types(types: Iterable[str], *, owner: str = "") -> None:
    """Declare ``<invoke type>`` values this deployment can start (its app performs
    ``start_invocation`` for them). Registering again under the same ``owner`` replaces that
    owner's types (an app whose handlers come from settings re-registers when they change)."""
    if owner:
        _registry.invoke_types[owner] = frozenset(types)
    else:
        _registry.invoke_types[owner] = _registry.invoke_types.get(owner, frozenset()) | set(types)
    _registry.changed()


def register_send_type(send_type: str, route: str) -> None:
    """Declare a ``<send type>`` value served by the route named ``route``."""
    _registry.send_types.setdefault("", {})[send_type] = route
    _registry.changed()


def register_send_types(types: Mapping[str, str], *, owner: str) -> None:
    """Declare the ``<send type>`` values ``owner`` serves (type -> route name), replacing what
    it declared before (the routes app re-registers when ``STATECHARTS["ROUTES"]`` changes)."""
    _registry.send_types[owner] = dict(types)
    _registry.changed()


def register_route_checker(checker: RouteChecker | None) -> None:
    """Who answers "may this route take a send to this target?" while a ``<send>`` executes
    (``statecharts.core.host``): ``checker(execution, route, send_type, target)`` returns a
    ``RouteAnswer``. The stepper records each answer with the step (replay hands it back).
    Without one, every target of a registered route is accepted."""
    _registry.route_checker = checker


def route_checker() -> RouteChecker | None:
    return _registry.route_checker


def _reset_on_settings(setting: str, **kwargs: Any) -> None:
    if setting == "STATECHARTS":
        _registry.changed()


setting_changed.connect(_reset_on_settings, dispatch_uid="statecharts.stepper.performers")


def performer_for(kind: InstructionKind) -> Performer | None:
    """The performer for ``kind``: ``PERFORMERS`` > registered."""
    resolved = _registry.resolved
    if kind in resolved:
        return resolved[kind]
    performer = _resolve(kind)
    with _registry.lock:
        _registry.resolved[kind] = performer
    return performer


def _resolve(kind: InstructionKind) -> Performer | None:
    overrides: dict[str, Any] = statecharts_settings.PERFORMERS or {}
    if kind.value in overrides:
        return _load(overrides[kind.value])
    return _load(_registry.performers.get(kind))


def _load(configured: Any) -> Any:
    if configured is None:
        return None
    return import_string(configured) if isinstance(configured, str) else configured


def registered_types() -> RegisteredTypes:
    """The registered-types snapshot for a step: what the installed apps can perform."""
    types = _registry.types
    if types is None:
        invoke = frozenset().union(*_registry.invoke_types.values())
        send: dict[str, str] = {}
        for owned in _registry.send_types.values():
            send.update(owned)
        types = RegisteredTypes.of(
            send=send,
            invoke=invoke if performer_for(InstructionKind.START_INVOCATION) is not None else (),
            timers=performer_for(InstructionKind.SCHEDULE) is not None,
            # delayed sends on routes need a route timer queue (the routes app's performer)
            route_timers=bool(send)
            and performer_for(InstructionKind.SCHEDULE_ROUTE) is not None,
        )
        with _registry.lock:
            _registry.types = types
            _registry.types_dict = types.to_dict()
    return types


def registered_types_record() -> dict[str, Any]:
    """``registered_types().to_dict()``, computed once (the history records it every step)."""
    registered_types()
    record = _registry.types_dict
    assert record is not None
    return record


# ---- performing a step's instructions ----------------------------------------------------------


def writes_no_rows(instructions: Iterable[Instruction]) -> bool:
    """True when :func:`perform` writes no database row for these instructions: each is a
    trace effect, a self-send, or one whose performer is the built-in one that writes
    nothing (an observation; a ``<log>``, which goes to Python's logging). The stepper then
    writes the execution's row and its history row together, after performing."""
    for instruction in instructions:
        effect = instruction.effect
        if effect is not None and effect.kind.is_trace:
            continue
        kind = instruction.kind
        if kind is InstructionKind.DELIVER_SELF:
            continue
        if kind in _WRITES_NO_ROWS and performer_for(kind) is _WRITES_NO_ROWS[kind]:
            continue
        return False
    return True


def perform(context: StepContext, instructions: Iterable[Instruction]) -> list[dict[str, Any]]:
    """Perform the instructions left for the host, in order; return the history's summary of
    every effect (trace effects only for an execution with tracing on)."""
    summary: list[dict[str, Any]] = []
    traced = context.execution.tracing  # (its trace effects are kept: the timeline shows them)
    for instruction in instructions:
        effect = instruction.effect
        assert effect is not None
        if effect.kind.is_trace:
            if traced:
                summary.append(_summarize(effect))
            continue
        item = _summarize(effect)
        summary.append(item)
        kind = instruction.kind
        if kind is InstructionKind.DELIVER_SELF:
            continue  # a self-send, consumed inside the step
        performer = performer_for(kind)
        if performer is not None:
            written = len(context.outbox)
            done = performer(context, instruction)
            if isinstance(done, dict):
                item.update(done)
            if len(context.outbox) > written:
                item["outbox"] = context.outbox[-1]
            if observing.listening():
                observing.effect(context.execution, instruction)
        elif kind is InstructionKind.UNROUTABLE:
            item["unroutable"] = instruction.reason
            if observing.listening():
                observing.effect(
                    context.execution, instruction, unroutable=instruction.reason or "unroutable"
                )
            log.warning(
                "execution %s: an effect could not be planned: %s",
                context.execution.session_id,
                instruction.reason,
            )
        elif kind not in NOTHING_OWED:
            item["unhandled"] = True
            log.warning(
                "execution %s: no performer for %r instructions (STATECHARTS['PERFORMERS'])",
                context.execution.session_id,
                kind.value,
            )
            if observing.listening():
                reason = f"nothing performs {kind.value} here"
                observing.effect(context.execution, instruction, unroutable=reason)
        elif observing.listening():
            observing.effect(context.execution, instruction)  # finish, halt: the row says it
    return summary


def _summarize(effect: Effect) -> dict[str, Any]:
    if effect.kind == EffectKind.DATAMODEL_CHANGE or effect.kind == EffectKind.DATAMODEL_INIT:
        return {"kind": effect.kind.value}  # the datamodel is in the position
    # What a send carried, an <invoke>'s params, a done's donedata: event data like an
    # input's, written by the payload codec (the history entry records which).
    return codecs.encode_effect(effect.to_dict())


# ---- the stepper's own performers ---------------------------------------------------------------


def write_outbox(context: StepContext, instruction: Instruction) -> None:
    """``deliver_session`` / ``deliver_parent``: an outbox row of this execution, delivered
    to the target after the commit, exactly once (``statecharts.stepper.delivery``)."""
    assert instruction.target is not None and instruction.event is not None
    execution = context.execution
    to_parent = instruction.kind is InstructionKind.DELIVER_PARENT
    if to_parent and context.state.outcome == CANCELLED_BY_PARENT:
        return  # sent while its parent cancels it: the parent must not get it (spec 6.4.3)
    event, codec = codecs.encode_event(instruction.event.to_dict())
    message = OutboxMessage.objects.using(database()).create(
        sender=execution,
        target_session_id=instruction.target.session_id,
        event=event,
        codec=codec,
        send_id=instruction.data.get("send_id") or instruction.event.sendid or "",
        via_invocation=execution.invoke_ordinal if to_parent else None,
        caller_context=context.caller_context,
        created=context.now,
    )
    context.outbox.append(message.pk)


def write_log(context: StepContext, instruction: Instruction) -> None:
    """``log``: the chart's ``<log>``, on the logger ``statecharts.chart.<chart name>``."""
    data = instruction.data
    chart = context.execution.chart
    name = (chart.name or chart.content_hash[:12]).replace(".", "_")
    logging.getLogger(f"statecharts.chart.{name}").info(
        "%s: %s", data["label"], data["value"], extra={"session_id": context.execution.session_id}
    )


def _nothing(context: StepContext, instruction: Instruction) -> None:
    return None


register_performer(InstructionKind.DELIVER_SESSION, write_outbox)
register_performer(InstructionKind.DELIVER_PARENT, write_outbox)
register_performer(InstructionKind.LOG, write_log)
register_performer(InstructionKind.OBSERVE, _nothing)

# The built-in performers that write no row (``writes_no_rows``); one configured in their
# place (``PERFORMERS``, ``register_performer``) may write.
_WRITES_NO_ROWS: dict[InstructionKind, Performer] = {
    InstructionKind.OBSERVE: _nothing,
    InstructionKind.LOG: write_log,
}
