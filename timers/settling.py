"""What a fire writes on its timer row: settle it (fired, discarded), snooze it (no attempt
spent), record a failed attempt (retry with backoff, or failed after the last); and the
outcomes a fire reports.

Each write is a conditional UPDATE that acts only while the row is still pending and due
(``_still_pending``, ``_settle_ids``) and, for a claimed row, still carries the claim it was
read with (the fence: ``timers.leases``); the caller holds the execution's lock (the lock
order of every step: execution, then its timers).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

from django.db import connections
from django.db.models import F

from statecharts import stepper
from statecharts.core.telemetry import TelemetryEvent
from timers import observing
from timers.conf import timer_settings
from timers.models import Timer, TimerStatus
from timers.retry_policy import GiveUp, RetryPolicy, policy_of, timer_key

FIRED = "fired"
DISCARDED = "discarded"
SNOOZED = "snoozed"
RETRYING = "retrying"
FAILED = "failed"
SKIPPED = "skipped"  # settled or taken by someone else meanwhile
CANCELLED = "cancelled"  # by its delivery's give-up answer (timers.retry_policy.Cancel)
EXPIRED = "expired"  # later than its ds:expires allowed: the chart told instead (timers.expiry)


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


def _give_up(timer: Timer, now: datetime, answer: GiveUp, delivery_name: str) -> str:
    """A delivery's give-up answer (``Cancel``/``Discard``) on a row its fire has taken: the
    row ends now with that status and the delivery's reason, no attempt spent."""
    said = f": {answer.reason}" if answer.reason else ""
    verb = "cancelled" if answer.status == TimerStatus.CANCELLED else "discarded"
    reason = f"delivery {delivery_name!r} {verb} it{said}"
    Timer.objects.using(stepper.database()).filter(pk=timer.pk).update(
        status=answer.status,
        reason=reason[:300],
        settled=now,
        claimed_until=None,
        fire_deadline=None,
    )
    event = (
        TelemetryEvent.TIMER_CANCELLED
        if answer.status == TimerStatus.CANCELLED
        else TelemetryEvent.TIMER_DISCARDED
    )
    observing.timer_event(event, timer, now=now, reason=reason)
    return DISCARDED if answer.status == TimerStatus.DISCARDED else CANCELLED


# The mark a not-deployed snooze leaves in the row's reason: since when it has been waiting
# for this deployment (the row has no column for it; the reason travels with the row).
_SINCE = re.compile(r" \(waiting since (\S+)\): snoozed$")
NEEDS_ATTENTION = "needs attention"


def _snooze_undeployed(timer: Timer, now: datetime, what: str, *, taken: bool = False) -> str:
    """Snooze a timer this deployment cannot fire now (its delivery, codec, key or performer
    is not deployed here), no attempt spent, for at most ``TIMER_UNDEPLOYED_MAX_SECONDS``
    from its first such snooze; after that it ends ``failed``, reason ``needs attention:
    ...``, counted by ``statechart health`` (an operator deploys what is missing and retries
    it). The first snooze's time is kept in the reason."""
    found = _SINCE.search(timer.reason or "")
    since = datetime.fromisoformat(found.group(1)) if found else now
    waited = (now - since).total_seconds()
    if waited < timer_settings.TIMER_UNDEPLOYED_MAX_SECONDS:
        reason = f"{what} (waiting since {since.isoformat()}): snoozed"
        return _snooze(timer, now, reason=reason, taken=taken)
    reason = f"{NEEDS_ATTENTION}: {what} for {int(waited)} s"
    rows = (
        Timer.objects.using(stepper.database()).filter(pk=timer.pk)
        if taken
        else _still_pending(timer, now)
    )
    if not rows.update(
        status=TimerStatus.FAILED,
        reason=reason[:300],
        last_error=what[:1000],
        settled=now,
        claimed_until=None,
        fire_deadline=None,
    ):
        return SKIPPED
    observing.timer_event(
        TelemetryEvent.TIMER_FAILED, timer, now=now, attempts=timer.attempts, reason=reason
    )
    return FAILED


def _record_attempt(
    timer: Timer, now: datetime, exc: Exception, policy: RetryPolicy | None = None
) -> str:
    """Spend an attempt of a delivery that raised: retry after the policy's backoff
    (``timers.retry_policy``; the settings' without one), or fail the timer after its last
    attempt, or at once for an error the policy calls non-retryable."""
    policy = policy or policy_of(None)
    rows = _still_pending(timer, now)
    current = rows.values_list("attempts", flat=True).first()
    if current is None:
        return SKIPPED  # settled by someone else meanwhile
    attempts = current + 1
    error = f"{type(exc).__name__}: {exc}"
    retryable = policy.retryable(exc)
    assert policy.max_attempts is not None
    if attempts >= policy.max_attempts or not retryable:
        reason = (
            f"delivery failed {attempts} times"
            if retryable
            else f"delivery failed: {type(exc).__name__} is not retryable"
        )
        rows.update(
            status=TimerStatus.FAILED,
            attempts=F("attempts") + 1,
            last_error=error,
            reason=reason,
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
            reason=reason,
        )
        return FAILED
    backoff = policy.backoff(attempts, timer_key(timer.execution_id, timer.ordinal))
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
