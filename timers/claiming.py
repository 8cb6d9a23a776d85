"""Claims: which firer fires which due timers, for how long, and the attempts they spend.

A claim (``claim_batch``) takes due timer rows for one firer, never waiting for another
(SKIP LOCKED on PostgreSQL), and writes its lease, the per-fire deadline and its fence token
on them (``timers.leases``). A row an earlier claim left unsettled is an attempt spent
(``_spend_timed_out``): ended ``failed`` ("timed out") when it was the last one. A batch
that runs long renews the claim of what it has not fired yet (``_keep``). Correctness never
depends on the claim (``timers.firing``).
"""

from __future__ import annotations

import logging
import secrets
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import connections, transaction
from django.db.models import F, QuerySet

from statecharts import stepper
from statecharts.core.telemetry import TelemetryEvent
from timers import leases, observing, pacing
from timers.conf import timer_settings
from timers.models import Timer, TimerStatus

log = logging.getLogger("timers")


TIMED_OUT = "timed out"  # the reason of a timer whose last attempt timed out


@dataclass(slots=True)
class Claim:
    """What one claim took, for one firer."""

    fresh: list[Timer]  # due order; fired in chunks
    # Timers whose previous claim ended unsettled (an attempt spent: taken over), fired after
    # the fresh ones: in chunks on a first takeover, one by one from a second (``repeated``).
    suspects: list[Timer]
    failed: int  # timers whose last attempt timed out: ended failed by this claim
    claimed: datetime  # the clock the claim was taken at
    until: datetime  # the lease it wrote
    window: timedelta  # the shortest of the lease and the rows' per-fire timeouts
    token: int  # its fence token (claim_token on its rows): only this claim may settle them
    # Of the suspects, the one (at most) whose attempt before was taken over too (its firer
    # died, hung or timed out twice in a row): fired last and alone, so a timer that kills or
    # hangs every firer is isolated after its second death and takes no other timer down.
    repeated: list[Timer] = field(default_factory=list)

    @property
    def first_takeovers(self) -> list[Timer]:
        """The suspects taken over for the first time in a row: fired in chunks (they were
        claimed with a chunk that was never settled; all but the one a firer died in were
        never even attempted)."""
        repeated = {timer.pk for timer in self.repeated}
        return [timer for timer in self.suspects if timer.pk not in repeated]

    def units(self, size: int) -> list[list[Timer]]:
        """The claim's rows as its firer fires them, each unit in one transaction: the fresh
        rows in chunks of ``size`` (due order), then the first takeovers in chunks of
        ``size``, then each repeated takeover on its own."""
        units: list[list[Timer]] = []
        for rows in (self.fresh, self.first_takeovers):
            units += [rows[start : start + size] for start in range(0, len(rows), size)]
        return units + [[timer] for timer in self.repeated]

    @property
    def rows(self) -> list[Timer]:
        return sorted(self.fresh + self.suspects, key=lambda t: (t.due, t.pk))


def claim(now: datetime, limit: int, *, lease: timedelta | None = None) -> list[int]:
    """Claim up to ``limit`` due timers for this firer (their ids); see ``claim_rows``."""
    return [timer.pk for timer in claim_rows(now, limit, lease=lease)]


def claim_rows(now: datetime, limit: int, *, lease: timedelta | None = None) -> list[Timer]:
    """Claim up to ``limit`` due timers for this firer, never waiting for another firer.

    On PostgreSQL rows another firer is claiming are skipped (SKIP LOCKED); claims last a
    lease, so a firer that dies only delays its timers. The rows come back whole: what a
    timer delivers (event, target, context) never changes after it is written, so the
    firing transaction only has to re-check its status, under the execution's lock.

    The claim is an attempt of each row it takes: it writes the lease (``claimed_until``), the
    per-fire deadline (``fire_deadline``: now plus the row's ``fire_timeout_seconds``) and a
    fence token of its own (``claim_token``: see ``timers.leases``). A
    row still carrying an earlier claim was left unsettled by a firer that died, hung, or
    outlived its lease or its timeout: that attempt is spent here (``last_error`` says which
    bound passed first), and a timer whose last attempt it was is ended ``failed`` with
    reason "timed out" instead of being returned. It takes at most ``TIMER_FIRE_CHUNK`` such
    rows (the others are left to other firers' claims): on their first takeover in a row they
    are fired together as one chunk, after the fresh rows; of the rows taken over for the
    second time in a row (the attempt before this one was a takeover too) it takes at most
    one, fired last, on its own.
    """
    return claim_batch(now, limit, lease=lease).rows


def claim_batch(
    now: datetime,
    limit: int,
    *,
    lease: timedelta | None = None,
    fresh_only: bool = False,
    paced: bool = False,
) -> Claim:
    """``claim_rows``, telling the fresh rows from the suspects and counting the failed.

    ``fresh_only``: take only rows no earlier claim left unsettled (no suspects); a django-q2
    sweeper fires those itself and leaves suspects to drains (``timers.dispatch``).
    ``paced``: live rows first, then overdue ones up to this process's catch-up allowance
    (``timers.pacing``; unpaced when ``TIMER_CATCHUP_PER_SECOND`` is 0)."""
    lease = lease or leases.lease()
    database = stepper.database()
    until = now + lease
    token = secrets.randbits(63)
    failed: set[int] = set()
    suspects: set[int] = set()
    with transaction.atomic(using=database):
        walk_due_index(database)
        candidates = Timer.objects.using(database).claimable(now)
        if fresh_only:
            candidates = candidates.filter(claimed_until__isnull=True)
        if connections[database].features.has_select_for_update_skip_locked:
            candidates = candidates.select_for_update(skip_locked=True)
        timers = _take_paced(candidates, now, limit) if paced else list(candidates[:limit])
        stale = [timer for timer in timers if timer.claimed_until is not None]
        # Read before this claim spends the attempt (which writes last_error again).
        repeated = {timer.pk for timer in stale if _taken_over_before(timer)}
        taken = _share(stale, repeated, timer_settings.TIMER_FIRE_CHUNK)
        if len(taken) < len(stale):  # the rest stay claimable, for other firers' claims
            left = {timer.pk for timer in stale} - {timer.pk for timer in taken}
            timers = [timer for timer in timers if timer.pk not in left]
        stale = taken
        repeated &= {timer.pk for timer in stale}
        if stale:
            failed = _spend_timed_out(stale, now)
        suspects = {timer.pk for timer in stale} - failed
        kept = [timer for timer in timers if timer.pk not in failed]
        by_timeout: dict[int | None, list[Timer]] = defaultdict(list)
        for timer in kept:
            by_timeout[timer.fire_timeout_seconds].append(timer)
        for seconds, rows in by_timeout.items():  # one UPDATE, unless timeouts differ
            deadline = None if seconds is None else now + timedelta(seconds=seconds)
            Timer.objects.using(database).filter(pk__in=[t.pk for t in rows]).update(
                claimed_until=until, fire_deadline=deadline, claim_token=token
            )
            for timer in rows:
                timer.claimed_until, timer.fire_deadline = until, deadline
                timer.claim_token = token
    timeouts = [timedelta(seconds=s) for s in by_timeout if s is not None]
    return Claim(
        fresh=[timer for timer in kept if timer.pk not in suspects],
        suspects=[timer for timer in kept if timer.pk in suspects],
        failed=len(failed),
        claimed=now,
        until=until,
        window=min([lease, *timeouts]),
        token=token,
        repeated=[timer for timer in kept if timer.pk in suspects & repeated],
    )


def _share(stale: list[Timer], repeated: set[int], share: int) -> list[Timer]:
    """The suspects one claim takes (due order): at most ``share`` (``TIMER_FIRE_CHUNK``), so
    a dead firer's batch is shared among the live firers' claims instead of queued behind
    one; and of those taken over twice in a row (``repeated``) at most one, fired last and
    alone: were it a timer that kills every firer, its next death takes down no other
    timer's attempt (what the claim fired before it is committed by then)."""
    again = [timer for timer in stale if timer.pk in repeated][:1]
    first = [timer for timer in stale if timer.pk not in repeated][: max(0, share - len(again))]
    chosen = {timer.pk for timer in again + first}
    return [timer for timer in stale if timer.pk in chosen]


def _taken_over_before(timer: Timer) -> bool:
    """Whether the attempt before this row's unsettled one was a takeover too: its
    ``last_error``, still as the previous claim left it, is a timed-out attempt's
    (``_timed_out_error``; a raised delivery writes ``"<ExceptionClass>: ..."``). A row
    snoozed since its last takeover still carries it: it errs on the side of firing alone."""
    return (timer.last_error or "").startswith(TIMED_OUT + ": ")


def _take_paced(candidates: QuerySet[Timer], now: datetime, limit: int) -> list[Timer]:
    """Up to ``limit`` of ``candidates`` (claimable, locked as they are read): the live ones
    (due since ``timers.pacing.overdue_edge``) first, then the overdue ones, most overdue
    first, at most the process's catch-up allowance (``timers.pacing``); in due order. Two
    ranges of the due index, each read with its LIMIT. Unpaced (the first ``limit`` in due
    order) when pacing is off."""
    allowance = pacing.allowance(now)
    if allowance is None:
        return list(candidates[:limit])
    edge = pacing.overdue_edge(now)
    live = list(candidates.filter(due__gte=edge)[:limit])
    room = min(limit - len(live), allowance)
    overdue = list(candidates.filter(due__lt=edge)[:room]) if room > 0 else []
    pacing.spend(len(overdue))
    return overdue + live


def walk_due_index(database: str) -> None:
    """Make the rest of this transaction read due timers by walking the partial due index in
    ``(due, id)`` order (PostgreSQL; nothing elsewhere), so a ``LIMIT n`` query stops after n
    rows however many are due.

    Without it the plan depends on the table's statistics: when they say few pending rows are
    due (a table analyzed while nothing was due, or never analyzed), PostgreSQL reads *every*
    due row through a bitmap scan and sorts them all to return the first n, and a claim of
    100 timers out of a backlog of 10,000 then reads and sorts 10,000 rows (4.7 ms instead of
    0.2 ms at 3,000 due: benchmarks/JOURNAL.md, "PostgreSQL's share of a fire"): a burst's
    claims cost the server the square of its size. Transaction-local planner settings
    (``set_config(..., true)``): the firer's other statements plan as before."""
    conn = connections[database]
    if conn.vendor != "postgresql":
        return
    with conn.cursor() as cursor:
        cursor.execute(_WALK_DUE_INDEX)


_WALK_DUE_INDEX = (
    "SELECT set_config('enable_bitmapscan', 'off', true), set_config('enable_seqscan', 'off', true)"
)


def _spend_timed_out(stale: list[Timer], now: datetime) -> set[int]:
    """Spend the attempt of each row whose earlier claim ended unsettled; end those whose
    last attempt it was (``failed``, "timed out"). Returns the ids it ended.

    In the claim's transaction, under the rows' locks and only while they are pending; no
    execution lock is needed (nothing is delivered, and a fire or a cancel only ever acts on
    a pending row), so a transaction hung holding the execution cannot keep the timer from
    ending."""
    ended: set[int] = set()
    database = stepper.database()
    for timer in stale:
        error = _timed_out_error(timer)
        attempts = timer.attempts + 1
        rows = Timer.objects.using(database).filter(pk=timer.pk, status=TimerStatus.PENDING)
        if attempts >= _max_attempts(timer.delivery):
            rows.update(
                status=TimerStatus.FAILED,
                attempts=F("attempts") + 1,
                last_error=error,
                reason=TIMED_OUT,
                settled=now,
                claimed_until=None,
                fire_deadline=None,
            )
            ended.add(timer.pk)
            log.warning("timer %s: %s; failed after %s attempts", timer.pk, error, attempts)
            observing.timer_event(
                TelemetryEvent.TIMER_FAILED,
                timer,
                now=now,
                attempts=attempts,
                error=error,
                reason=TIMED_OUT,
            )
        else:
            rows.update(attempts=F("attempts") + 1, last_error=error)
            timer.attempts, timer.last_error = attempts, error
            log.warning("timer %s: %s; attempt %s spent", timer.pk, error, attempts)
            observing.timer_event(
                TelemetryEvent.TIMER_RETRIED,
                timer,
                now=now,
                attempts=attempts,
                error=error,
                reason=TIMED_OUT,
            )
    return ended


def _max_attempts(delivery: str) -> int:
    """The attempts a row of this delivery has (its retry policy's, the settings' by
    default): a timed-out attempt spends one of the same attempts as a raise."""
    from timers.delivery import policy_for

    attempts = policy_for(delivery).max_attempts
    assert attempts is not None
    return attempts


def _timed_out_error(timer: Timer) -> str:
    lease, deadline = timer.claimed_until, timer.fire_deadline
    assert lease is not None
    if deadline is not None and deadline < lease:
        return (
            f"timed out: the per-fire timeout ({timer.fire_timeout_seconds} s) passed at "
            f"{deadline.isoformat()} with the fire unsettled"
        )
    return f"timed out: the claim's lease ended at {lease.isoformat()} with the fire unsettled"


def _keep(batch: Claim, unit: list[Timer], rest: list[Timer], now: datetime | None) -> list[Timer]:
    """Before firing ``unit``: once half the batch's window has passed since its claim,
    renew the claim of every timer not fired yet (``rest``: lease and per-fire deadline from
    now; their attempt has not started), and return those of ``unit`` still ours (the claim's
    token, still claimed). A row whose claim another firer took over meanwhile is left to it."""
    clock = now or timer_settings.now()
    if clock < batch.claimed + batch.window / 2:
        return unit
    lease = batch.until - batch.claimed
    until = clock + lease
    renewed: set[int] = set()
    by_timeout: dict[int | None, list[int]] = defaultdict(list)
    for timer in rest:
        by_timeout[timer.fire_timeout_seconds].append(timer.pk)
    database = stepper.database()
    skip_locked = connections[database].features.has_select_for_update_skip_locked
    with transaction.atomic(using=database):
        for seconds, pks in by_timeout.items():
            deadline = None if seconds is None else clock + timedelta(seconds=seconds)
            mine = (
                Timer.objects.using(database)
                .pending_among(pks)
                .filter(claim_token=batch.token, claimed_until__isnull=False)
            )
            if skip_locked:  # a row locked now is being claimed (or fired) by another firer
                mine = mine.select_for_update(skip_locked=True)
            kept = set(mine.values_list("pk", flat=True))
            Timer.objects.using(database).filter(pk__in=kept).update(
                claimed_until=until, fire_deadline=deadline
            )
            renewed |= kept
        missed = [timer.pk for timer in unit if timer.pk not in renewed]
        if missed and skip_locked:
            # Skipped while locked by someone else for an instant: the heartbeat renewing
            # them (still ours), or another firer's claim taking them over (the fence then
            # refuses our take). Ours if the token is.
            renewed |= set(
                Timer.objects.using(database)
                .pending_among(missed)
                .filter(claim_token=batch.token)
                .exclude(claimed_until=None)
                .values_list("pk", flat=True)
            )
    batch.claimed, batch.until = clock, until
    return [timer for timer in unit if timer.pk in renewed]
