"""A chunk of claimed timers fired in ONE transaction (``fire_rows``): their executions
locked first, in ascending id order, with one statement; each execution's first timer
decided up front and taken with one conditional UPDATE; any later one fired in turn. If
anything in the chunk raises, it rolls back and each timer is fired on its own
(``timers.fire_one.fire_row``).
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction

from statecharts import stepper
from statecharts.core.plan import Instruction
from timers import observing
from timers.conf import timer_settings
from timers.delivery import Delivery, DeliveryUnavailable
from timers.fire_one import _deliver, _fire_with, _prepare, fire_row
from timers.models import Timer, TimerStatus
from timers.settling import SKIPPED, _settle_ids

log = logging.getLogger("timers")


def fire_rows(timers: list[Timer], *, now: datetime | None = None) -> list[str]:
    """Fire timers read earlier (claimed) in ONE transaction; their outcomes, in order.

    Optimistic: the outcome of each timer is exactly the one ``fire_row`` would give it, fired
    one after the other in this order (``claim_rows``' order: due, id). If anything in the
    batch raises (a delivery, a deadlock, a lost connection), the whole transaction rolls back
    and every timer of the batch is fired again on its own by ``fire_row``, which records a
    failed delivery on its own timer only.

    On PostgreSQL the steps' own writes (each execution's UPDATE and its history INSERT) are
    held and sent as one statement for the chunk (``stepper.batched_writes``), before any
    other statement of the transaction and before its commit: the same rows, the same locks
    (taken by ``lock_many`` first, in id order), one round trip instead of one per fire.
    """
    if len(timers) <= 1:
        return [fire_row(timer, now=now) for timer in timers]
    fire_now = now or timer_settings.now()
    outbox: list[int] = []
    try:
        with (
            transaction.atomic(using=stepper.database(), durable=True),
            stepper.batched_writes(len(timers)),
        ):
            outcomes = _fire_batch_locked(timers, fire_now, outbox)
    except Exception as exc:  # anything: the timers are then fired one by one
        log.info("timers %s: batch rolled back (%s), firing one by one", len(timers), exc)
        return [fire_row(timer, now=now) for timer in timers]
    if outbox:
        stepper.deliver(outbox)
    return outcomes


def _fire_batch_locked(timers: list[Timer], now: datetime, outbox: list[int]) -> list[str]:
    """``_fire_locked`` for each timer in turn, with one lock statement and one take UPDATE.

    The executions of all the timers are locked first, with one ``SELECT ... WHERE id IN
    (...) ORDER BY id FOR UPDATE``. Lock order: every batch firer takes its locks in
    ascending id order, and takes them all before it waits for anything else (the timer rows
    it then updates belong to these executions, and a step or a cancel only touches them
    under their execution's lock; a claim holds timer rows for an instant, never waits for a
    lock and holds no execution lock). A step holds exactly one execution lock, and a lone
    fire (``fire_row``) too. So a waiter always holds only ids lower than the one it waits
    for, and there is no cycle: no deadlock. (Were there one, PostgreSQL would abort one
    transaction, and its batch would fall back to ``fire_row``.)

    Under those locks nothing but this transaction can change the executions or their
    timers, so deciding every timer up front is the same as deciding it in turn, except
    for a timer whose execution an earlier timer of this batch steps: the step may finish
    the execution or cancel the timer. Only each execution's first timer is therefore
    decided up front (liveness, then one conditional UPDATE takes the lot); any later timer
    of the same execution goes through ``_fire_with`` after the earlier steps, seeing their
    effects (``step_locked`` updates the locked instance in place).
    """
    token = _token(timers)
    with observing.LockTimer():
        executions = stepper.lock_many({timer.execution_id for timer in timers})
    first: dict[int, Timer] = {}
    for timer in timers:
        first.setdefault(timer.execution_id, timer)
    decided: dict[int, str] = {}  # first timers settled or snoozed without delivery
    ready: dict[int, tuple[Instruction, Delivery]] = {}
    resolved: dict[str, Delivery | DeliveryUnavailable] = {}
    for timer in first.values():
        prepared = _prepare(timer, executions.get(timer.execution_id), now, resolved, outbox)
        if isinstance(prepared, str):
            decided[timer.pk] = prepared
        else:
            ready[timer.pk] = prepared
    taken = _take(list(ready), now, token)
    outcomes: list[str] = []
    for timer in timers:
        if first[timer.execution_id] is not timer:
            execution = executions.get(timer.execution_id)
            outcomes.append(_fire_with(execution, timer, now, outbox, resolved))
        elif timer.pk in decided:
            outcomes.append(decided[timer.pk])
        elif timer.pk not in taken:
            outcomes.append(SKIPPED)  # cancelled, fired or rescheduled since it was read
        else:
            instruction, delivery = ready[timer.pk]
            execution = executions[timer.execution_id]
            outcomes.append(_deliver(execution, timer, instruction, delivery, now, outbox))
    return outcomes


def _take(pks: list[int], now: datetime, token: int | None) -> set[int]:
    """Mark these timers fired, those still pending and due (and still claimed by ``token``:
    the fence); returns the ids it marked."""
    return _settle_ids(pks, TimerStatus.FIRED, now, "", token)


def _token(timers: list[Timer]) -> int | None:
    """The fence token of a chunk's timers: one claim's (or none: read without a claim)."""
    tokens = {timer.claim_token for timer in timers}
    if len(tokens) != 1:
        raise ValueError(f"a chunk's timers come from one claim, not {len(tokens)}")
    return tokens.pop()
