"""The timers app's health figures (``statecharts.operations.health``), registered from ``ready()``:

- ``timers.pending``, ``timers.due``: pending timers, and those due now (the backlog);
- ``timers.oldest_overdue_seconds``: how late the most overdue pending timer is (warning at
  60 s, critical at 600 s: firing normally keeps it within a poll interval and a queue);
- ``timers.failed``: failed timers of executions that may still step (warning from 1: each
  is a delayed send that never happened; the admin can retry it);
- ``timers.undecodable``: timers of such executions discarded because their row could not be
  read back (warning from 1);
- ``timers.needs_attention``: timers failed after waiting ``TIMER_UNDEPLOYED_MAX_SECONDS``
  for a delivery, codec or key this deployment lacks (critical from 1);
- ``timers.held``: pending timers snoozed by their execution's status or an unavailable
  delivery (for reading);
- ``schedules.timers_sweep.late_seconds``: the sweeper schedule's liveness.
"""

from __future__ import annotations

from datetime import datetime

from statecharts.operations import health, retention
from timers.dispatch import SCHEDULE_NAME
from timers.models import Timer, TimerStatus
from timers.settling import NEEDS_ATTENTION


def measure(now: datetime) -> list[health.Figure]:
    pending = Timer.objects.pending()
    most_overdue = Timer.objects.due(now).first()  # (the due index, most overdue first)
    late = round((now - most_overdue.due).total_seconds(), 1) if most_overdue else 0.0
    detail = ""
    if most_overdue is not None:
        detail = (
            f"timer {most_overdue.pk} ({most_overdue.event.get('name')}) of execution "
            f"{most_overdue.execution_id}, due {most_overdue.due.isoformat(timespec='seconds')}"
        )
    of_live = Timer.objects.filter(retention.live_execution("execution_id"))
    return [
        health.Figure("timers.pending", pending.count(), "timers"),
        health.Figure("timers.due", Timer.objects.due(now).count(), "timers"),
        health.Figure(
            "timers.oldest_overdue_seconds", late, "s", detail, warning=60, critical=600
        ),
        health.Figure(
            "timers.failed",
            of_live.filter(status=TimerStatus.FAILED).count(),
            "timers",
            "failed timers of executions that may still step (the admin can retry them)",
            warning=1,
        ),
        health.Figure(
            "timers.undecodable",
            of_live.filter(status=TimerStatus.DISCARDED, reason__startswith="undecodable").count(),
            "timers",
            "discarded: their row could not be read back",
            warning=1,
        ),
        health.Figure(
            "timers.needs_attention",
            of_live.filter(status=TimerStatus.FAILED, reason__startswith=NEEDS_ATTENTION).count(),
            "timers",
            "failed after waiting TIMER_UNDEPLOYED_MAX_SECONDS for a delivery, codec or key"
            " this deployment lacks (deploy it, then retry them)",
            critical=1,
        ),
        health.Figure("timers.held", pending.filter(reason__endswith="snoozed").count(), "timers"),
        health.schedule_figure(SCHEDULE_NAME, "timers_sweep", now),
    ]


def register() -> None:
    health.register(health.HealthCheck(app="timers", name="timers", measure=measure))
