"""The invocations app's health figures (``statecharts.operations.health``), registered from
``ready()``:

- ``invocations.open_handlers``: invocations of invoke handlers (not SCXML children) still
  open (for reading);
- ``invocations.overdue``: open ones past their deadline, which the sweeper fails (warning
  from 1: the sweeper is behind or not running);
- ``invocations.retrying``: open ones waiting for another attempt at ``start``;
- ``schedules.invocations_sweep.late_seconds``: the sweeper schedule's liveness.
"""

from __future__ import annotations

from datetime import datetime

from invocations.models import Invocation
from invocations.tasks import SCHEDULE_NAME
from statecharts.operations import health


def measure(now: datetime) -> list[health.Figure]:
    handlers = Invocation.objects.open().exclude(type="scxml")
    return [
        health.Figure("invocations.open_handlers", handlers.count(), "invocations"),
        health.Figure(
            "invocations.overdue",
            handlers.filter(deadline__lt=now).count(),
            "invocations",
            "open past their deadline: the sweeper fails them (is it running?)",
            warning=1,
        ),
        health.Figure(
            "invocations.retrying",
            handlers.exclude(next_attempt_at=None).count(),
            "invocations",
        ),
        health.schedule_figure(SCHEDULE_NAME, "invocations_sweep", now),
    ]


def register() -> None:
    health.register(health.HealthCheck(app="invocations", name="invocations", measure=measure))
