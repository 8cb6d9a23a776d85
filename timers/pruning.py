"""Pruning settled timer rows without weakening the deduplication guarantee."""

from __future__ import annotations

from datetime import datetime, timedelta

from statecharts.models import Execution
from statecharts.statuses import TERMINAL_STATUSES
from timers.conf import timer_settings
from timers.models import Timer


def prune(*, now: datetime | None = None, retention: timedelta | None = None) -> int:
    """Delete settled timers older than the retention, of executions that can no longer step.

    The (execution, ordinal) key must stay unique forever for an execution that may still
    step: its rows are kept however old they are. A finished (or deleted) execution
    schedules nothing again, so its settled rows can go. Returns how many were deleted.
    """
    now = now or timer_settings.now()
    retention = retention or timedelta(days=timer_settings.TIMER_RETENTION_DAYS)
    # Every execution not finished may step again (halted, needing migration or repair too).
    live = Execution.objects.exclude(status__in=TERMINAL_STATUSES).values("pk")
    deleted, _ = (
        Timer.objects.terminal()
        .filter(settled__lt=now - retention)
        .exclude(execution_id__in=live)
        .delete()
    )
    return deleted
