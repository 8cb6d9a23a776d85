"""An operator's retry of a failed timer: back to pending, due now, its attempts counted anew.

A timer ends ``failed`` after ``TIMER_MAX_ATTEMPTS`` attempts (its delivery raised, or a fire
outlived its lease or its per-fire timeout). Once what was wrong is repaired, an operator may
try it again (the admin's "Retry the selected failed timers"). It keeps its identity, its
``(execution, ordinal)`` key and its ``last_error`` (what failed before); it is fired like any
due timer by the next sweeper or ``fire_timers``, under the same rules.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from django.db import transaction

from statecharts import stepper
from statecharts.models import Execution
from statecharts.statuses import TimerRule, rules
from timers.conf import timer_settings
from timers.models import Timer, TimerStatus


class RetryOutcome(StrEnum):
    RETRIED = "retried"
    NOT_FAILED = "not failed"  # (settled otherwise, pending again, or never failed)
    FINISHED = "execution finished"  # it would only be discarded
    MISSING = "missing"  # the timer or its execution is gone


def retry(timer_id: int, *, now: datetime | None = None, by: str = "") -> RetryOutcome:
    """Put one failed timer back to pending, due ``now``, with no attempt spent. In one
    transaction that locks its execution first (the lock order of every step)."""
    database = stepper.database()
    now = now or timer_settings.now()
    execution_id = (
        Timer.objects.using(database).filter(pk=timer_id).values_list("execution_id", flat=True)
    ).first()
    if execution_id is None:
        return RetryOutcome.MISSING
    with transaction.atomic(using=database, durable=True):
        try:
            execution = stepper.lock(execution_id)
        except Execution.DoesNotExist:
            return RetryOutcome.MISSING
        if rules(execution.status).timers is TimerRule.DISCARD:
            return RetryOutcome.FINISHED
        reason = f"retried by {by}" if by else "retried by an operator"
        retried = (
            Timer.objects.using(database)
            .filter(pk=timer_id, status=TimerStatus.FAILED)
            .update(
                status=TimerStatus.PENDING,
                due=now,
                expires_at=None,  # an operator's retry is delivered however late
                attempts=0,
                settled=None,
                claimed_until=None,
                fire_deadline=None,
                reason=reason[:300],
            )
        )
    return RetryOutcome.RETRIED if retried else RetryOutcome.NOT_FAILED
