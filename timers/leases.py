"""Claim leases, and the heartbeat that keeps a live firer's leases alive.

A claim (``timers.claiming.claim_batch``) takes due timer rows for one firer with two marks on
each row: a **lease** (``claimed_until``: now + ``TIMER_LEASE_SECONDS``, 3 s) and a **fence
token** (``claim_token``: a random number, one per claim). The lease is short so that a firer
that dies (SIGKILL, OOM, a lost host) only delays its rows by seconds: once it ends, another
firer's claim takes the rows over (spending the attempt, ``timers.claiming``). A firer that is
alive, however long its fires take, keeps its lease by renewing it:

- **the heartbeat** (this module): a daemon thread per process, with its own database
  connection, renews every ``TIMER_LEASE_SECONDS / 3`` seconds the lease of each claim the
  process's firing loop holds (``holding``). It runs in the real firing loops, django-q2's
  drain task and ``fire_timers`` (``running``), not in tests and tools that fire with an
  injected clock;
- **between chunks** (``timers.claiming._keep``): the firing loop itself renews the lease and
  the per-fire deadline of the rows it has not fired yet once half its window has passed,
  heartbeat or not.

Each beat while a firing loop runs, the heartbeat also hands over the work other apps' dead
workers left half done (``Heartbeat.recover``: ``statecharts.work.recover_due``; an invoke
handler's start whose lease ran out is started again), so it is picked up within seconds by
the workers that run timers, which always run.

What a renewal never does:

- it never renews a row another claim took over (the token differs), nor one its own firer
  has settled, snoozed or put back for a retry (no lease on it any more), nor one past its
  **per-fire deadline** (``fire_deadline``, which nothing renews, so a fire that hangs in a
  live process still loses its rows at its per-fire timeout); a row without a per-fire
  timeout (written before it existed) is renewed for at most ``TIMER_FIRE_TIMEOUT_SECONDS``
  after the claim was registered;
- it never waits: the rows are read ``FOR UPDATE SKIP LOCKED`` (PostgreSQL), so a row the
  firer's own chunk has already taken (``pending -> fired``, not committed yet) or another
  firer is claiming right now is skipped. A row taken by an uncommitted chunk needs no lease:
  its row lock keeps every claim off it until that transaction ends;
- it never touches the ``fire_deadline`` or an execution row (lock order: it holds timer rows
  for an instant and nothing else, like a claim).

The fence: a take, settle, snooze or retry of a claimed row (``timers.settling``) only acts on a
row still carrying the claim's token. A firer whose lease ran out and whose rows another claim
took over (the heartbeat could not run: a stalled process, a lost connection, a fire holding
the GIL in C code longer than the lease) therefore commits nothing of them: it reports them
``skipped``, and the new claim fires them, once. A firer whose lease ran out but whose rows
nobody took yet still owns them (the token is unchanged) and fires them.

On SQLite (one writer at a time) a beat waits for the firing transaction's commit (the
database's write lock), so a lease is only renewed between transactions there: keep chunks
shorter than the lease, or raise ``TIMER_LEASE_SECONDS``.

Process model: the thread (a daemon) is started by the first ``running()`` in a process and
stays across firing loops (django-q2 runs one drain after another in a worker), keeping its
database connection while a loop runs; with no loop running it closes its connection, and
after ``IDLE_BEATS`` such beats it ends (the next ``running()`` starts another). A forked
child (django-q2's workers are forked from the cluster's process) starts a heartbeat of its
own when it needs one. Under django-q2 a worker killed by the cluster's ``timeout`` takes its
heartbeat with it.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connections, transaction
from django.db.models import Q

from statecharts import stepper, work
from timers.conf import timer_settings
from timers.models import Timer

log = logging.getLogger("timers")

BEATS_PER_LEASE = 3  # a live firer's lease never has less than 2/3 of it left, give or take
IDLE_BEATS = 10  # beats without a firing loop before the heartbeat's thread ends


def lease() -> timedelta:
    """A claim's lease (``TIMER_LEASE_SECONDS``)."""
    return timedelta(seconds=timer_settings.TIMER_LEASE_SECONDS)


def renew(
    token: int, pks: Iterable[int], now: datetime, *, horizon: datetime | None = None
) -> set[int]:
    """Extend to ``now`` + the lease the lease of the rows among ``pks`` that claim ``token``
    still holds; returns their ids. Never waits, never renews the per-fire deadline, never
    renews a row past it (see the module docstring); a row without a per-fire deadline only
    before ``horizon`` (None: no bound). One short transaction of its own."""
    pks = list(pks)
    if not pks:
        return set()
    database = stepper.database()
    until = now + lease()
    within = Q(fire_deadline__gt=now)
    if horizon is None or now < horizon:
        within |= Q(fire_deadline__isnull=True)
    mine = (
        Timer.objects.using(database)
        .pending_among(pks)  # (by primary key, whatever the statistics say)
        .filter(
            within,
            claim_token=token,
            claimed_until__isnull=False,  # settled, snoozed or retried by its firer: not claimed
            claimed_until__lt=until,  # only ever extended
        )
    )
    with transaction.atomic(using=database):
        if connections[database].features.has_select_for_update_skip_locked:
            mine = mine.select_for_update(skip_locked=True)
        kept = set(mine.values_list("pk", flat=True))
        if kept:
            Timer.objects.using(database).filter(pk__in=kept).update(claimed_until=until)
    return kept


@dataclass(slots=True)
class Held:
    """One claim a firing loop of this process holds: its token, its rows, and how long its
    rows without a per-fire deadline may be renewed."""

    token: int
    pks: frozenset[int]
    horizon: datetime


class Heartbeat:
    """Renews the leases of the claims this process holds, from a thread of its own (see the
    module docstring). ``beat()`` is one renewal of everything held, at the settings' clock
    or at ``now``; the thread calls it every ``interval`` seconds. ``wait`` (tests) replaces
    the thread's sleep: it is handed the interval and answers whether to stop."""

    def __init__(self, *, wait: Callable[[float], bool] | None = None) -> None:
        self._held: dict[int, Held] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._wait = wait or self._stopping.wait
        self._thread: threading.Thread | None = None
        self._users = 0
        self.beats = 0  # beats done, for tests and telemetry
        self.recovered = 0  # other apps' work handed over again (``recover``)

    @property
    def interval(self) -> float:
        return timer_settings.TIMER_LEASE_SECONDS / BEATS_PER_LEASE

    @property
    def active(self) -> bool:
        """Whether a firing loop of this process runs under this heartbeat now."""
        return self._users > 0

    @contextmanager
    def running(self) -> Iterator[Heartbeat]:
        """While inside, claims this process's firing loops take are renewed (``holding``);
        starts the thread if it is not running yet."""
        with self._lock:
            self._users += 1
            if self._thread is None or not self._thread.is_alive():
                self._stopping.clear()
                self._thread = threading.Thread(
                    target=self._run, name="timers-heartbeat", daemon=True
                )
                self._thread.start()
        try:
            yield self
        finally:
            with self._lock:
                self._users -= 1

    @contextmanager
    def holding(self, token: int, pks: Iterable[int], claimed: datetime) -> Iterator[None]:
        """Renew claim ``token``'s leases while inside, if this heartbeat is running."""
        if not self.active:
            yield
            return
        horizon = claimed + timedelta(seconds=timer_settings.TIMER_FIRE_TIMEOUT_SECONDS)
        with self._lock:
            self._held[token] = Held(token, frozenset(pks), horizon)
        try:
            yield
        finally:
            with self._lock:
                self._held.pop(token, None)

    def held(self) -> list[Held]:
        with self._lock:
            return list(self._held.values())

    def beat(self, now: datetime | None = None) -> int:
        """Renew every held claim once; how many rows were renewed."""
        now = now or timer_settings.now()
        renewed = sum(len(renew(h.token, h.pks, now, horizon=h.horizon)) for h in self.held())
        self.beats += 1
        return renewed

    def recover(self, now: datetime | None = None) -> int:
        """Hand over the work other apps' dead workers left half done (``statecharts.work``:
        ``recover_due``, e.g. an invoke handler's start whose lease ran out); how much. Every
        beat while a firing loop runs here, so whichever worker group runs timers picks it
        up within a beat of its lease's end, without this app knowing the others."""
        try:
            handed = work.recover_due(now or timer_settings.now())
        except Exception:  # (a lost connection: the next beat)
            log.warning("timers heartbeat: recovering other work failed", exc_info=True)
            connections[stepper.database()].close()
            return 0
        self.recovered += handed
        return handed

    def stop(self, timeout: float | None = None) -> None:
        """End the thread (tests; a process's heartbeat otherwise ends with it)."""
        self._stopping.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _run(self) -> None:
        idle = 0
        try:
            while not self._wait(self.interval) and not self._stopping.is_set():
                if self.active:
                    self.recover()
                if self._held:
                    idle = 0
                    try:
                        self.beat()
                    except Exception:  # a lost connection, a restarting database: next beat
                        log.warning("timers heartbeat: renewing leases failed", exc_info=True)
                        connections[stepper.database()].close()
                    continue
                if self.active:
                    continue  # between two batches of a firing loop: keep the connection
                connections[stepper.database()].close()  # no firing loop: hold nothing
                idle += 1
                with self._lock:
                    if idle >= IDLE_BEATS and not self._users:
                        self._thread = None  # the next running() starts another
                        return
        finally:
            connections.close_all()


_process: Heartbeat | None = None
_process_lock = threading.Lock()


def heartbeat() -> Heartbeat:
    """This process's heartbeat (created on first use; a forked child gets its own)."""
    global _process
    with _process_lock:
        if _process is None:
            _process = Heartbeat()
        return _process


def running() -> AbstractContextManager[Heartbeat]:
    """``heartbeat().running()``: what a firing loop (a drain, ``fire_timers``) runs under."""
    return heartbeat().running()


def _forget_after_fork() -> None:
    # The parent's thread does not exist in the child, and its locks may have been held at
    # the fork: the child starts from nothing.
    global _process, _process_lock
    _process, _process_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)
