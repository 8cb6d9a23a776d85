"""Firing due timers: claim, lock (execution, then timer), check liveness, deliver, settle.

``fire_due`` is what every firer runs: the ``fire_timers`` command, the django-q2 tasks and
the tests. Correctness never depends on the claim: any firer may fire any pending timer, and
the timer row is settled under the execution lock, so a fire and a cancel of one row (the
cancel runs inside a step, which holds the same lock) can never both succeed, and two firers
never deliver one timer twice. Claims only keep concurrent firers from doing the same work.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import connections, transaction
from django.db.models import F

from statecharts import stepper
from statecharts.core.plan import Instruction, InstructionKind, delivery
from statecharts.models import Execution
from statecharts.statuses import TimerRule, rules
from statecharts.work import WorkSource
from timers.conf import timer_settings
from timers.models import Timer, TimerStatus

log = logging.getLogger("timers")

FIRED = "fired"
DISCARDED = "discarded"
SNOOZED = "snoozed"
RETRYING = "retrying"
FAILED = "failed"
SKIPPED = "skipped"  # settled or taken by someone else meanwhile



class Undecodable(Exception):
    """A timer row whose event or target cannot be read back."""


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


def claim(now: datetime, limit: int, *, lease: timedelta | None = None) -> list[int]:
    """Claim up to ``limit`` due timers for this firer (their ids); see ``claim_rows``."""
    return [timer.pk for timer in claim_rows(now, limit, lease=lease)]


def claim_rows(now: datetime, limit: int, *, lease: timedelta | None = None) -> list[Timer]:
    """Claim up to ``limit`` due timers for this firer, never waiting for another firer.

    On PostgreSQL rows another firer is claiming are skipped (SKIP LOCKED); claims last a
    lease, so a firer that dies only delays its timers. The rows come back whole: what a
    timer delivers (event, target, context) never changes after it is written, so the
    firing transaction only has to re-check its status, under the execution's lock.
    """
    lease = lease or timedelta(seconds=timer_settings.TIMER_LEASE_SECONDS)
    database = stepper.database()
    with transaction.atomic(using=database):
        candidates = Timer.objects.using(database).claimable(now)
        if connections[database].features.has_select_for_update_skip_locked:
            candidates = candidates.select_for_update(skip_locked=True)
        timers = list(candidates[:limit])
        if timers:
            Timer.objects.using(database).filter(pk__in=[t.pk for t in timers]).update(
                claimed_until=now + lease
            )
    return timers


def fire_due(*, now: datetime | None = None, limit: int | None = None) -> FireReport:
    """Claim and fire one batch of due timers. Returns what happened to each.

    The batch is fired in chunks of ``TIMER_FIRE_CHUNK`` timers, each chunk in one transaction
    (``fire_rows``). Without ``now`` each chunk reads the clock when it starts, so its steps
    are stamped with the time they really ran, not the time the batch was claimed.
    """
    limit = limit or timer_settings.TIMER_BATCH
    report = FireReport()
    timers = claim_rows(now or timer_settings.now(), limit)
    chunk = timer_settings.TIMER_FIRE_CHUNK
    for start in range(0, len(timers), chunk):
        for outcome in fire_rows(timers[start : start + chunk], now=now):
            report.add(outcome)
    return report


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
    """Fire one timer if it is still pending and due; returns the outcome."""
    timer = Timer.objects.using(stepper.database()).filter(pk=timer_id).first()
    if timer is None or timer.status != TimerStatus.PENDING:
        return SKIPPED
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
    """
    if len(timers) <= 1:
        return [fire_row(timer, now=now) for timer in timers]
    fire_now = now or timer_settings.now()
    outbox: list[int] = []
    try:
        with transaction.atomic(using=stepper.database(), durable=True):
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
    executions = stepper.lock_many({timer.execution_id for timer in timers})
    first: dict[int, Timer] = {}
    for timer in timers:
        first.setdefault(timer.execution_id, timer)
    decided: dict[int, str] = {}  # first timers settled without delivery
    deliveries: dict[int, Instruction] = {}
    for timer in first.values():
        execution = executions.get(timer.execution_id)
        outcome = _liveness(timer, execution, now)
        if outcome is not None:
            decided[timer.pk] = outcome
            continue
        try:
            deliveries[timer.pk] = _decode(timer)
        except Undecodable as exc:
            decided[timer.pk] = _settle(timer, TimerStatus.DISCARDED, now, f"undecodable: {exc}")
    taken = _take(list(deliveries), now)
    outcomes: list[str] = []
    for timer in timers:
        if first[timer.execution_id] is not timer:
            execution = executions.get(timer.execution_id)
            outcomes.append(_fire_with(execution, timer, now, outbox))
        elif timer.pk in decided:
            outcomes.append(decided[timer.pk])
        elif timer.pk not in taken:
            outcomes.append(SKIPPED)  # cancelled, fired or rescheduled since it was read
        else:
            execution = executions[timer.execution_id]
            outcomes.append(_deliver(execution, timer, deliveries[timer.pk], now, outbox))
    return outcomes


def _take(pks: list[int], now: datetime) -> set[int]:
    """Mark these timers fired, those still pending and due; returns the ids it marked."""
    return _settle_ids(pks, TimerStatus.FIRED, now, "")


def _fire_locked(timer: Timer, now: datetime, outbox: list[int]) -> str:
    return _fire_with(_lock_execution(timer.execution_id), timer, now, outbox)


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
    return f"execution {str(execution.status).replace('_', ' ')}: snoozed"


def _fire_with(execution: Execution | None, timer: Timer, now: datetime, outbox: list[int]) -> str:
    """Everything of a fire after the lock: liveness, take, deliver."""
    outcome = _liveness(timer, execution, now)
    if outcome is not None:
        return outcome
    assert execution is not None
    try:
        instruction = _decode(timer)
    except Undecodable as exc:
        return _settle(timer, TimerStatus.DISCARDED, now, f"undecodable: {exc}")
    if _settle(timer, TimerStatus.FIRED, now, "") == SKIPPED:
        return SKIPPED  # cancelled, fired or rescheduled since it was read
    return _deliver(execution, timer, instruction, now, outbox)


def _lock_execution(execution_id: int) -> Execution | None:
    try:
        return stepper.lock(execution_id)
    except Execution.DoesNotExist:
        return None


def _decode(timer: Timer) -> Instruction:
    """The delivery the planner makes of the stored target and event (the same rule as for an
    immediate send); a row it cannot read is ``Undecodable``."""
    instruction = delivery(timer.target, timer.event)
    if instruction.kind is InstructionKind.UNROUTABLE:
        raise Undecodable(instruction.reason)
    return instruction


def _deliver(
    execution: Execution,
    timer: Timer,
    instruction: Instruction,
    now: datetime,
    outbox: list[int],
) -> str:
    """Perform the delivery through the stepper's public API (a step of this execution, an
    outbox row, or an app's performer), in the fire's transaction."""
    try:
        stepper.perform_delivery(execution, instruction, now, outbox, timer.context)
    except stepper.StepRefused:
        # The step was refused and recorded (the position no longer matches its chart, its
        # data cannot be stepped, or the step went over a budget and was rolled back): the
        # timer is held with the status that holds it, never lost.
        return _snooze(timer, now, taken=True, reason=_held(execution))
    except stepper.NoPerformer as exc:
        # A fact about this deployment (e.g. the app that delivers to invoked children is not
        # installed here yet), not about the row: try again later, no attempt spent.
        return _snooze(timer, now, taken=True, reason=f"{exc}: snoozed")
    return FIRED


def _still_pending(timer: Timer, now: datetime) -> Any:
    """The row, if it is still pending and due (the caller holds the execution's lock)."""
    return Timer.objects.using(stepper.database()).filter(
        pk=timer.pk, status=TimerStatus.PENDING, due__lte=now
    )


def _settle(timer: Timer, status: str, now: datetime, reason: str) -> str:
    """Settle one timer if it is still pending and due (the caller holds its execution's
    lock); SKIPPED when it was not."""
    if not _settle_ids([timer.pk], status, now, reason):
        return SKIPPED
    return {TimerStatus.FIRED: FIRED, TimerStatus.DISCARDED: DISCARDED}.get(status, status)


def _settle_ids(pks: list[int], status: str, now: datetime, reason: str) -> set[int]:
    """``Timer.objects.filter(pk__in=pks, status="pending", due__lte=now).update(status=...,
    reason=..., settled=now, claimed_until=None)``, built once per vendor and row count (it
    runs on every fire), returning the ids it settled. One statement with RETURNING where the
    database has it; else one conditional UPDATE per row (its row count tells)."""
    if not pks:
        return set()
    conn = connections[stepper.database()]
    returning = conn.vendor == "postgresql"
    size = len(pks) if returning else 1
    key = (conn.vendor, size)
    sql = _settle_sql.get(key)
    if sql is None:
        quote = conn.ops.quote_name
        marks = ", ".join(["%s"] * size)
        sql = _settle_sql[key] = (
            f"UPDATE {quote(Timer._meta.db_table)} SET {quote('status')} = %s,"
            f" {quote('reason')} = %s, {quote('settled')} = %s, {quote('claimed_until')} = NULL"
            f" WHERE {quote('id')} IN ({marks}) AND {quote('status')} = %s"
            f" AND {quote('due')} <= %s" + (f" RETURNING {quote('id')}" if returning else "")
        )
    when = _DATETIME.get_db_prep_save(now, conn)
    head, tail = [status, reason[:300], when], [TimerStatus.PENDING, when]
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


_settle_sql: dict[tuple[str, int], str] = {}
_DATETIME = Timer._meta.get_field("settled")


def _snooze(timer: Timer, now: datetime, *, reason: str, taken: bool = False) -> str:
    """Try again later; no attempt is spent: nothing was tried."""
    delay = timedelta(seconds=timer_settings.TIMER_SNOOZE_SECONDS)
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
        reason=reason[:300],
    )
    return SNOOZED if snoozed else SKIPPED


def _retry_or_fail(timer: Timer, now: datetime, exc: Exception) -> str:
    """Record a failed delivery: retry later with backoff, or give up after the last attempt."""
    with transaction.atomic(using=stepper.database(), durable=True):
        _lock_execution(timer.execution_id)  # the same lock order as every step
        return _record_attempt(timer, now, exc)


def _record_attempt(timer: Timer, now: datetime, exc: Exception) -> str:
    current = _still_pending(timer, now).values_list("attempts", flat=True).first()
    if current is None:
        return SKIPPED  # settled by someone else meanwhile
    attempts = current + 1
    error = f"{type(exc).__name__}: {exc}"
    if attempts >= timer_settings.TIMER_MAX_ATTEMPTS:
        Timer.objects.using(stepper.database()).filter(pk=timer.pk).update(
            status=TimerStatus.FAILED,
            attempts=F("attempts") + 1,
            last_error=error,
            reason=f"delivery failed {attempts} times",
            settled=now,
            claimed_until=None,
        )
        return FAILED
    backoff = timer_settings.TIMER_RETRY_SECONDS * 2 ** (attempts - 1)
    Timer.objects.using(stepper.database()).filter(pk=timer.pk).update(
        attempts=F("attempts") + 1,
        last_error=error,
        due=now + timedelta(seconds=backoff),
        claimed_until=None,
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
    return due


# Due timers, for tools that run pending work themselves (statecharts.work).
timer_work = WorkSource(
    "timers", next_due=_next_due, run_due=lambda now: fire_all_due(now=now).handled
)
