"""The timers app's rows for retention and erasure (``statecharts.operations.retention``).

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

from django.db.models import Q

from statecharts import stepper
from statecharts.operations import retention
from statecharts.operations import retention as _retention  # (prune's argument is named retention)
from timers.conf import timer_settings
from timers.models import TERMINAL_TIMER_STATUSES, RouteTimer, Timer, TimerStatus

STAGE = "timers"


def _prunable(cutoff: datetime) -> Q:
    return Q(status__in=TERMINAL_TIMER_STATUSES, settled__lt=cutoff)


_settled = retention.SettledRows(Timer, "execution_id", _prunable)
prune_batch = _settled.prune  # settled timer rows of executions that can no longer step
count = _settled.count


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
