"""One input to an existing execution: ``feed_step`` (its own transaction: lock, apply,
commit), ``step_locked`` (in the caller's transaction, under the lock the caller took: what
the execution's status does with the input) and ``perform_delivery`` (a stored delayed
send's delivery, for the timers app's firers).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction

from statecharts.conf import statecharts_settings
from statecharts.core.errors import StatechartError
from statecharts.core.plan import Instruction, InstructionKind
from statecharts.core.position import DamagedDatamodelError
from statecharts.drivers.durable import CANCEL, Input
from statecharts.exceptions import IdempotencyConflict, StepRefused
from statecharts.models import AppliedMessage, Execution, HistoryEntry
from statecharts.models.history import Disposition
from statecharts.policies import codecs
from statecharts.runtime import compiled_chart
from statecharts.statuses import InputRule, rules
from statecharts.stepper import observing, sql
from statecharts.stepper.applying import _apply, _load_position
from statecharts.stepper.cancelling import _cancel_locked
from statecharts.stepper.performing import NoPerformer, StepContext, guard_input, performer_for
from statecharts.stepper.recording import (
    _mark_unsteppable,
    _record_discarded,
    _record_unapplied,
    _refusal,
    _unsteppable,
    stored_form,
)
from statecharts.stepper.transaction import StepResult, lock, phase


def feed_step(
    pk: int,
    step_input: Input,
    now: datetime | None,
    outbox: list[int],
    *,
    caller_context: dict[str, Any] | None = None,
    applying: int | None = None,
    cause: dict[str, Any] | None = None,
    idempotency_key: str | None = None,
    strict: bool = False,
) -> StepResult | None:
    """Apply one input to the execution ``pk`` in one transaction.

    ``applying`` is the id of the outbox message this input comes from: the step then records
    that this execution applied it (``AppliedMessage``), and returns None, applying nothing,
    if it already had, or if the execution can no longer take it (not active: the sender is
    then told instead, by the delivery). Raises the refusal (``NeedsMigration``) after the
    commit when the input was refused.

    ``idempotency_key`` (a caller's retry after losing the response): if this execution
    already took an input with that key, nothing is applied and the earlier entry comes back
    (``repeated``); with different content, ``IdempotencyConflict`` is raised. The key is
    stored with the entry, unique per execution. ``strict``: see ``step_locked``.
    """
    database = sql.database()
    with transaction.atomic(using=database, durable=True):
        execution = lock(pk)
        phase("locked")
        now = now or statecharts_settings.now()
        if applying is not None:
            if rules(execution.status).inputs is not InputRule.APPLY:
                return None
            if (
                AppliedMessage.objects.using(database)
                .filter(execution_id=pk, message_id=applying)
                .exists()
            ):
                return None  # applied by an earlier delivery of the same message
        if idempotency_key is not None:
            earlier = _earlier_with_key(pk, idempotency_key, step_input)
            if earlier is not None:
                return StepResult(execution, earlier, (), (), repeated=True)
        result, refusal = step_locked(
            execution,
            step_input,
            now,
            outbox,
            caller_context,
            cause=cause,
            strict=strict,
        )
        if applying is not None and refusal is None:
            AppliedMessage.objects.using(database).create(
                execution=execution, message_id=applying, seq=result.entry.seq, applied=now
            )
        if idempotency_key is not None:
            HistoryEntry.objects.using(database).filter(pk=result.entry.pk).update(
                idempotency_key=idempotency_key
            )
            result.entry.idempotency_key = idempotency_key
        phase("before_commit")
    phase("committed")
    if refusal is not None:
        raise refusal
    return result


def _earlier_with_key(pk: int, key: str, step_input: Input) -> HistoryEntry | None:
    earlier = (
        HistoryEntry.objects.using(sql.database())
        .filter(execution_id=pk, idempotency_key=key)
        .first()
    )
    if earlier is None:
        return None
    given = stored_form(step_input.to_dict())
    if stored_form(codecs.decode_input(earlier.input, earlier.codec)) != given:
        raise IdempotencyConflict(
            f"idempotency key {key!r} was used for another input of this execution "
            f"(step {earlier.seq}); nothing was applied"
        )
    return earlier


def step_locked(
    execution: Execution,
    step_input: Input,
    now: datetime,
    outbox: list[int],
    caller_context: dict[str, Any] | None = None,
    *,
    cause: dict[str, Any] | None = None,
    strict: bool = False,
) -> tuple[StepResult, StepRefused | None]:
    """Apply one input to an execution the caller locked (``lock``), in the caller's transaction.

    For hosts that must do more in the same transaction (the timers app fires a timer and
    marks it fired atomically). What happens is the execution's status's rule
    (``statecharts.statuses``). Returns the result and, when the input was refused, the error
    to raise after the commit (the refusal itself is recorded). Outbox ids written by the step
    are appended to ``outbox``: pass them to ``deliver`` after the commit. ``cause`` says what
    the input came from (a timer, an outbox message: JSON), recorded with the history entry so
    the timeline links a step to the one that caused it; it is never part of a key.
    An input with a cause passes the input guards apps registered first
    (``register_input_guard``): a guard may have it recorded as discarded with a reason (the
    invocations app discards what a cancelled invocation sent after its cancellation, spec
    6.4.3). ``strict``: an event input no transition takes is refused (``EventUnhandled``):
    nothing of the step is kept, and the input is recorded as refused.
    """
    observing.step_started()  # (the lock wait, before it, is measured on its own)
    status_rules = rules(execution.status)
    if step_input.kind == CANCEL:
        return _cancel_locked(execution, step_input, now, outbox, caller_context, cause)
    if status_rules.inputs is InputRule.DISCARD:
        reason = f"execution {execution.status}"
        return _record_discarded(
            execution, step_input, now, reason, cause, caller_context
        ), None
    if status_rules.inputs is InputRule.REFUSE:
        reason = f"execution {execution.status}: {execution.failure_reason}"
        result = _record_unapplied(
            execution,
            step_input,
            now,
            Disposition.REFUSED,
            reason,
            cause=cause,
            caller_context=caller_context,
        )
        return result, _refusal(execution)
    try:
        compiled = compiled_chart(execution.chart)
        position = _load_position(execution, compiled)
    except StatechartError as exc:  # a damaged position, or a source that no longer compiles
        return _unsteppable(execution, step_input, now, exc, cause, caller_context)
    if cause is not None:
        reason = guard_input(execution, step_input, cause, position.state)
        if reason is not None:
            return _record_discarded(
                execution, step_input, now, reason, cause, caller_context
            ), None
    try:
        return _apply(
            execution, compiled, position, step_input, now, outbox, caller_context, cause, strict
        )
    except DamagedDatamodelError as exc:
        # The datamodel snapshot is only rebuilt when the interpreter runs, before any chart
        # code and before _apply writes anything: the same refusal as an undecodable blob.
        return _unsteppable(execution, step_input, now, exc, cause, caller_context)


def perform_delivery(
    execution: Execution,
    instruction: Instruction,
    now: datetime,
    outbox: list[int],
    caller_context: dict[str, Any] | None = None,
    *,
    cause: dict[str, Any] | None = None,
) -> StepResult | None:
    """Perform a delivery the planner made of a stored delayed send (``plan.delivery``), for an
    execution the caller locked, in the caller's transaction.

    A delivery to the execution itself is a step (``deliver_self``: an external event;
    ``deliver_internal``: an internal one), whose result is returned; refusals raise
    ``StepRefused`` (the step's refusal is recorded first). Any other delivery goes to its
    performer (an outbox row, an invoked child, a route), and None is returned. Raises
    ``NoPerformer`` when nothing here performs that kind: a fact about this deployment, not
    about the row.
    """
    kind = instruction.kind
    event = instruction.event
    if rules(execution.status).inputs is not InputRule.APPLY:
        raise _refusal(execution)
    if kind is InstructionKind.DELIVER_SELF or kind is InstructionKind.DELIVER_INTERNAL:
        assert event is not None
        step_input = Input.internal(event) if kind is InstructionKind.DELIVER_INTERNAL else (
            Input.external(event)
        )
        result, refusal = step_locked(
            execution, step_input, now, outbox, caller_context, cause=cause
        )
        if refusal is not None:
            raise refusal
        return result
    performer = performer_for(kind)
    if performer is None or not kind.is_delivery:
        raise NoPerformer(f"nothing performs {kind.value} here ({instruction.reason or 'no app'})")
    try:
        state = _load_position(execution, compiled_chart(execution.chart)).state
    except StatechartError as exc:
        # As a step would find it: the status says so (the caller holds the delivery back).
        _mark_unsteppable(execution, exc)
        execution.updated = now
        sql.update_row(execution, ("updated", "status", "failure_reason"))
        refusal = _refusal(execution)
        refusal.__cause__ = exc
        raise refusal from exc
    performer(StepContext(execution, state, now, execution.steps, caller_context, outbox),
              instruction)
    return None
