"""django-q2 is the worker pool; the timer table is the source of truth.

There is no django-q2 ``Schedule`` per timer (its scheduler looks at schedules only every
~30 s, and one bad row would stall the rest). Instead:

- every claim a sweeper or drain makes is **paced** (``timers.pacing``): live timers first,
  an overdue backlog at ``TIMER_CATCHUP_PER_SECOND`` per worker process;
- a **sweeper** task polls the due index every ``TIMER_POLL_MS`` for ``TIMER_SWEEP_SECONDS``;
  when timers are claimable it fires a batch itself (``TIMER_SWEEPER_FIRES``) and enqueues
  **drain** tasks only for a backlog beyond the firers at work (``drains_wanted``); when
  nothing is due but a timer comes due before its next poll, it wakes at that timer's due
  instead (so a timer known in advance waits no poll interval);
- a drain task claims batches (``SKIP LOCKED``, so concurrent firers take disjoint rows) and
  fires them until nothing is claimable (waiting for a timer due within a poll), on whichever
  worker of whichever host picked it up;
- one django-q2 ``Schedule`` (every minute) starts a new sweeper, so a lost wake-up or a dead
  sweeper only delays timers until the next one; sweepers overlap, which is harmless;
- a **starting cluster** starts a sweeper of its own (``sweep_at_start``, on django-q2's
  ``post_spawn`` signal, once per cluster: ``TIMER_SWEEP_AT_START``). django-q2's guard runs
  the scheduler only 30 s after a cluster starts, so without it a worker group restarted after
  a crash or a deploy left the timers due meanwhile (and those its dead firers had claimed)
  waiting that long; with it they fire within a poll of the restart (a claim a dead firer
  held: within its lease).

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
import logging
import multiprocessing
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.apps import apps
from django.db import transaction

from statecharts import stepper
from timers import leases
from timers.conf import timer_settings
from timers.firing import FireReport, fire_due, walk_due_index
from timers.models import Timer

log = logging.getLogger("timers")

SCHEDULE_NAME = "statecharts timers: sweep"
SWEEP = "timers.dispatch.sweep"
DRAIN = "timers.dispatch.drain"

# django-q2 task options for both tasks; see the module docstring.
TASK_OPTIONS: dict[str, Any] = {"ack_failure": True}
# How long before the cluster's timeout (or retry) a sweeper or drain ends, at most.
MARGIN_SECONDS = 10.0
# How long a drain the sweeper enqueued counts as on its way (queued on the broker, or
# started and not claiming yet: a few of django-q2's 0.1 s broker polls). One still queued
# after that (every worker busy) no longer counts: a sweeper adds at most one drain per this
# many seconds while the workers cannot start them, where it used to add one per poll.
DRAIN_START_SECONDS = 1.0


def sweep(
    seconds: float | None = None,
    *,
    enqueue: Callable[[str], object] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> int:
    """Poll for due timers for ``seconds``; fire them, and enqueue drains for a backlog.

    Each poll counts the claimable timers (up to what the cluster's workers can take at once:
    ``TIMER_BATCH`` each). With ``TIMER_SWEEPER_FIRES`` (the default) the sweeper then fires
    one batch itself, in this process, and polls again at once: a few due timers never wait
    for the broker's hop to a drain. Drains are enqueued only for what is left beyond the
    firers already at work (``drains_wanted``): the sweeper itself, the claims other firers
    hold now, and the drains this sweeper enqueued in the last ``DRAIN_START_SECONDS`` (on
    their way: queued, or started and not claiming yet). Without ``TIMER_SWEEPER_FIRES`` the
    sweeper only enqueues drains, and sleeps a poll after each look.

    The sweeper never fires a suspect (a timer an earlier claim left unsettled: its firer
    died, hung or ran out of time) itself: one that kills its firer would take the sweeper
    down with it, and every other timer would wait for the next scheduled sweeper. Suspects
    are left to drains (one per ``TIMER_FIRE_CHUNK`` claimable suspects: a claim takes at
    most that many).

    ``seconds`` defaults to ``task_budget()``. Returns how many drains it enqueued.
    """
    seconds = task_budget() if seconds is None else seconds
    enqueue = enqueue or _enqueue
    poll = timer_settings.TIMER_POLL_MS / 1000
    batch = timer_settings.TIMER_BATCH
    fires = bool(timer_settings.TIMER_SWEEPER_FIRES)
    workers = cluster_workers()
    deadline = monotonic() + seconds
    enqueued = 0
    sent: list[float] = []  # when this sweeper enqueued its recent drains (monotonic)
    # The sweeper's own claims are renewed like a drain's while it fires.
    heartbeat = leases.running() if fires else contextlib.nullcontext()
    with _stop_on_signal() as stopping, heartbeat:
        while monotonic() < deadline and not stopping.is_set() and not _cluster_stopping():
            look = _look(batch * workers)
            waiting, suspects = look.waiting, look.suspects
            if not waiting:
                sleep(_until_next_due(poll))
                continue
            clock = monotonic()
            sent = [at for at in sent if clock - at < DRAIN_START_SECONDS]
            own = fires and waiting > suspects  # fresh timers: the sweeper takes a batch
            wanted = drains_wanted(
                waiting - suspects,
                suspects=suspects,
                batch=batch,
                workers=workers,
                sweeper_fires=own,
                on_the_way=len(sent),
            )
            wanted = max(0, wanted - look.held)  # the claims other firers hold now
            for _ in range(wanted):
                enqueue(DRAIN)
                sent.append(clock)
            enqueued += wanted
            if not own:
                sleep(poll)
            elif not fire_due(fresh_only=True, paced=True).outcomes:
                # Counted but not claimed: another firer's claim held the rows locked for an
                # instant (SKIP LOCKED). Look again a poll later rather than spin on them.
                sleep(poll)
    return enqueued


def drains_wanted(
    fresh: int,
    *,
    suspects: int = 0,
    batch: int,
    workers: int,
    sweeper_fires: bool,
    on_the_way: int,
    chunk: int | None = None,
) -> int:
    """How many drains to enqueue for ``fresh`` claimable timers and ``suspects`` (claimable
    timers an earlier claim left unsettled): a firer per ``batch`` of fresh ones, and one per
    ``chunk`` (default ``TIMER_FIRE_CHUNK``) of suspects (a claim takes at most a chunk of
    them, so a dead firer's batch is fired by that many firers at once), at most ``workers``
    (more could not run at once), less the sweeper itself when it fires (fresh ones only) and
    the drains already ``on_the_way``. The caller also subtracts the claims other firers hold
    (a running drain claims batch after batch until nothing is claimable, so it needs no
    second drain)."""
    chunk = max(1, timer_settings.TIMER_FIRE_CHUNK if chunk is None else chunk)
    firers = min(-(-fresh // batch) + -(-suspects // chunk), workers)
    return max(0, firers - int(sweeper_fires) - on_the_way)


def cluster_workers() -> int:
    """The workers of this django-q2 cluster (``Q_CLUSTER["workers"]``): the most firers
    that can run at once here, so the most drains a sweeper has in flight."""
    from django_q.conf import Conf

    return max(1, int(Conf.WORKERS or 1))


@dataclass(frozen=True, slots=True)
class Look:
    """What one look of a sweeper saw among the earliest due timers."""

    waiting: int  # claimable timers, counted up to the look's bound
    suspects: int  # of those, the ones an earlier claim left unsettled
    held: int  # claims live on them now (distinct fence tokens): firers at work


def _look(bound: int) -> Look:
    """Count the claimable timers up to ``bound`` (the sweeper only needs to know how many
    firers they keep busy), the suspects among them, and the claims firers hold now (running
    drains, other sweepers; the sweeper's own are settled when it looks, between its
    batches), in one query over the earliest ``2 * bound`` due, pending rows: claims take the
    earliest claimable rows, so live claims sit at the front of the due order, among at most
    a batch per firer. A claimable route timer (a delayed route send) counts as one fresh
    timer when no timer is: firing one batch takes those too.

    Asked in the claim's own shape (``ORDER BY due, id LIMIT n``), answered by walking the
    partial due index (``walk_due_index``: the planner's statistics cannot turn it into a
    read and sort of every due row). Not ``.exists()`` or a ``COUNT``:
    those drop the ORDER BY, and with settled rows due in the past the planner expects many
    due pending rows and may scan the whole table instead (200 ms per poll with 1,000,000
    pending and 1,000,000 settled rows and nothing due; see benchmarks/JOURNAL.md).
    """
    now = timer_settings.now()
    database = stepper.database()
    with transaction.atomic(using=database):
        walk_due_index(database)  # (a LIMIT on the due index, whatever the statistics say)
        rows = list(
            Timer.objects.using(database)
            .due(now)
            .order_by("due", "id")
            .values_list("claimed_until", "fire_deadline", "claim_token")[: 2 * bound]
        )
    waiting = suspects = 0
    held: set[int | None] = set()
    for until, deadline, token in rows:
        if until is not None and until >= now and (deadline is None or deadline >= now):
            held.add(token)  # not claimable (Timer.objects.claimable): a live claim
        elif waiting < bound:
            waiting += 1
            suspects += until is not None
    if not waiting and apps.is_installed("routes"):  # delayed route sends (timers.routequeue)
        from timers.routequeue import claimable_waiting

        waiting = int(claimable_waiting(now))
    return Look(waiting, suspects, len(held))


def _until_next_due(poll: float) -> float:
    """How long an idle sweeper sleeps: ``poll`` seconds, or less when a pending timer comes
    due sooner (then until its due), so a timer written before it is due is seen the moment
    it is due, not up to a poll later. A timer written meanwhile with an earlier due, and a
    claim whose lease runs out, are seen at the next poll as before."""
    gap = _next_due_within(poll)
    return poll if gap is None else gap


def _next_due_within(poll: float) -> float | None:
    """Seconds until the next pending timer comes due, if it does within ``poll`` seconds
    (at least 1 ms: the next look then finds it due, no spinning on a clock's granularity).

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
        return None
    return min(poll, max((upcoming - now).total_seconds(), 0.001))


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
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Fire claimable timers, batch after batch, until none is left. Returns the count.

    When nothing is claimable but a timer comes due within a poll (``TIMER_POLL_MS``), the
    drain waits for it and goes on, rather than end and leave it to a new drain through the
    broker (timers due at a steady rate keep a drain firing). Stops early after
    ``max_batches`` batches or once ``seconds`` (default ``task_budget()``) have passed; what
    is left is still claimable, and the next sweeper poll sees it. Runs under this worker
    process's heartbeat (``timers.leases``): the leases of what it has claimed are renewed
    while it fires, so only a dead (or stalled) worker's claims expire.
    """
    deadline = monotonic() + (task_budget() if seconds is None else seconds)
    poll = timer_settings.TIMER_POLL_MS / 1000
    handled = batches = 0
    with leases.running():  # this worker's heartbeat renews its claims' leases meanwhile
        while batches < max_batches:
            report: FireReport = fire_due(paced=True)
            if report.outcomes:
                handled += report.handled
                batches += 1
            else:
                gap = _next_due_within(poll)
                if gap is None:
                    break
                sleep(gap)
            if monotonic() >= deadline or _cluster_stopping():
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


# Set by the first worker of a cluster that enqueued its start-up sweeper: shared memory made
# before django-q2 forks its sentinel and workers (``register``, in the cluster's main
# process), so the cluster's workers, and the replacements its sentinel forks later, see one
# flag. A cluster started again is a new process, with a new flag.
_started_at_start: Any = None
# The cluster's stop event (django-q2's ``Cluster.stop_event``, shared with the sentinel and
# its forked workers), found when this worker was spawned; None outside a cluster.
_stop_event: Any = None


def register() -> None:
    """Start a sweeper when a django-q2 cluster starts (``sweep_at_start``). A contribution of
    the timers app (``timers.declaration``), run by ``ready()`` in every process, before
    django-q2 forks its workers."""
    global _started_at_start
    if not apps.is_installed("django_q") or "fork" not in multiprocessing.get_all_start_methods():
        return  # (django-q2 forks its workers where it can; elsewhere the schedule does it)
    from django_q.signals import post_spawn

    if _started_at_start is None:
        _started_at_start = multiprocessing.get_context("fork").Value("b", 0)
    post_spawn.connect(sweep_at_start, dispatch_uid="timers.sweep_at_start")


def sweep_at_start(sender: object = None, proc_name: str = "", **kwargs: Any) -> str | None:
    """django-q2's ``post_spawn`` (in a worker, before its first task): the first worker of a
    cluster enqueues a sweeper; the others, and a worker the sentinel forks to replace a dead
    one (the sweepers already running cover its claims once their lease ends), do nothing.
    Returns the sweeper's task id, or None.

    Never raises: a worker whose spawn signal raises dies and is forked again, in a loop.
    """
    global _stop_event
    _stop_event = _stop_event or _sentinels_stop_event()
    flag = _started_at_start
    if flag is None or not timer_settings.TIMER_SWEEP_AT_START:
        return None
    with flag.get_lock():
        if flag.value:
            return None
        flag.value = 1
    try:
        return _enqueue(SWEEP)
    except Exception:  # (a broker or database down: the schedule starts the next sweeper)
        log.exception("timers: the start-up sweeper of worker %s was not enqueued", proc_name)
        return None


def _sentinels_stop_event() -> Any:
    """The stop event of the django-q2 cluster this worker belongs to, or None.

    django-q2 tells a stopping cluster's workers nothing until their task ends (SIGTERM goes
    to the cluster's main process, which sets this event; the sentinel then waits for every
    running task), so a sweeper in a worker would keep a plain ``kill``, a container stop,
    from ending the cluster for its whole life. django-q2 gives a worker no handle on it
    either: this worker was forked inside its sentinel's ``spawn_process``, whose frame (and
    its ``self``, the ``Sentinel``) is still on this process's stack at ``post_spawn``.
    """
    from django_q.cluster import Sentinel

    frame = sys._getframe(1)
    while frame is not None:
        owner = frame.f_locals.get("self")
        if isinstance(owner, Sentinel):
            return getattr(owner, "stop_event", None)
        frame = frame.f_back
    return None


def _cluster_stopping() -> bool:
    """Whether this worker's cluster was told to stop (False outside a cluster)."""
    event = _stop_event
    try:
        return bool(event is not None and event.is_set())
    except (OSError, ValueError):  # (the event's semaphore is gone with its cluster)
        return True
