"""The outbox sweeper on the django-q2 cluster: messages a crash left pending get delivered.

Every message is normally delivered by the process whose step wrote it, right after the commit.
If that process dies first, the message stays pending; this sweeper, a django-q2 ``Schedule``
that runs every minute on whichever worker of whichever host takes it, delivers messages left
pending for more than ``OUTBOX_SWEEP_AGE_SECONDS`` (younger ones are normally being delivered
right now by their writer: re-delivering them would be harmless, only wasted work).

The schedule is created when the ``statecharts`` app is migrated (``post_migrate``) if
``django_q`` is installed; ``ensure_schedule()`` creates it on demand. Without a cluster,
``manage.py statechart deliver`` does the same once.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from statecharts.conf import statecharts_settings
from statecharts.models import OutboxMessage
from statecharts.stepper.delivery import deliver_pending
from statecharts.stepper.sql import database
from statecharts.work import WorkSource

SCHEDULE_NAME = "statecharts outbox: sweep"
SWEEP = "statecharts.stepper.sweeper.sweep"


def sweep() -> int:
    """Deliver the messages left pending (the scheduled task). Returns how many."""
    age = timedelta(seconds=statecharts_settings.OUTBOX_SWEEP_AGE_SECONDS)
    return deliver_pending(older_than=age)


def ensure_every_minute(name: str, func: str, *, using: str | None = None) -> bool:
    """Create or update the django-q2 schedule ``name`` that runs ``func`` every minute (a
    sweep that fails is recorded and not re-delivered: the next one covers it). False, and
    nothing done, when django-q2 is not installed or not migrated on that database. Apps
    keeping work for later use it for their sweepers."""
    return ensure_scheduled(name, func, minutes=1, using=using)


def ensure_scheduled(name: str, func: str, *, minutes: int, using: str | None = None) -> bool:
    """``ensure_every_minute``, every ``minutes`` minutes (the hourly prune: 60)."""
    from django.apps import apps
    from django.db import connections

    using = using or database()
    if not apps.is_installed("django_q"):
        return False
    if "django_q_schedule" not in connections[using].introspection.table_names():
        return False
    from django_q.models import Schedule

    Schedule.objects.using(using).update_or_create(
        name=name,
        defaults={
            "func": func,
            "schedule_type": Schedule.MINUTES,
            "minutes": minutes,
            "repeats": -1,
            "kwargs": repr({"q_options": {"ack_failure": True}}),
        },
    )
    return True


def ensure_schedule() -> None:
    """Create or update the schedule that runs ``sweep`` every minute."""
    ensure_every_minute(SCHEDULE_NAME, SWEEP)


def ensure_schedule_after_migrate(sender: Any, using: str, **kwargs: Any) -> None:
    """``post_migrate`` receiver: the schedule exists once django-q2's tables do."""
    ensure_every_minute(SCHEDULE_NAME, SWEEP, using=using)


def _oldest_pending() -> Any:
    return (
        OutboxMessage.objects.using(database())
        .pending()
        .order_by("created")
        .values_list("created", flat=True)
        .first()
    )


# Pending outbox messages are due as soon as they are written (statecharts.work).
outbox_work = WorkSource(
    "statecharts", next_due=_oldest_pending, run_due=lambda now: deliver_pending()
)
