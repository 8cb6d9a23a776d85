"""One timer's fire, in one transaction: lock the execution (the lock order of every step:
execution, then its timers), check liveness, decode the row, resolve its delivery, take the
row (pending -> fired, only if still pending and due: a cancel that committed first wins),
deliver, and act on the delivery's answer. A delivery that raises rolls all of it back; the
attempt is then recorded in a transaction of its own (``_retry_or_fail``). A chunk
(``timers.chunks``) uses the same steps after its one lock statement.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction

from statecharts import stepper
from statecharts.core.plan import Instruction, InstructionKind, delivery
from statecharts.core.telemetry import TelemetryEvent
from statecharts.models import Execution
from statecharts.policies import codecs
from statecharts.statuses import TimerRule, rules
from timers import observing
from timers.conf import timer_settings
from timers.delivery import Delivery, DeliveryUnavailable, Fire, Snooze, policy_for, resolve
from timers.expiry import expire, is_expired
from timers.models import Timer, TimerStatus
from timers.retry_policy import GiveUp
from timers.settling import (
    FIRED,
    SKIPPED,
    _give_up,
    _record_attempt,
    _settle,
    _snooze,
    _snooze_undeployed,
)

log = logging.getLogger("timers")


class Undecodable(Exception):
    """A timer row whose event or target cannot be read back."""


class InvalidAnswer(Exception):
    """A delivery answered something other than None, ``Cancel``, ``Discard`` or
    ``Snooze(positive int)``: it is treated as a raise (rolled back, the attempt spent)."""


def fire(timer_id: int, *, now: datetime | None = None) -> str:
    """Fire one timer if it is still pending and due; returns the outcome. Not a claim's
    fire: whoever holds a claim on the row, this fire does not (no fence), and the first
    of the two to take the row under its execution's lock fires it."""
    timer = Timer.objects.using(stepper.database()).filter(pk=timer_id).first()
    if timer is None or timer.status != TimerStatus.PENDING:
        return SKIPPED
    timer.claim_token = None
    return fire_row(timer, now=now)


def fire_row(timer: Timer, *, now: datetime | None = None) -> str:
    """Fire a timer read earlier (e.g. claimed): everything is decided again under the lock.

    One transaction: lock the execution (the lock order of every step: execution, then its
    timers), check liveness, take the row (pending -> fired, only if still pending and due:
    a cancel that committed first wins), deliver. A delivery that raises rolls all of it
    back; the attempt is then recorded in a transaction of its own.
    """
    now = now or timer_settings.now()
    outbox: list[int] = []
    try:
        with transaction.atomic(using=stepper.database(), durable=True):
            outcome = _fire_locked(timer, now, outbox)
    except Exception as exc:  # the delivery's own failure, recorded on the row
        outcome = _retry_or_fail(timer, now, exc)
        log.warning("timer %s: delivery failed (%s): %s", timer.pk, outcome, exc)
        return outcome
    if outbox:
        stepper.deliver(outbox)
    return outcome


def _fire_locked(timer: Timer, now: datetime, outbox: list[int]) -> str:
    return _fire_with(_lock_execution(timer.execution_id), timer, now, outbox, {})


def _prepare(
    timer: Timer,
    execution: Execution | None,
    now: datetime,
    resolved: dict[str, Delivery | DeliveryUnavailable],
    outbox: list[int],
) -> str | tuple[Instruction, Delivery]:
    """Everything decided before the take, under the execution's lock: its liveness, its
    expiry (``timers.expiry``: an expired row is settled and its execution told here), the
    row's decoding, its delivery's resolution. The outcome when the timer was settled or
    snoozed here, else what to deliver and who delivers it."""
    outcome = _liveness(timer, execution, now)
    if outcome is not None:
        return outcome
    if is_expired(timer, now):
        assert execution is not None  # (_liveness settled a timer without one)
        return expire(timer, execution, now, outbox)
    try:
        instruction = _decode(timer)
    except Undecodable as exc:  # a fact about the row: no retry makes it readable
        return _settle(timer, TimerStatus.DISCARDED, now, f"undecodable: {exc}")
    except codecs.CodecUnavailable as exc:
        # The row's codec, or the key it was written under, is not deployed here (yet): a
        # fact about this deployment, like an unresolvable delivery. No attempt spent.
        return _snooze_undeployed(timer, now, str(exc))
    delivery = resolved.get(timer.delivery)
    if delivery is None:
        try:
            delivery = resolve(timer.delivery)
        except DeliveryUnavailable as exc:
            delivery = exc
        resolved[timer.delivery] = delivery
    if isinstance(delivery, DeliveryUnavailable):
        # A fact about this deployment (a rolling deploy, a setting not yet changed), not
        # about the row: try again later, no attempt spent.
        return _snooze_undeployed(timer, now, str(delivery))
    return instruction, delivery


def _liveness(timer: Timer, execution: Execution | None, now: datetime) -> str | None:
    """Settle a timer whose execution cannot take it now (the outcome), else None: what its
    status's rule says (``statecharts.statuses``): deliver, snooze (held: no attempt spent,
    the status may change back) or discard (finished: spec 6.2)."""
    if execution is None:
        return _settle(timer, TimerStatus.DISCARDED, now, "execution missing")
    rule = rules(execution.status).timers
    if rule is TimerRule.DISCARD:
        reason = f"execution {execution.status} before the timer was due"
        return _settle(timer, TimerStatus.DISCARDED, now, reason)
    if rule is TimerRule.SNOOZE:
        return _snooze(timer, now, reason=_held(execution))
    return None


def _held(execution: Execution) -> str:
    """The snooze reason of a timer held by its execution's status (statecharts.statuses)."""
    return f"execution {str(execution.status).replace('_', ' ')}: snoozed"


def _fire_with(
    execution: Execution | None,
    timer: Timer,
    now: datetime,
    outbox: list[int],
    resolved: dict[str, Delivery | DeliveryUnavailable],
) -> str:
    """Everything of a fire after the lock: liveness, decoding, delivery, take, deliver."""
    prepared = _prepare(timer, execution, now, resolved, outbox)
    if isinstance(prepared, str):
        return prepared
    assert execution is not None
    if _settle(timer, TimerStatus.FIRED, now, "") == SKIPPED:
        return SKIPPED  # cancelled, fired or rescheduled since it was read
    instruction, delivery = prepared
    return _deliver(execution, timer, instruction, delivery, now, outbox)


def _lock_execution(execution_id: int) -> Execution | None:
    try:
        with observing.LockTimer():
            return stepper.lock(execution_id)
    except Execution.DoesNotExist:
        return None


def _decode(timer: Timer) -> Instruction:
    """The delivery the planner makes of the stored target and event (the same rule as for an
    immediate send), the event's data decoded with the row's payload codec; a row that can
    never be read is ``Undecodable``, one whose codec or key is not deployed here raises
    ``codecs.CodecUnavailable``."""
    try:
        event = codecs.decode_event(timer.event, timer.codec)
    except codecs.CorruptPayload as exc:
        raise Undecodable(str(exc)) from exc
    instruction = delivery(timer.target, event)
    if instruction.kind is InstructionKind.UNROUTABLE:
        raise Undecodable(instruction.reason)
    return instruction


def _deliver(
    execution: Execution,
    timer: Timer,
    instruction: Instruction,
    delivery: Delivery,
    now: datetime,
    outbox: list[int],
) -> str:
    """Hand the taken timer to its delivery (by default a step of this execution, an outbox
    row, or an app's performer, through the stepper's public API), in the fire's
    transaction, and act on its answer (``timers.delivery``)."""
    try:
        answer = delivery.deliver(Fire(timer, execution, instruction, now, outbox))
    except stepper.StepRefused:
        # The step was refused and recorded (the position no longer matches its chart, its
        # data cannot be stepped, or the step went over a budget and was rolled back): the
        # timer is held with the status that holds it, never lost.
        return _snooze(timer, now, taken=True, reason=_held(execution))
    except stepper.NoPerformer as exc:
        # A fact about this deployment (e.g. the app that delivers to invoked children is not
        # installed here yet), not about the row: try again later, no attempt spent.
        return _snooze_undeployed(timer, now, str(exc), taken=True)
    if answer is None:
        observing.timer_event(
            TelemetryEvent.TIMER_FIRED,
            timer,
            now=now,
            session_id=execution.session_id,
            attempts=timer.attempts,
        )
        return FIRED
    if isinstance(answer, Snooze) and answer.valid:
        said = f": {answer.reason}" if answer.reason else ""
        seconds = min(answer.seconds, timer_settings.TIMER_SNOOZE_MAX_SECONDS)
        reason = f"delivery {timer.delivery!r} asked to snooze {answer.seconds} s{said}"
        return _snooze(timer, now, taken=True, reason=reason, seconds=seconds)
    if isinstance(answer, GiveUp) and answer.status in (
        TimerStatus.CANCELLED,
        TimerStatus.DISCARDED,
    ):
        return _give_up(timer, now, answer, timer.delivery)
    # Rolls the fire back; the attempt is spent as for any raise.
    raise InvalidAnswer(
        f"delivery {timer.delivery!r} answered {answer!r}: not None, Cancel, Discard or "
        "Snooze(seconds) with seconds a positive int"
    )


def _retry_or_fail(timer: Timer, now: datetime, exc: Exception) -> str:
    """Record a failed delivery: retry later with backoff, or give up after the last attempt."""
    with transaction.atomic(using=stepper.database(), durable=True):
        _lock_execution(timer.execution_id)  # the same lock order as every step
        return _record_attempt(timer, now, exc, policy_for(timer.delivery))
