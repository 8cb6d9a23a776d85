"""The timers app's rows for retention and erasure (``statecharts.retention``).

Settled timer rows (fired, cancelled, discarded, failed) are pruned ``TIMER_RETENTION_DAYS``
after they settled, and only those of executions that can no longer step: the
``(execution, ordinal)`` key must stay unique forever for an execution that may still step
(a replayed step must not schedule twice), so its rows are kept however old they are. A
finished (or deleted) execution schedules nothing again, so its settled rows can go. A
pending timer is never pruned, whoever it belongs to.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from django.db.models import Exists, OuterRef, Q

from statecharts import retention, stepper
from statecharts import retention as _retention  # (prune's argument is named retention)
from statecharts.models import Execution
from statecharts.statuses import TERMINAL_STATUSES
from timers.conf import timer_settings
from timers.models import TERMINAL_TIMER_STATUSES, RouteTimer, Timer, TimerStatus

STAGE = "timers"


def _of_live_execution() -> Exists:
    return Exists(
        Execution.objects.filter(pk=OuterRef("execution_id")).exclude(
            status__in=TERMINAL_STATUSES
        )
    )


def _prunable(cutoff: datetime) -> Q:
    return Q(status__in=TERMINAL_TIMER_STATUSES, settled__lt=cutoff)


def prune_batch(cutoff: datetime, limit: int, after: int) -> retention.PruneBatch:
    """Delete up to ``limit`` settled timers (id above ``after``) settled before ``cutoff``,
    of executions that can no longer step, their executions locked first (the lock order of
    every step: execution, then its timers). Runs in the caller's transaction."""
    database = stepper.database()
    prunable = Timer.objects.using(database).filter(_prunable(cutoff)).filter(~_of_live_execution())
    candidates = list(
        prunable.filter(pk__gt=after).order_by("pk").values_list("pk", "execution_id")[:limit]
    )
    if not candidates:
        return retention.PruneBatch(0, None)
    stepper.lock_many({execution for _, execution in candidates})
    deleted = prunable.filter(pk__in=[pk for pk, _ in candidates]).delete()[0]
    return retention.PruneBatch(deleted, candidates[-1][0])


def count(cutoff: datetime) -> int:
    return Timer.objects.filter(_prunable(cutoff)).filter(~_of_live_execution()).count()


def prune(*, now: datetime | None = None, retention: timedelta | None = None) -> int:
    """Prune settled timers now, batch after batch (``prune_batch``); how many were deleted.
    ``retention`` defaults to ``TIMER_RETENTION_DAYS``. (``statechart prune --only timers``
    does the same with a progress display.)"""
    kept = retention or timedelta(days=timer_settings.TIMER_RETENTION_DAYS)
    return _retention.prune(now=now, only=[STAGE], retention={STAGE: kept}).deleted


def holds(execution_ids: Sequence[int]) -> set[int]:
    """Finished executions that still have a pending timer (it is discarded when it fires)."""
    pending = Timer.objects.using(stepper.database()).filter(
        execution_id__in=execution_ids, status=TimerStatus.PENDING
    )
    waiting = RouteTimer.objects.using(stepper.database()).filter(execution_id__in=execution_ids)
    return set(pending.values_list("execution_id", flat=True)) | set(
        waiting.values_list("execution_id", flat=True)
    )


def delete(execution_ids: Sequence[int]) -> int:
    timers = Timer.objects.using(stepper.database()).filter(execution_id__in=execution_ids)
    waiting = RouteTimer.objects.using(stepper.database()).filter(execution_id__in=execution_ids)
    return timers.delete()[0] + waiting.delete()[0]


def erase(execution_ids: Sequence[int]) -> int:
    """Remove what a timer row holds of the execution's data: its event's data, the caller's
    context, the last error (the event's name, due time and outcome stay)."""
    database = stepper.database()
    changed: list[Timer] = []
    timers = Timer.objects.using(database).filter(execution_id__in=execution_ids)
    for timer in timers.only("pk", "event", "cancelled_by").iterator(chunk_size=500):
        event = dict(timer.event) if isinstance(timer.event, dict) else {}
        event["data"] = None
        event.pop("raw", None)
        timer.event = event
        timer.context = None
        if isinstance(timer.cancelled_by, dict):  # the cancelling step's context, likewise
            timer.cancelled_by = {**timer.cancelled_by, "context": None}
        timer.last_error = ""
        changed.append(timer)
    Timer.objects.using(database).bulk_update(
        changed, ["event", "context", "cancelled_by", "last_error"], batch_size=500
    )
    # Delayed route sends still waiting: the send's data and its target (an address).
    waiting: list[RouteTimer] = []
    rows = RouteTimer.objects.using(database).filter(execution_id__in=execution_ids)
    for row in rows.only("pk", "message").iterator(chunk_size=500):
        message = dict(row.message) if isinstance(row.message, dict) else {}
        message["data"], message["target"] = None, None
        row.message = message
        waiting.append(row)
    RouteTimer.objects.using(database).bulk_update(waiting, ["message"], batch_size=500)
    return len(changed) + len(waiting)


def register() -> None:
    retention.register(
        retention.ExecutionRows(
            app="timers",
            name=STAGE,
            description="settled timers of finished executions",
            retention=retention.days("TIMER_RETENTION_DAYS"),
            prune=prune_batch,
            count=count,
            holds=holds,
            delete=delete,
            erase=erase,
        )
    )
