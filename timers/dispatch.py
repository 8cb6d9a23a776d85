"""django-q2 is the worker pool; the timer table is the source of truth.

There is no django-q2 ``Schedule`` per timer (its scheduler looks at schedules only every
~30 s, and one bad row would stall the rest). Instead:

- a **sweeper** task polls the due index every ``TIMER_POLL_MS`` for ``TIMER_SWEEP_SECONDS``
  and, while due timers are waiting, enqueues **drain** tasks; when nothing is due but a
  timer comes due before its next poll, it wakes at that timer's due instead (so a timer
  known in advance waits no poll interval);
- a drain task claims batches (``SKIP LOCKED``, so concurrent drains take disjoint rows) and
  fires them until nothing is claimable, on whichever worker of whichever host picked it up;
- one django-q2 ``Schedule`` (every minute) starts a new sweeper, so a lost wake-up or a dead
  sweeper only delays timers until the next one; sweepers overlap, which is harmless.

``ensure_schedule()`` creates that schedule (the ``setup_timers`` command calls it) and
``wake()`` starts a sweeper right away.

How this sits on django-q2 (checked against django-q2 1.11):

- A task runs for at most the cluster's ``timeout`` (then the worker is killed) and the ORM
  broker hands an unacknowledged task out again after ``retry`` seconds. A sweeper or drain
  therefore lives at most ``task_budget()``: ``TIMER_SWEEP_SECONDS``, cut short to end before
  either, whatever ``Q_CLUSTER`` says. A drain that runs out of budget with timers still due
  just returns: the sweeper sees them and enqueues another drain.
- Both are enqueued with ``ack_failure``: a sweeper or drain that raises is recorded as a
  failed task and never re-delivered (the next sweeper covers what it missed), so a failing
  drain cannot pile up redeliveries.
- A successful drain is not saved (``save=False``; there can be many); sweepers are, so the
  admin shows one result a minute (the number of drains it enqueued). Failures always are.
- Each running sweeper occupies a worker for its lifetime, and scheduled sweepers overlap:
  give the cluster more workers than that (``demo/settings/base.py`` uses 4).
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

from django.apps import apps

from timers.conf import timer_settings
from timers.firing import FireReport, fire_due
from timers.models import Timer

SCHEDULE_NAME = "statecharts timers: sweep"
SWEEP = "timers.dispatch.sweep"
DRAIN = "timers.dispatch.drain"

# django-q2 task options for both tasks; see the module docstring.
TASK_OPTIONS: dict[str, Any] = {"ack_failure": True}
# How long before the cluster's timeout (or retry) a sweeper or drain ends, at most.
MARGIN_SECONDS = 10.0


def sweep(
    seconds: float | None = None,
    *,
    enqueue: Callable[[str], object] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> int:
    """Poll for due timers for ``seconds``; enqueue a drain whenever some are waiting.

    ``seconds`` defaults to ``task_budget()``. Returns how many drains it enqueued.
    """
    seconds = task_budget() if seconds is None else seconds
    enqueue = enqueue or _enqueue
    poll = timer_settings.TIMER_POLL_MS / 1000
    deadline = monotonic() + seconds
    enqueued = 0
    with _stop_on_signal() as stopping:
        while monotonic() < deadline and not stopping.is_set():
            if _claimable_waiting():
                enqueue(DRAIN)
                enqueued += 1
                sleep(poll)
            else:
                sleep(_until_next_due(poll))
    return enqueued


def _until_next_due(poll: float) -> float:
    """How long an idle sweeper sleeps: ``poll`` seconds, or less when a pending timer comes
    due sooner (then until its due), so a timer written before it is due is seen the moment
    it is due, not up to a poll later. A timer written meanwhile with an earlier due, and a
    claim whose lease runs out, are seen at the next poll as before.

    One indexed ``LIMIT 1`` query on the partial due index (pending rows due in the next
    ``poll`` seconds), asked only when nothing was claimable.
    """
    now = timer_settings.now()
    upcoming = (
        Timer.objects.pending()
        .filter(due__gt=now, due__lte=now + timedelta(seconds=poll))
        .order_by("due", "id")
        .values_list("due", flat=True)
        .first()
    )
    if upcoming is None:
        return poll
    # At least 1 ms: the next poll then finds it due (no spinning on a clock's granularity).
    return min(poll, max((upcoming - now).total_seconds(), 0.001))


def _claimable_waiting() -> bool:
    """Whether a timer is claimable now, asked in the claim's own shape (``ORDER BY due, id
    LIMIT 1``), which PostgreSQL answers from the partial due index whatever the table holds.

    Not ``.exists()``: that drops the ORDER BY, and with settled rows due in the past the
    planner expects many due pending rows and may scan the whole table instead (200 ms per
    poll with 1,000,000 pending and 1,000,000 settled rows and nothing due; see
    docs/performance.md).
    """
    now = timer_settings.now()
    if Timer.objects.claimable(now).values_list("pk", flat=True).first() is not None:
        return True
    if apps.is_installed("routes"):  # delayed route sends (timers.routequeue)
        from timers.routequeue import claimable_waiting

        return claimable_waiting(now)
    return False


@contextlib.contextmanager
def _stop_on_signal() -> Iterator[threading.Event]:
    """While a sweeper runs, SIGINT/SIGTERM end it at its next poll.

    django-q2 workers ignore SIGINT and the cluster waits for running tasks when it stops,
    so without this a Ctrl-C (or a deploy) would wait out a 90 s sweeper. Stopping a sweeper
    early is harmless: the timer table is the truth, and the next sweeper carries on.
    """
    stopping = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stopping  # signal handlers can only be set from the main thread
        return
    previous = {
        signum: signal.signal(signum, lambda _signum, _frame: stopping.set())
        for signum in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield stopping
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def drain(
    max_batches: int = 1_000,
    *,
    seconds: float | None = None,
    monotonic: Callable[[], float] = time.monotonic,
) -> int:
    """Fire claimable timers, batch after batch, until none is left. Returns the count.

    Stops early after ``max_batches`` batches or once ``seconds`` (default ``task_budget()``)
    have passed; what is left is still claimable, and the next sweeper poll sees it.
    """
    deadline = monotonic() + (task_budget() if seconds is None else seconds)
    handled = 0
    for _ in range(max_batches):
        report: FireReport = fire_due()
        if not report.outcomes:
            break
        handled += report.handled
        if monotonic() >= deadline:
            break
    return handled


def task_budget() -> float:
    """Seconds a sweeper or drain may run: ``TIMER_SWEEP_SECONDS``, ending before the cluster's
    ``timeout`` kills the task and before its ``retry`` hands it out again."""
    from django_q.conf import Conf

    seconds = float(timer_settings.TIMER_SWEEP_SECONDS)
    for bound in (Conf.TIMEOUT, Conf.RETRY):
        if bound and bound > 0:
            seconds = min(seconds, bound - min(MARGIN_SECONDS, bound / 2))
    return seconds


def wake(seconds: float | None = None) -> str:
    """Start a sweeper now (e.g. after deploying, or from a test); returns its task id.

    ``seconds`` is how long it lives (default ``task_budget()``).
    """
    kwargs = {} if seconds is None else {"seconds": seconds}
    return _enqueue(SWEEP, **kwargs)


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
            # The scheduler passes q_options on to async_task, as _enqueue does.
            "kwargs": repr({"q_options": TASK_OPTIONS}),
        },
    )


def _enqueue(func: str, **kwargs: Any) -> str:
    from django_q.tasks import async_task

    return async_task(func, save=func != DRAIN, **TASK_OPTIONS, **kwargs)
