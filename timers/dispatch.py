"""django-q2 is the worker pool; the timer table is the source of truth.

There is no django-q2 ``Schedule`` per timer (its scheduler looks at schedules only every
~30 s, and one bad row would stall the rest). Instead:

- a **sweeper** task polls the due index every ``TIMER_POLL_MS`` for ``TIMER_SWEEP_SECONDS``
  and, while due timers are waiting, enqueues **drain** tasks;
- a drain task claims batches (``SKIP LOCKED``, so concurrent drains take disjoint rows) and
  fires them until nothing is claimable, on whichever worker of whichever host picked it up;
- one django-q2 ``Schedule`` (every minute) starts a new sweeper, so a lost wake-up or a dead
  sweeper only delays timers until the next one; sweepers overlap, which is harmless.

``ensure_schedule()`` creates that schedule (the ``setup_timers`` command calls it) and
``wake()`` starts a sweeper right away.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from statecharts.conf import statecharts_settings
from timers.firing import FireReport, fire_due
from timers.models import Timer

SCHEDULE_NAME = "statecharts timers: sweep"
SWEEP = "timers.dispatch.sweep"
DRAIN = "timers.dispatch.drain"


def sweep(
    seconds: float | None = None,
    *,
    enqueue: Callable[[str], object] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> int:
    """Poll for due timers for ``seconds``; enqueue a drain whenever some are waiting.

    Returns how many drains it enqueued.
    """
    seconds = statecharts_settings.TIMER_SWEEP_SECONDS if seconds is None else seconds
    enqueue = enqueue or _enqueue
    poll = statecharts_settings.TIMER_POLL_MS / 1000
    deadline = monotonic() + seconds
    enqueued = 0
    while monotonic() < deadline:
        if Timer.objects.claimable(statecharts_settings.now()).exists():
            enqueue(DRAIN)
            enqueued += 1
        sleep(poll)
    return enqueued


def drain(max_batches: int = 1_000) -> int:
    """Fire claimable timers, batch after batch, until none is left. Returns the count."""
    handled = 0
    for _ in range(max_batches):
        report: FireReport = fire_due()
        if not report.outcomes:
            break
        handled += report.handled
    return handled


def wake() -> None:
    """Start a sweeper now (e.g. after deploying, or from a test)."""
    _enqueue(SWEEP)


def ensure_schedule() -> None:
    """Create or update the one schedule that keeps a sweeper running."""
    from django_q.models import Schedule

    Schedule.objects.update_or_create(
        name=SCHEDULE_NAME,
        defaults={
            "func": SWEEP,
            "schedule_type": Schedule.MINUTES,
            "minutes": 1,
            "repeats": -1,
        },
    )


def _enqueue(func: str) -> object:
    from django_q.tasks import async_task

    return async_task(func, save=func != DRAIN)
