"""The durable stepper: every input to an execution is one database transaction.

The loop, for each input::

    with transaction.atomic(durable=True):
        lock the execution row (select_for_update)
        live? terminal -> record "discarded"; needs_migration -> record "refused"
        load the position blob (re-checking the chart identity)
        advance (statecharts.drivers.durable: the input, then self-sends, to quiescence)
        perform every effect (outbox rows, effect handlers, logging)
        persist the new position and append one history row
    after commit: deliver the outbox rows this step wrote

A crash anywhere before the commit leaves the previous committed state; a crash after it
leaves outbox rows that ``deliver_pending()`` (``manage.py statechart deliver``) delivers.
Views, management commands and workers all call these functions.

The statements of a step (the lock, the execution's UPDATE, the history INSERT) are compiled
once per process (``statecharts.statements``): the same SQL and the same field conversions as
the ORM calls they replace, without the ORM's per-call compiling. So a step does not send
Django's ``pre_save``/``post_save`` for the execution or its history rows (``start``'s INSERT
of the execution still does); receive ``statecharts.signals`` instead.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import (
    IntegrityError,
    transaction,
)

from statecharts import signals, statements
from statecharts.conf import statecharts_settings
from statecharts.core import effects as fx
from statecharts.core.datamodel import check_tagged
from statecharts.core.effects import Effect
from statecharts.core.events import EXTERNAL, PLATFORM, Event
from statecharts.core.model import Chart as CompiledChart
from statecharts.core.position import ChartIdentity, Position, PositionError, decode, encode
from statecharts.core.state import State
from statecharts.drivers.durable import Advance, Input, advance, status_of
from statecharts.exceptions import NeedsMigration, StepRefused
from statecharts.handlers import HANDLED_KINDS, EffectContext, effect_handler
from statecharts.models import Chart, Execution, ExecutionStatus, HistoryEntry, OutboxMessage
from statecharts.models.executions import TERMINAL_STATUSES
from statecharts.models.history import Disposition
from statecharts.models.outbox import OutboxStatus
from statecharts.runtime import compiled_chart, interpreter_for

log = logging.getLogger("statecharts.stepper")

# Tests install a callable here to stop a real process at a phase of the step ("locked",
# "advanced", "before_commit", "committed") and kill it there. It is never set otherwise.
fault_hook: Callable[[str], None] | None = None


def _phase(name: str) -> None:
    if fault_hook is not None:
        fault_hook(name)


class BusinessKeyInUse(StepRefused):
    """Another execution of this chart already has this business key."""


@dataclass(frozen=True, slots=True)
class StepResult:
    execution: Execution
    entry: HistoryEntry
    effects: tuple[Effect, ...]

    @property
    def disposition(self) -> str:
        return self.entry.disposition

    @property
    def applied(self) -> bool:
        return self.entry.disposition == Disposition.APPLIED


# ---- entry points ----------------------------------------------------------------------------


def start(
    chart: Chart,
    *,
    data: dict[str, Any] | None = None,
    business_key: str | None = None,
    metadata: dict[str, Any] | None = None,
    session_id: str | None = None,
    now: datetime | None = None,
    caller_context: dict[str, Any] | None = None,
) -> Execution:
    """Create an execution of ``chart`` and run it to its first stable configuration."""
    compiled = compiled_chart(chart)
    if data is not None:
        check_tagged(data)  # ValueError names the bad path; nothing is written
    session_id = session_id or uuid.uuid4().hex
    outbox: list[int] = []
    try:
        with transaction.atomic(durable=True):
            if (
                business_key is not None
                and Execution.objects.filter(chart=chart, business_key=business_key).exists()
            ):
                raise IntegrityError("business key in use")
            now = now or statecharts_settings.now()
            execution = Execution(
                chart=chart,
                session_id=session_id,
                business_key=business_key,
                metadata=metadata or {},
                created=now,
            )
            start_input = Input.start(session_id, data)
            result = _apply(execution, compiled, None, start_input, now, outbox, caller_context)
            _phase("before_commit")
    except IntegrityError:
        # Checked first for a clear error; the unique constraint settles a concurrent race.
        if business_key is not None and (
            Execution.objects.filter(chart=chart, business_key=business_key).exists()
        ):
            raise BusinessKeyInUse(
                f"chart {chart} already has an execution with business key {business_key!r}"
            ) from None
        raise
    _phase("committed")
    deliver(outbox)
    return result.execution


def send(
    execution: Execution | int,
    name: str,
    data: Any = None,
    *,
    now: datetime | None = None,
    caller_context: dict[str, Any] | None = None,
    **fields: Any,
) -> StepResult:
    """Feed one external event named ``name`` (fields: sendid, origin, origintype, invokeid).

    ``caller_context`` is opaque JSON handed to effect handlers (timer rows keep it).
    """
    check_tagged(data)  # ValueError names the bad path; nothing is written
    event = Event(name, EXTERNAL, data, **fields)
    return feed(execution, Input.external(event), now=now, caller_context=caller_context)


def cancel(
    execution: Execution | int,
    *,
    now: datetime | None = None,
    caller_context: dict[str, Any] | None = None,
) -> StepResult:
    """Stop an execution from outside: its onexit handlers run, then it is ``cancelled``."""
    return feed(execution, Input.cancel(), now=now, caller_context=caller_context)


def feed(
    execution: Execution | int,
    step_input: Input,
    *,
    now: datetime | None = None,
    caller_context: dict[str, Any] | None = None,
) -> StepResult:
    """Apply one input in one transaction, then deliver the outbox rows it wrote."""
    pk = execution.pk if isinstance(execution, Execution) else execution
    outbox: list[int] = []
    result = _feed(pk, step_input, now, outbox, consume=None, caller_context=caller_context)
    assert result is not None
    deliver(outbox)
    return result


# ---- one step --------------------------------------------------------------------------------


def _feed(
    pk: int,
    step_input: Input,
    now: datetime | None,
    outbox: list[int],
    *,
    consume: _Claim | None,
    caller_context: dict[str, Any] | None = None,
) -> StepResult | None:
    with transaction.atomic(durable=True):
        execution = lock(pk)
        _phase("locked")
        now = now or statecharts_settings.now()
        if consume is not None and not consume.claim(now):
            return None  # someone else settled this message already
        result, refusal = step_locked(execution, step_input, now, outbox, caller_context)
        _phase("before_commit")
    _phase("committed")
    if refusal is not None:
        raise refusal
    return result


def step_locked(
    execution: Execution,
    step_input: Input,
    now: datetime,
    outbox: list[int],
    caller_context: dict[str, Any] | None = None,
) -> tuple[StepResult, StepRefused | None]:
    """Apply one input to an execution the caller locked (``lock``), in the caller's transaction.

    For hosts that must do more in the same transaction (the timers app fires a timer and
    marks it fired atomically). Returns the result and, when the input was refused, the error
    to raise after the commit (the refusal itself is recorded). Outbox ids written by the step
    are appended to ``outbox``: pass them to ``deliver`` after the commit.
    """
    if execution.status in TERMINAL_STATUSES:
        result = _record_unapplied(execution, step_input, now, Disposition.DISCARDED)
        signals.input_discarded.send(Execution, execution=execution, entry=result.entry)
        return result, None
    if execution.status == ExecutionStatus.NEEDS_MIGRATION:
        result = _record_unapplied(execution, step_input, now, Disposition.REFUSED)
        refusal = NeedsMigration(
            f"execution {execution.session_id} needs migration: {execution.failure_reason}"
        )
        return result, refusal
    try:
        compiled = compiled_chart(execution.chart)
        position = _load_position(execution, compiled)
    except PositionError as exc:
        execution.status = ExecutionStatus.NEEDS_MIGRATION
        execution.failure_reason = str(exc)
        result = _record_unapplied(execution, step_input, now, Disposition.REFUSED)
        refusal = NeedsMigration(f"execution {execution.session_id} refused: {exc}")
        refusal.__cause__ = exc
        return result, refusal
    result = _apply(execution, compiled, position, step_input, now, outbox, caller_context)
    return result, None


def lock(pk: int) -> Execution:
    """Lock an execution row for the rest of the transaction (its chart is loaded too)."""
    return statements.lock_execution(pk)


# Decoding the same blob twice gives the same state; reusing the very State object lets the
# thread's interpreter keep its datamodel engine alive instead of rebuilding it.
_positions = threading.local()


def _load_position(execution: Execution, compiled: CompiledChart) -> Position:
    blob = bytes(execution.position)
    cache: dict[int, tuple[bytes, Position]] | None = getattr(_positions, "cache", None)
    if cache is None:
        cache = _positions.cache = {}
    hit = cache.get(execution.pk)
    if hit is not None and hit[0] == blob and hit[1].chart.sha256 == compiled.source_hash:
        return hit[1]
    return decode(blob, chart=compiled, require_running=True)


def _remember_position(execution: Execution, blob: bytes, position: Position) -> None:
    cache: dict[int, tuple[bytes, Position]] | None = getattr(_positions, "cache", None)
    if cache is None:
        cache = _positions.cache = {}
    if len(cache) >= 4096:
        cache.clear()
    cache[execution.pk] = (blob, position)


def _apply(
    execution: Execution,
    compiled: CompiledChart,
    position: Position | None,
    step_input: Input,
    now: datetime,
    outbox: list[int],
    caller_context: dict[str, Any] | None = None,
) -> StepResult:
    interpreter = interpreter_for(compiled)
    answers: dict[str, bool] = {}

    def is_reachable(session_id: str) -> bool:
        if session_id not in answers:
            answers[session_id] = Execution.objects.filter(
                session_id=session_id, status=ExecutionStatus.ACTIVE
            ).exists()
        return answers[session_id]

    interpreter.is_reachable = is_reachable
    try:
        outcome = advance(
            interpreter,
            position.state if position is not None else None,
            step_input,
            send_budget=statecharts_settings.SEND_BUDGET,
        )
    finally:
        interpreter.is_reachable = _unreachable
    _phase("advanced")
    chart = execution.chart
    identity = ChartIdentity(compiled.source_hash, chart.name or None, chart.version or None)
    state = outcome.state
    blob = encode(state, identity)
    execution.position = blob
    execution.status = status_of(state)
    execution.configuration = _atomic_ids(compiled, state)
    execution.steps += 1
    execution.updated = now
    finished = execution.status in TERMINAL_STATUSES
    _record_ending(execution, outcome, now)
    if execution.pk is None:
        execution.save(force_insert=True)
    else:
        statements.update_row(execution, _RUNNING_STEP_FIELDS if state.running else _STEP_FIELDS)
    context = EffectContext(execution, state, now, execution.steps, caller_context)
    summary = _perform(context, outcome, outbox)
    entry = HistoryEntry(
        execution=execution,
        seq=execution.steps,
        input=step_input.to_dict(),
        disposition=Disposition.APPLIED,
        status_after=execution.status,
        configuration_after=execution.configuration,
        effects=summary,
        reachability=answers,
        position_sha256=hashlib.sha256(blob).hexdigest(),
        created=now,
    )
    statements.insert_row(entry)
    if state.running:
        _remember_position(execution, blob, Position(identity, state))
    effects = tuple(outcome.effects)
    signals.step_finished.send(Execution, execution=execution, entry=entry, effects=effects)
    if finished:
        signals.execution_finished.send(Execution, execution=execution)
    return StepResult(execution, entry, effects)


# What a step may change; the rest of the row (chart, session id, key, metadata) is fixed.
# A step that leaves the execution running changes only the first five (``_record_ending``
# writes the rest, and only when it finishes).
_RUNNING_STEP_FIELDS = ("position", "status", "configuration", "steps", "updated")
_STEP_FIELDS = (*_RUNNING_STEP_FIELDS, "ended", "outcome", "donedata", "failure_reason")
_UNAPPLIED_FIELDS = ("steps", "updated", "status", "failure_reason")


def _unreachable(_session_id: str) -> bool:
    return False


def _atomic_ids(compiled: CompiledChart, state: State) -> list[str]:
    states = compiled.states
    return [states[i].id for i in state.configuration if states[i].is_atomic]


def _record_ending(execution: Execution, outcome: Advance, now: datetime) -> None:
    state = outcome.state
    if state.running:
        return
    execution.ended = now
    execution.outcome = state.outcome or ""
    for effect in outcome.effects:
        if effect.kind == fx.DONE:
            execution.donedata = effect.data.get("donedata")
            if effect.data.get("final"):
                execution.configuration = [effect.data["final"]]
            if effect.data.get("error"):
                execution.failure_reason = f"datamodel error: {effect.data['error']}"
        elif effect.kind == fx.BUDGET_EXHAUSTED:
            execution.failure_reason = (
                f"the chart ran {effect.data['rounds']} rounds in one macrostep "
                f"(budget {effect.data['budget']}): it probably loops"
            )
    if state.outcome == "send_budget_exhausted":
        execution.failure_reason = (
            f"the chart sent more than {statecharts_settings.SEND_BUDGET} events to itself in "
            "one step: it probably loops"
        )


def _perform(context: EffectContext, outcome: Advance, outbox: list[int]) -> list[dict[str, Any]]:
    """Perform the effects left for the host; return the history's summary of every effect."""
    execution = context.execution
    outgoing = {id(effect) for effect in outcome.outgoing}
    summary: list[dict[str, Any]] = []
    chart_log: logging.Logger | None = None
    for effect in outcome.effects:
        if effect.kind.startswith("trace."):
            continue
        item = _summarize(effect)
        summary.append(item)
        if id(effect) not in outgoing:
            continue  # a self-send, consumed inside the step
        kind, data = effect.kind, effect.data
        if kind == fx.SEND:
            target = data["target"]
            if target["kind"] in ("session", "parent"):
                message = OutboxMessage.objects.create(
                    sender=execution,
                    target_session_id=target["session_id"],
                    event=data["event"],
                    send_id=data["send_id"],
                    created=context.now,
                )
                outbox.append(message.pk)
                item["outbox"] = message.pk
                continue
            kind = "send:invoke"
        elif kind == fx.LOG:
            if chart_log is None:
                chart_log = logging.getLogger(f"statecharts.chart.{_logger_name(execution)}")
            chart_log.info(
                "%s: %s", data["label"], data["value"], extra={"session_id": execution.session_id}
            )
        if kind in HANDLED_KINDS:
            handler = effect_handler(kind)
            if handler is not None:
                handler(context, effect)
            elif kind != fx.DONE:
                item["unhandled"] = True
                log.warning(
                    "execution %s: no handler for %r effects (STATECHARTS['EFFECT_HANDLERS'])",
                    execution.session_id,
                    kind,
                )
    return summary


def _summarize(effect: Effect) -> dict[str, Any]:
    if effect.kind == fx.DATAMODEL_CHANGE:
        return {"kind": effect.kind}  # the datamodel itself is in the position
    return effect.to_dict()


def _logger_name(execution: Execution) -> str:
    chart = execution.chart
    name = (chart.name or chart.content_hash[:12]).replace(".", "_")
    return name


def _record_unapplied(
    execution: Execution, step_input: Input, now: datetime, disposition: str
) -> StepResult:
    execution.steps += 1
    execution.updated = now
    statements.update_row(execution, _UNAPPLIED_FIELDS)
    entry = HistoryEntry(
        execution=execution,
        seq=execution.steps,
        input=step_input.to_dict(),
        disposition=disposition,
        status_after=execution.status,
        configuration_after=execution.configuration,
        created=now,
    )
    statements.insert_row(entry)
    return StepResult(execution, entry, ())


# ---- the outbox ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Claim:
    """Settle a pending outbox message inside the step that consumes it (exactly once).

    Called after the execution row is locked: the lock order is execution, then message,
    everywhere."""

    message_id: int
    status: str
    reason: str = ""

    def claim(self, now: datetime) -> bool:
        claimed = (
            OutboxMessage.objects.select_for_update()
            .filter(pk=self.message_id, status=OutboxStatus.PENDING)
            .update(status=self.status, reason=self.reason, delivered=now)
        )
        return claimed == 1


def deliver(message_ids: Iterable[int], *, limit: int | None = None) -> int:
    """Deliver outbox messages (and those their deliveries write), each in its own step.

    Returns how many were delivered. Stops after ``limit`` (default OUTBOX_BATCH) deliveries;
    the rest stay pending for ``deliver_pending``.
    """
    limit = statecharts_settings.OUTBOX_BATCH if limit is None else limit
    queue = deque(message_ids)
    delivered = 0
    while queue and delivered < limit:
        more: list[int] = []
        if _deliver_one(queue.popleft(), more):
            delivered += 1
        queue.extend(more)
    return delivered


def deliver_pending(*, limit: int | None = None) -> int:
    """Deliver messages left pending (e.g. by a process that died right after its commit)."""
    limit = statecharts_settings.OUTBOX_BATCH if limit is None else limit
    ids = list(OutboxMessage.objects.pending().order_by("id").values_list("pk", flat=True)[:limit])
    return deliver(ids, limit=limit)


def _deliver_one(message_id: int, more: list[int]) -> bool:
    row = (
        OutboxMessage.objects.filter(pk=message_id, status=OutboxStatus.PENDING)
        .values_list("target_session_id", "event", "sender_id", "send_id")
        .first()
    )
    if row is None:
        return False
    target_session_id, event, sender_id, send_id = row
    target = (
        Execution.objects.filter(session_id=target_session_id).values_list("pk", "status").first()
    )
    if target is not None and target[1] == ExecutionStatus.ACTIVE:
        claim = _Claim(message_id, OutboxStatus.DELIVERED)
        step_input = Input.external(Event.from_dict(event))
        return _feed(target[0], step_input, None, more, consume=claim) is not None
    # The target is gone: the sender is told (spec 6.2: error.communication), in the same
    # transaction that marks the message undeliverable.
    reason = (
        f"session {target_session_id!r} does not exist"
        if target is None
        else f"session {target_session_id!r} is {target[1]}"
    )
    claim = _Claim(message_id, OutboxStatus.UNDELIVERABLE, reason)
    error = Event("error.communication", PLATFORM, {"message": reason}, sendid=send_id or None)
    _feed(sender_id, Input.internal(error), None, more, consume=claim)
    return False
