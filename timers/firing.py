"""Firing due timers: claim, lock (execution, then timer), check liveness, deliver, settle.

``fire_due`` is what every firer runs: the ``fire_timers`` command, the django-q2 tasks and
the tests. Correctness never depends on the claim: any firer may fire any pending timer, and
a timer row only ever leaves ``pending`` through a conditional UPDATE (``WHERE status =
'pending'``) under its row lock, taken under its execution's lock when it is delivered, so a
fire and a cancel of one row (the cancel runs inside a step, which holds the same lock) can
never both succeed, and two firers never deliver one timer twice. Claims keep concurrent
firers from doing the same work, and count attempts: a claim is an attempt of each timer it
takes, and a claim that ended unsettled (its lease ran out, or its per-fire timeout passed,
whichever came first) is an attempt spent; the next claim records it, and ends the timer
``failed`` ("timed out") when it was the last one.

What a fired timer does is its delivery's business (``timers.delivery``: a name on the row,
looked up in ``TIMER_DELIVERIES``; by default the stepper's ``perform_delivery``).
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.apps import apps
from django.db import connections, transaction
from django.db.models import F

from statecharts import stepper
from statecharts.core.plan import Instruction, InstructionKind, delivery
from statecharts.core.telemetry import TelemetryEvent
from statecharts.models import Execution
from statecharts.policies import codecs
from statecharts.statuses import TimerRule, rules
from statecharts.work import WorkSource
from timers import leases, observing
from timers.conf import timer_settings
from timers.delivery import Delivery, DeliveryUnavailable, Fire, Snooze, resolve
from timers.models import Timer, TimerStatus

log = logging.getLogger("timers")

FIRED = "fired"
DISCARDED = "discarded"
SNOOZED = "snoozed"
RETRYING = "retrying"
FAILED = "failed"
SKIPPED = "skipped"  # settled or taken by someone else meanwhile

TIMED_OUT = "timed out"  # the reason of a timer whose last attempt timed out


class Undecodable(Exception):
    """A timer row whose event or target cannot be read back."""


class InvalidAnswer(Exception):
    """A delivery answered something other than None or ``Snooze(positive int)``: it is
    treated as a raise (rolled back, the attempt spent)."""


@dataclass(slots=True)
class FireReport:
    outcomes: dict[str, int] = field(default_factory=dict)

    def add(self, outcome: str) -> None:
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    @property
    def fired(self) -> int:
        return self.outcomes.get(FIRED, 0)

    @property
    def handled(self) -> int:
        return sum(n for outcome, n in self.outcomes.items() if outcome != SKIPPED)

    def __str__(self) -> str:
        parts = [f"{n} {outcome}" for outcome, n in sorted(self.outcomes.items())]
        return ", ".join(parts) or "nothing due"


@dataclass(slots=True)
class Claim:
    """What one claim took, for one firer."""

    fresh: list[Timer]  # due order; fired in chunks
    # Timers whose previous claim ended unsettled (an attempt spent): fired one by one, after
    # the others, so a timer that kills or hangs its firer cannot take a chunk down again.
    suspects: list[Timer]
    failed: int  # timers whose last attempt timed out: ended failed by this claim
    claimed: datetime  # the clock the claim was taken at
    until: datetime  # the lease it wrote
    window: timedelta  # the shortest of the lease and the rows' per-fire timeouts
    token: int  # its fence token (claim_token on its rows): only this claim may settle them

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
    rows (they are fired one by one; the others are left to other firers' claims).
    """
    return claim_batch(now, limit, lease=lease).rows


def claim_batch(
    now: datetime, limit: int, *, lease: timedelta | None = None, fresh_only: bool = False
) -> Claim:
    """``claim_rows``, telling the fresh rows from the suspects and counting the failed.

    ``fresh_only``: take only rows no earlier claim left unsettled (no suspects); a django-q2
    sweeper fires those itself and leaves suspects to drains (``timers.dispatch``)."""
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
        timers = list(candidates[:limit])
        stale = [timer for timer in timers if timer.claimed_until is not None]
        share = timer_settings.TIMER_FIRE_CHUNK
        if len(stale) > share:
            # Suspects are fired one by one: a dead firer's batch is shared among the live
            # firers' claims (the rest stay claimable) instead of queued behind one of them.
            left = {timer.pk for timer in stale[share:]}
            stale = stale[:share]
            timers = [timer for timer in timers if timer.pk not in left]
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
    )


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
        if attempts >= timer_settings.TIMER_MAX_ATTEMPTS:
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


def _timed_out_error(timer: Timer) -> str:
    lease, deadline = timer.claimed_until, timer.fire_deadline
    assert lease is not None
    if deadline is not None and deadline < lease:
        return (
            f"timed out: the per-fire timeout ({timer.fire_timeout_seconds} s) passed at "
            f"{deadline.isoformat()} with the fire unsettled"
        )
    return f"timed out: the claim's lease ended at {lease.isoformat()} with the fire unsettled"


def fire_due(
    *, now: datetime | None = None, limit: int | None = None, fresh_only: bool = False
) -> FireReport:
    """Claim and fire one batch of due timers. Returns what happened to each.

    The batch's fresh timers are fired in chunks of ``TIMER_FIRE_CHUNK`` timers, each chunk in
    one transaction (``fire_rows``); its suspects (their previous claim ended unsettled) then
    one by one (``fire_row``). Without ``now`` each chunk reads the clock when it starts, so
    its steps are stamped with the time they really ran, not the time the batch was claimed;
    and a batch that runs long renews the claim of what it has not fired yet before half its
    window has passed (``_keep``), so a live firer never lets its own timers time out. Under
    a running heartbeat (``timers.leases``: django-q2's drains, ``fire_timers``) the batch's
    leases are renewed meanwhile too, also during a long chunk. ``fresh_only`` claims no
    suspects (``claim_batch``).
    """
    limit = limit or timer_settings.TIMER_BATCH
    report = FireReport()
    batch = claim_batch(now or timer_settings.now(), limit, fresh_only=fresh_only)
    for _ in range(batch.failed):
        report.add(FAILED)
    size = timer_settings.TIMER_FIRE_CHUNK
    units: list[list[Timer]] = [
        batch.fresh[start : start + size] for start in range(0, len(batch.fresh), size)
    ]
    units += [[timer] for timer in batch.suspects]
    held = leases.heartbeat().holding(batch.token, [t.pk for t in batch.rows], batch.claimed)
    with held if now is None else contextlib.nullcontext():  # (the heartbeat's clock is real)
        for index, unit in enumerate(units):
            if index:
                unit = _keep(batch, unit, [t for rest in units[index:] for t in rest], now)
            for outcome in fire_rows(unit, now=now):
                report.add(outcome)
    if apps.is_installed("routes"):  # delayed route sends: the same loop (timers.routequeue)
        from timers import routequeue

        for outcome in routequeue.fire_due(now=now, limit=limit):
            report.add(outcome)
    return report


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


def fire_all_due(*, now: datetime | None = None, batch: int | None = None) -> FireReport:
    """Fire batches until nothing is due at ``now`` (``fire_timers --once``)."""
    total = FireReport()
    while True:
        report = fire_due(now=now, limit=batch)
        for outcome, n in report.outcomes.items():
            total.outcomes[outcome] = total.outcomes.get(outcome, 0) + n
        if not report.outcomes:
            return total


def fire(timer_id: int, *, now: datetime | None = None) -> str:
    """Fire one timer if it is still pending and due; returns the outcome. Not a claim's
    fire: whoever holds a claim on the row, this fire does not (no fence), and the first
    of the two to take the row under its execution's lock fires it."""
    timer = Timer.objects.using(stepper.database()).filter(pk=timer_id).first()
    if timer is None or timer.status != TimerStatus.PENDING:
        return SKIPPED
    timer.claim_token = None
    return fire_row(timer, now=now)


def fire_row(timer: Timer, *, now: datetime | None = None) -> str:
    """Fire a timer read earlier (e.g. claimed): everything is decided again under the lock.

    One transaction: lock the execution (the lock order of every step: execution, then its
    timers), check liveness, take the row (pending -> fired, only if still pending and due:
    a cancel that committed first wins), deliver. A delivery that raises rolls all of it
    back; the attempt is then recorded in a transaction of its own.
    """
    now = now or timer_settings.now()
    outbox: list[int] = []
    try:
        with transaction.atomic(using=stepper.database(), durable=True):
            outcome = _fire_locked(timer, now, outbox)
    except Exception as exc:  # the delivery's own failure, recorded on the row
        outcome = _retry_or_fail(timer, now, exc)
        log.warning("timer %s: delivery failed (%s): %s", timer.pk, outcome, exc)
        return outcome
    if outbox:
        stepper.deliver(outbox)
    return outcome


def fire_rows(timers: list[Timer], *, now: datetime | None = None) -> list[str]:
    """Fire timers read earlier (claimed) in ONE transaction; their outcomes, in order.

    Optimistic: the outcome of each timer is exactly the one ``fire_row`` would give it, fired
    one after the other in this order (``claim_rows``' order: due, id). If anything in the
    batch raises (a delivery, a deadlock, a lost connection), the whole transaction rolls back
    and every timer of the batch is fired again on its own by ``fire_row``, which records a
    failed delivery on its own timer only.

    On PostgreSQL the steps' own writes (each execution's UPDATE and its history INSERT) are
    held and sent as one statement for the chunk (``stepper.batched_writes``), before any
    other statement of the transaction and before its commit: the same rows, the same locks
    (taken by ``lock_many`` first, in id order), one round trip instead of one per fire.
    """
    if len(timers) <= 1:
        return [fire_row(timer, now=now) for timer in timers]
    fire_now = now or timer_settings.now()
    outbox: list[int] = []
    try:
        with (
            transaction.atomic(using=stepper.database(), durable=True),
            stepper.batched_writes(len(timers)),
        ):
            outcomes = _fire_batch_locked(timers, fire_now, outbox)
    except Exception as exc:  # anything: the timers are then fired one by one
        log.info("timers %s: batch rolled back (%s), firing one by one", len(timers), exc)
        return [fire_row(timer, now=now) for timer in timers]
    if outbox:
        stepper.deliver(outbox)
    return outcomes


def _fire_batch_locked(timers: list[Timer], now: datetime, outbox: list[int]) -> list[str]:
    """``_fire_locked`` for each timer in turn, with one lock statement and one take UPDATE.

    The executions of all the timers are locked first, with one ``SELECT ... WHERE id IN
    (...) ORDER BY id FOR UPDATE``. Lock order: every batch firer takes its locks in
    ascending id order, and takes them all before it waits for anything else (the timer rows
    it then updates belong to these executions, and a step or a cancel only touches them
    under their execution's lock; a claim holds timer rows for an instant, never waits for a
    lock and holds no execution lock). A step holds exactly one execution lock, and a lone
    fire (``fire_row``) too. So a waiter always holds only ids lower than the one it waits
    for, and there is no cycle: no deadlock. (Were there one, PostgreSQL would abort one
    transaction, and its batch would fall back to ``fire_row``.)

    Under those locks nothing but this transaction can change the executions or their
    timers, so deciding every timer up front is the same as deciding it in turn, except
    for a timer whose execution an earlier timer of this batch steps: the step may finish
    the execution or cancel the timer. Only each execution's first timer is therefore
    decided up front (liveness, then one conditional UPDATE takes the lot); any later timer
    of the same execution goes through ``_fire_with`` after the earlier steps, seeing their
    effects (``step_locked`` updates the locked instance in place).
    """
    token = _token(timers)
    with observing.LockTimer():
        executions = stepper.lock_many({timer.execution_id for timer in timers})
    first: dict[int, Timer] = {}
    for timer in timers:
        first.setdefault(timer.execution_id, timer)
    decided: dict[int, str] = {}  # first timers settled or snoozed without delivery
    ready: dict[int, tuple[Instruction, Delivery]] = {}
    resolved: dict[str, Delivery | DeliveryUnavailable] = {}
    for timer in first.values():
        prepared = _prepare(timer, executions.get(timer.execution_id), now, resolved)
        if isinstance(prepared, str):
            decided[timer.pk] = prepared
        else:
            ready[timer.pk] = prepared
    taken = _take(list(ready), now, token)
    outcomes: list[str] = []
    for timer in timers:
        if first[timer.execution_id] is not timer:
            execution = executions.get(timer.execution_id)
            outcomes.append(_fire_with(execution, timer, now, outbox, resolved))
        elif timer.pk in decided:
            outcomes.append(decided[timer.pk])
        elif timer.pk not in taken:
            outcomes.append(SKIPPED)  # cancelled, fired or rescheduled since it was read
        else:
            instruction, delivery = ready[timer.pk]
            execution = executions[timer.execution_id]
            outcomes.append(_deliver(execution, timer, instruction, delivery, now, outbox))
    return outcomes


def _take(pks: list[int], now: datetime, token: int | None) -> set[int]:
    """Mark these timers fired, those still pending and due (and still claimed by ``token``:
    the fence); returns the ids it marked."""
    return _settle_ids(pks, TimerStatus.FIRED, now, "", token)


def _token(timers: list[Timer]) -> int | None:
    """The fence token of a chunk's timers: one claim's (or none: read without a claim)."""
    tokens = {timer.claim_token for timer in timers}
    if len(tokens) != 1:
        raise ValueError(f"a chunk's timers come from one claim, not {len(tokens)}")
    return tokens.pop()


def _fire_locked(timer: Timer, now: datetime, outbox: list[int]) -> str:
    return _fire_with(_lock_execution(timer.execution_id), timer, now, outbox, {})


def _prepare(
    timer: Timer,
    execution: Execution | None,
    now: datetime,
    resolved: dict[str, Delivery | DeliveryUnavailable],
) -> str | tuple[Instruction, Delivery]:
    """Everything decided before the take, under the execution's lock: its liveness, the
    row's decoding, its delivery's resolution. The outcome when the timer was settled or
    snoozed here, else what to deliver and who delivers it."""
    outcome = _liveness(timer, execution, now)
    if outcome is not None:
        return outcome
    try:
        instruction = _decode(timer)
    except Undecodable as exc:  # a fact about the row: no retry makes it readable
        return _settle(timer, TimerStatus.DISCARDED, now, f"undecodable: {exc}")
    except codecs.CodecUnavailable as exc:
        # The row's codec, or the key it was written under, is not deployed here (yet): a
        # fact about this deployment, like an unresolvable delivery. No attempt spent.
        return _snooze(timer, now, reason=f"{exc}: snoozed")
    delivery = resolved.get(timer.delivery)
    if delivery is None:
        try:
            delivery = resolve(timer.delivery)
        except DeliveryUnavailable as exc:
            delivery = exc
        resolved[timer.delivery] = delivery
    if isinstance(delivery, DeliveryUnavailable):
        # A fact about this deployment (a rolling deploy, a setting not yet changed), not
        # about the row: try again later, no attempt spent.
        return _snooze(timer, now, reason=f"{delivery}: snoozed")
    return instruction, delivery


def _liveness(timer: Timer, execution: Execution | None, now: datetime) -> str | None:
    """Settle a timer whose execution cannot take it now (the outcome), else None: what its
    status's rule says (``statecharts.statuses``): deliver, snooze (held: no attempt spent,
    the status may change back) or discard (finished: spec 6.2)."""
    if execution is None:
        return _settle(timer, TimerStatus.DISCARDED, now, "execution missing")
    rule = rules(execution.status).timers
    if rule is TimerRule.DISCARD:
        reason = f"execution {execution.status} before the timer was due"
        return _settle(timer, TimerStatus.DISCARDED, now, reason)
    if rule is TimerRule.SNOOZE:
        return _snooze(timer, now, reason=_held(execution))
    return None


def _held(execution: Execution) -> str:
    """The snooze reason of a timer held by its execution's status (statecharts.statuses)."""
    return f"execution {str(execution.status).replace('_', ' ')}: snoozed"


def _fire_with(
    execution: Execution | None,
    timer: Timer,
    now: datetime,
    outbox: list[int],
    resolved: dict[str, Delivery | DeliveryUnavailable],
) -> str:
    """Everything of a fire after the lock: liveness, decoding, delivery, take, deliver."""
    prepared = _prepare(timer, execution, now, resolved)
    if isinstance(prepared, str):
        return prepared
    assert execution is not None
    if _settle(timer, TimerStatus.FIRED, now, "") == SKIPPED:
        return SKIPPED  # cancelled, fired or rescheduled since it was read
    instruction, delivery = prepared
    return _deliver(execution, timer, instruction, delivery, now, outbox)


def _lock_execution(execution_id: int) -> Execution | None:
    try:
        with observing.LockTimer():
            return stepper.lock(execution_id)
    except Execution.DoesNotExist:
        return None


def _decode(timer: Timer) -> Instruction:
    """The delivery the planner makes of the stored target and event (the same rule as for an
    immediate send), the event's data decoded with the row's payload codec; a row that can
    never be read is ``Undecodable``, one whose codec or key is not deployed here raises
    ``codecs.CodecUnavailable``."""
    try:
        event = codecs.decode_event(timer.event, timer.codec)
    except codecs.CorruptPayload as exc:
        raise Undecodable(str(exc)) from exc
    instruction = delivery(timer.target, event)
    if instruction.kind is InstructionKind.UNROUTABLE:
        raise Undecodable(instruction.reason)
    return instruction


def _deliver(
    execution: Execution,
    timer: Timer,
    instruction: Instruction,
    delivery: Delivery,
    now: datetime,
    outbox: list[int],
) -> str:
    """Hand the taken timer to its delivery (by default a step of this execution, an outbox
    row, or an app's performer, through the stepper's public API), in the fire's
    transaction, and act on its answer (``timers.delivery``)."""
    try:
        answer = delivery.deliver(Fire(timer, execution, instruction, now, outbox))
    except stepper.StepRefused:
        # The step was refused and recorded (the position no longer matches its chart, its
        # data cannot be stepped, or the step went over a budget and was rolled back): the
        # timer is held with the status that holds it, never lost.
        return _snooze(timer, now, taken=True, reason=_held(execution))
    except stepper.NoPerformer as exc:
        # A fact about this deployment (e.g. the app that delivers to invoked children is not
        # installed here yet), not about the row: try again later, no attempt spent.
        return _snooze(timer, now, taken=True, reason=f"{exc}: snoozed")
    if answer is None:
        observing.timer_event(
            TelemetryEvent.TIMER_FIRED,
            timer,
            now=now,
            session_id=execution.session_id,
            attempts=timer.attempts,
        )
        return FIRED
    if isinstance(answer, Snooze) and answer.valid:
        said = f": {answer.reason}" if answer.reason else ""
        reason = f"delivery {timer.delivery!r} asked to snooze {answer.seconds} s{said}"
        return _snooze(timer, now, taken=True, reason=reason, seconds=answer.seconds)
    # Rolls the fire back; the attempt is spent as for any raise.
    raise InvalidAnswer(
        f"delivery {timer.delivery!r} answered {answer!r}: not None or Snooze(seconds) with "
        "seconds a positive int"
    )


def _still_pending(timer: Timer, now: datetime) -> Any:
    """The row, if it is still pending and due (the caller holds the execution's lock), and
    still carries the claim ``timer`` was read with (the fence: see ``timers.leases``)."""
    rows = Timer.objects.using(stepper.database()).filter(
        pk=timer.pk, status=TimerStatus.PENDING, due__lte=now
    )
    return rows if timer.claim_token is None else rows.filter(claim_token=timer.claim_token)


def _settle(timer: Timer, status: str, now: datetime, reason: str) -> str:
    """Settle one timer if it is still pending and due (the caller holds its execution's
    lock); SKIPPED when it was not."""
    if not _settle_ids([timer.pk], status, now, reason, timer.claim_token):
        return SKIPPED
    if status == TimerStatus.DISCARDED:
        observing.timer_event(TelemetryEvent.TIMER_DISCARDED, timer, now=now, reason=reason)
    return {TimerStatus.FIRED: FIRED, TimerStatus.DISCARDED: DISCARDED}.get(status, status)


def _settle_ids(
    pks: list[int], status: str, now: datetime, reason: str, token: int | None
) -> set[int]:
    """``Timer.objects.filter(pk__in=pks, status="pending", due__lte=now).update(status=...,
    reason=..., settled=now, claimed_until=None)``, and ``claim_token=token`` in the filter
    unless ``token`` is None (the fence), built once per vendor, row count and fence (it
    runs on every fire), returning the ids it settled. One statement with RETURNING where the
    database has it; else one conditional UPDATE per row (its row count tells).

    The rows are found by their primary key, never through the partial due index: the
    status is compared as ``status || ''``, which the planner cannot match with the index's
    ``status = 'pending'``. With statistics that expect few due rows it would otherwise read
    every due row of the backlog through that index for each chunk's 20 (benchmarks/JOURNAL.md,
    "PostgreSQL's share of a fire")."""
    if not pks:
        return set()
    conn = connections[stepper.database()]
    returning = conn.vendor == "postgresql"
    size = len(pks) if returning else 1
    fenced = token is not None
    key = (conn.vendor, size, fenced)
    sql = _settle_sql.get(key)
    if sql is None:
        quote = conn.ops.quote_name
        marks = ", ".join(["%s"] * size)
        sql = _settle_sql[key] = (
            f"UPDATE {quote(Timer._meta.db_table)} SET {quote('status')} = %s,"
            f" {quote('reason')} = %s, {quote('settled')} = %s, {quote('claimed_until')} = NULL"
            f" WHERE {quote('id')} IN ({marks}) AND ({quote('status')} || '') = %s"
            f" AND {quote('due')} <= %s"
            + (f" AND {quote('claim_token')} = %s" if fenced else "")
            + (f" RETURNING {quote('id')}" if returning else "")
        )
    when = _DATETIME.get_db_prep_save(now, conn)
    head, tail = [status, reason[:300], when], [TimerStatus.PENDING, when]
    if fenced:
        tail.append(token)
    with conn.cursor() as cursor:
        if returning:
            cursor.execute(sql, [*head, *pks, *tail])
            return {row[0] for row in cursor.fetchall()}
        settled = set()
        for pk in pks:
            cursor.execute(sql, [*head, pk, *tail])
            if cursor.rowcount:
                settled.add(pk)
        return settled


_settle_sql: dict[tuple[str, int, bool], str] = {}
_DATETIME = Timer._meta.get_field("settled")


def _snooze(
    timer: Timer,
    now: datetime,
    *,
    reason: str,
    taken: bool = False,
    seconds: int | None = None,
) -> str:
    """Try again later (``seconds``, default ``TIMER_SNOOZE_SECONDS``); no attempt is spent:
    nothing was tried, or the delivery said "not now"."""
    delay = timedelta(seconds=timer_settings.TIMER_SNOOZE_SECONDS if seconds is None else seconds)
    rows = (
        Timer.objects.using(stepper.database()).filter(pk=timer.pk)
        if taken
        else _still_pending(timer, now)
    )
    snoozed = rows.update(
        status=TimerStatus.PENDING,
        settled=None,
        due=now + delay,
        claimed_until=None,
        fire_deadline=None,
        reason=reason[:300],
    )
    if not snoozed:
        return SKIPPED
    observing.timer_event(
        TelemetryEvent.TIMER_SNOOZED, timer, now=now, reason=reason, seconds=delay.total_seconds()
    )
    return SNOOZED


def _retry_or_fail(timer: Timer, now: datetime, exc: Exception) -> str:
    """Record a failed delivery: retry later with backoff, or give up after the last attempt."""
    with transaction.atomic(using=stepper.database(), durable=True):
        _lock_execution(timer.execution_id)  # the same lock order as every step
        return _record_attempt(timer, now, exc)


def _record_attempt(timer: Timer, now: datetime, exc: Exception) -> str:
    rows = _still_pending(timer, now)
    current = rows.values_list("attempts", flat=True).first()
    if current is None:
        return SKIPPED  # settled by someone else meanwhile
    attempts = current + 1
    error = f"{type(exc).__name__}: {exc}"
    if attempts >= timer_settings.TIMER_MAX_ATTEMPTS:
        rows.update(
            status=TimerStatus.FAILED,
            attempts=F("attempts") + 1,
            last_error=error,
            reason=f"delivery failed {attempts} times",
            settled=now,
            claimed_until=None,
            fire_deadline=None,
        )
        observing.timer_event(
            TelemetryEvent.TIMER_FAILED,
            timer,
            now=now,
            attempts=attempts,
            error=error,
            reason=f"delivery failed {attempts} times",
        )
        return FAILED
    backoff = timer_settings.TIMER_RETRY_SECONDS * 2 ** (attempts - 1)
    rows.update(
        attempts=F("attempts") + 1,
        last_error=error,
        due=now + timedelta(seconds=backoff),
        claimed_until=None,
        fire_deadline=None,
    )
    observing.timer_event(
        TelemetryEvent.TIMER_RETRIED,
        timer,
        now=now,
        attempts=attempts,
        error=error,
        retry_in_s=backoff,
    )
    return RETRYING


def _next_due() -> datetime | None:
    due: datetime | None = (
        Timer.objects.using(stepper.database())
        .pending()
        .order_by("due", "id")
        .values_list("due", flat=True)
        .first()
    )
    if apps.is_installed("routes"):
        from timers import routequeue

        route_due = routequeue.next_due()
        if route_due is not None and (due is None or route_due < due):
            return route_due
    return due


# Due timers, for tools that run pending work themselves (statecharts.work).
timer_work = WorkSource(
    "timers", next_due=_next_due, run_due=lambda now: fire_all_due(now=now).handled
)
