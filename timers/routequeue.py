"""The default route timer queue (the ``routes`` app's TimerQueue behaviour): delayed route
sends as ``RouteTimer`` rows, fired by the same loop as SCXML timers (``fire_due``, the
django-q2 sweeper and drains, ``fire_timers``). Loaded only when the routes app is installed.

Firing, in chunks of ``TIMER_ROUTE_FIRE_CHUNK`` rows (``fire_rows``), each chunk in one
transaction, with one lock order (the executions, in ascending id order, then the rows):

1. **Liveness**, under the execution's lock, by the execution status table
   (``statecharts.statuses``): an execution that finished or is missing has the row deleted
   with no delivery, in the write that would have fired it, and the reason written to the
   ledger (``discarded``); a status that holds timers snoozes it.
2. **The route**: a name not registered here (any more) is a fact about this deployment, not
   about the row: the row is snoozed with a visible reason, no attempt spent (and
   ``manage.py check --database default`` warns, ``timers.W001``).
   The send's data is decoded with the row's payload codec (``statecharts.policies.codecs``): a
   codec or key not deployed here snoozes the row the same way; a payload that can never be
   decoded deletes it undelivered, ``discarded`` with reason ``undecodable: ...``.
3. **Take and decide in one write**: the chunk's rows are deleted (one ``DELETE``) and their
   keys claimed in the ledger (one insert) in the same transaction. A ``<cancel>`` is a
   step, which holds the same execution lock and deletes the row too: a fire and a cancel of
   one row never both succeed.
4. After the commit, with no lock held: each route's ``deliver(config, message, key)``; the
   ledger goes ``claimed`` -> ``delivered`` / ``failed`` (the sender is then told
   ``error.communication``). A firer that dies between 3 and 4 leaves the chunk's unsettled
   keys ``claimed``: "in doubt", never retried blindly (at most once).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.apps import apps
from django.db import connections, transaction
from django.db.models import Count, Min, Q

from routes import ledger, registry
from routes import telemetry as route_telemetry
from routes.base import RouteMessage
from routes.delivering import Claimed, perform_many
from routes.models import DeliveryStatus
from routes.queue import TimerEntry, WaitingSend, configured_queue
from statecharts import stepper
from statecharts.core.plan import Instruction
from statecharts.models import Execution
from statecharts.policies import codecs
from statecharts.statuses import TimerRule, rules
from timers.conf import timer_settings
from timers.models import RouteTimer, encode_route_message

log = logging.getLogger("timers")

FIRED = "fired"
DISCARDED = "discarded"
SNOOZED = "snoozed"
SKIPPED = "skipped"  # cancelled, fired or not due any more; or its key was decided before

# Tests install a callable here to stop a real process at a phase of a fire ("taken": the
# take-and-decide write committed, nothing delivered yet). It is never set otherwise.
fault_hook: Callable[[str], None] | None = None


class RouteTimerQueue:
    """``routes.queue.TimerQueue`` on the ``RouteTimer`` table (see the module docstring)."""

    @staticmethod
    def available() -> bool:
        return apps.is_installed("timers") and apps.is_installed("routes")

    def waiting(self, scope: int) -> list[WaitingSend]:
        """``scope``'s route timer rows, due order (the routes section of its read model)."""
        return [
            WaitingSend(t.pk, t.key, t.route, t.send_id, t.message, t.due, t.reason)
            for t in RouteTimer.objects.filter(execution_id=scope).order_by("due", "id")
        ]

    def schedule(self, entry: TimerEntry) -> None:
        """One row per key: a repeat before the fire is a no-op (the unique key), and one
        after it (or after a cancel, or a discard) adds nothing (the key is in the ledger)."""
        if ledger.known(entry.key):
            return
        message, codec = encode_route_message(entry.message.to_dict())
        RouteTimer.objects.using(stepper.database()).bulk_create(
            [
                RouteTimer(
                    execution_id=entry.scope,
                    send_id=entry.send_id[:200],
                    key=entry.key,
                    route=entry.route,
                    config=dict(entry.config),
                    message=message,
                    codec=codec,
                    due=entry.due,
                    scheduled_in=entry.scheduled_in,
                    context=getattr(entry, "caller_context", None),
                    created=entry.created,
                )
            ],
            ignore_conflicts=True,
        )
        route_telemetry.timer_scheduled(entry)

    def cancel(self, scope: int, send_id: str, *, now: datetime, reason: str) -> int:
        """Delete ``scope``'s rows under ``send_id`` (no other scope's), each with its
        ``cancelled`` outcome in the ledger. (In the cancelling step: the execution is
        locked, then its rows.)"""
        database = stepper.database()
        rows = list(
            RouteTimer.objects.using(database)
            .select_for_update()
            .filter(execution_id=scope, send_id=send_id)
        )
        for row in rows:
            ledger.write(_clear_message(row), row.key, DeliveryStatus.CANCELLED, now, reason)
            route_telemetry.timer_cancelled(row, now, reason)
        RouteTimer.objects.using(database).filter(pk__in=[row.pk for row in rows]).delete()
        return len(rows)


def cancel_for_step(context: stepper.StepContext, instruction: Instruction) -> int:
    """Called by the ``cancel_timers`` performer: the route timer queue's ``cancel``; how
    many waiting route sends it removed."""
    queue = configured_queue()
    if queue is None:
        return 0
    return queue.cancel(
        context.execution.pk,
        instruction.data["send_id"],
        now=context.now,
        reason=f"cancelled by <cancel> in step {context.seq}",
    )


def _message(row: RouteTimer) -> RouteMessage:
    return RouteMessage.from_dict(row.decoded_message())


def _clear_message(row: RouteTimer) -> RouteMessage:
    """The row's send without its data (what the ledger keeps needs no key)."""
    stored = row.message if isinstance(row.message, dict) else {}
    return RouteMessage.from_dict({**stored, "data": None})


def claim(now: datetime, limit: int) -> list[int]:
    """Claim up to ``limit`` due rows (their ids); see ``claim_rows``."""
    return [row.pk for row in claim_rows(now, limit)]


def claim_rows(now: datetime, limit: int) -> list[RouteTimer]:
    """Claim up to ``limit`` due rows (a lease: a dead firer only delays them), skipping rows
    another firer is claiming; due order. The rows come back whole: what a row sends (its
    execution, key, route, configuration, message) never changes after it is written, so the
    fire only has to find out whether it is still there and due, under its execution's lock.
    The claim only saves work: the fire decides again."""
    database = stepper.database()
    lease = timedelta(seconds=timer_settings.TIMER_LEASE_SECONDS)
    with transaction.atomic(using=database):
        due = (
            RouteTimer.objects.using(database)
            .filter(due__lte=now)
            .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
            .order_by("due", "id")
        )
        if connections[database].features.has_select_for_update_skip_locked:
            due = due.select_for_update(skip_locked=True)
        rows = list(due[:limit])
        RouteTimer.objects.using(database).filter(pk__in=[row.pk for row in rows]).update(
            claimed_until=now + lease
        )
    return rows


def fire_due(*, now: datetime | None = None, limit: int | None = None) -> list[str]:
    """Claim and fire one batch of due route timer rows, in chunks of
    ``TIMER_ROUTE_FIRE_CHUNK`` rows (``fire_rows``); their outcomes. Without ``now`` each chunk
    reads the clock when it starts."""
    rows = claim_rows(now or timer_settings.now(), limit or timer_settings.TIMER_BATCH)
    size = timer_settings.TIMER_ROUTE_FIRE_CHUNK
    outcomes: list[str] = []
    for start in range(0, len(rows), size):
        outcomes += fire_rows(rows[start : start + size], now=now)
    return outcomes


def fire(pk: int, *, now: datetime | None = None) -> str:
    """Fire one row (a chunk of one: ``fire_rows``); its outcome."""
    row = RouteTimer.objects.using(stepper.database()).filter(pk=pk).first()
    if row is None:
        return SKIPPED  # cancelled or fired meanwhile
    [outcome] = fire_rows([row], now=now)
    return outcome


@dataclass(slots=True)
class _Fate:
    """What the chunk decided for one row, before the take."""

    row: RouteTimer
    message: RouteMessage
    outcome: str  # FIRED, DISCARDED or SNOOZED
    reason: str = ""
    route: Any = None  # the registered route (FIRED)


def fire_rows(rows: list[RouteTimer], *, now: datetime | None = None) -> list[str]:
    """Fire route timer rows read earlier (claimed) in ONE transaction; their outcomes, in
    order. The chunk's steps (the module docstring's, for every row at once):

    1. One statement locks the rows' executions, in ascending id order (``stepper.lock_many``:
       the one lock order of every batch firer; a step or a ``<cancel>`` holds one execution
       lock, so there is no cycle). Under those locks nothing else can fire, cancel or
       snooze these rows.
    2. Each row is decided: liveness (the execution missing or finished: discarded; held:
       snoozed), then its route (not registered here: snoozed, no attempt spent), else fired.
    3. The take-and-decide write: ONE ``DELETE ... WHERE id IN (...) AND due <= now``
       (``RETURNING id``) of the rows to fire or discard; a row not deleted was cancelled,
       fired or snoozed since it was read (``skipped``). Then ONE ledger insert for the
       deleted rows' keys (unique key, ``ON CONFLICT DO NOTHING``): ``claimed`` for a row to
       fire, ``discarded`` with its reason for the others; a key already in the ledger was
       decided before (``skipped``, nothing delivered). Routes that ``deliver_atomic`` act
       here, their keys settled ``delivered`` in this transaction (exactly once). One commit.
    4. After the commit, with no lock held: each route's ``deliver`` in turn
       (``routes.delivering.perform_many``; the delivered keys settled together at the end,
       a failed one at once, its sender told ``error.communication``).

    A firer that dies between 3 and 4 leaves the chunk's undelivered keys ``claimed``: "in
    doubt", never retried blindly (at most once); with ``TIMER_ROUTE_FIRE_CHUNK`` = 1 that is at
    most one key per crash. A route fire does not step its execution (its action is outside), so
    every row of the chunk is decided against its execution's status as locked, including
    several rows of one execution. If anything in 1-3 raises (a ``deliver_atomic``, a
    deadlock, a lost connection), the transaction rolls back and each row is fired again on
    its own.
    """
    if not rows:
        return []
    fire_now = now or timer_settings.now()
    database = stepper.database()
    try:
        with transaction.atomic(using=database, durable=True):
            outcomes, claimed = _fire_chunk_locked(rows, fire_now)
    except Exception as exc:
        if len(rows) == 1:
            raise
        log.info("route timers %s: chunk rolled back (%s), firing one by one", len(rows), exc)
        return [outcome for row in rows for outcome in fire_rows([row], now=now)]
    if claimed:
        more: list[int] = []
        perform_many(claimed, more, before=_taken)
        if more:
            stepper.deliver(more)
    return outcomes


def _taken() -> None:
    if fault_hook is not None:
        fault_hook("taken")


def _fire_chunk_locked(rows: list[RouteTimer], now: datetime) -> tuple[list[str], list[Claimed]]:
    """Steps 1-3 of ``fire_rows``, in its transaction: the outcomes, and the keys claimed
    whose action is still to be done (in the rows' order)."""
    executions = stepper.lock_many({row.execution_id for row in rows})
    fates = [_decide(row, executions.get(row.execution_id)) for row in rows]
    gone = _delete_due([f.row.pk for f in fates if f.outcome != SNOOZED], now)
    written = ledger.write_many(
        [
            ledger.Entry(
                f.message,
                f.row.key,
                DeliveryStatus.CLAIMED if f.outcome == FIRED else DeliveryStatus.DISCARDED,
                f.reason,
            )
            for f in fates
            if f.row.pk in gone
        ],
        now,
    )
    outcomes: list[str] = []
    claimed: list[Claimed] = []
    atomic: list[int] = []
    for fate in fates:
        row = fate.row
        if fate.outcome == SNOOZED:
            outcomes.append(_snooze(row, now, fate.reason))
        elif row.pk not in gone:
            outcomes.append(SKIPPED)  # cancelled, fired or snoozed since it was read
        elif fate.outcome == DISCARDED:
            outcomes.append(DISCARDED)  # (deleted undelivered; the ledger has the reason)
        elif row.key not in written:
            outcomes.append(SKIPPED)  # its key was decided before (e.g. delivered immediately)
        else:
            outcomes.append(FIRED)
            delivery_id = written[row.key]
            tried = route_telemetry.attempt(row.key, row.context, row.due)
            if fate.route.deliver_atomic(row.config, fate.message, row.key):
                atomic.append(delivery_id)
                route_telemetry.delivered(delivery_id, fate.message, tried)
            else:
                claimed.append(
                    Claimed(
                        delivery_id,
                        fate.route,
                        row.config,
                        fate.message,
                        row.key,
                        row.context,
                        row.due,
                    )
                )
    ledger.settle_many(atomic, DeliveryStatus.DELIVERED, now)
    route_telemetry.timer_outcomes(fates, outcomes, now)
    return outcomes, claimed


def _decide(row: RouteTimer, execution: Execution | None) -> _Fate:
    """A row's fate under its execution's lock: discard (finished or missing), snooze (held,
    or its route is not registered here), else fire."""
    message = _clear_message(row)  # the ledger keeps the send without its data
    if execution is None:
        return _Fate(row, message, DISCARDED, "execution missing")
    rule = rules(execution.status).timers
    if rule is TimerRule.DISCARD:
        return _Fate(row, message, DISCARDED, f"execution {execution.status} before it was due")
    if rule is TimerRule.SNOOZE:
        held = str(execution.status).replace("_", " ")
        return _Fate(row, message, SNOOZED, f"execution {held}: snoozed")
    known = registry.get(row.route)
    if known is None:
        return _Fate(row, message, SNOOZED, f"route {row.route!r} is not registered here: snoozed")
    try:
        decoded = _message(row)
    except codecs.CodecUnavailable as exc:
        # The row's codec or key is not deployed here (yet): a deployment fact.
        return _Fate(row, message, SNOOZED, f"{exc}: snoozed")
    except codecs.CorruptPayload as exc:  # a fact about the row: it can never be sent
        return _Fate(row, message, DISCARDED, f"undecodable: {exc}")
    return _Fate(row, decoded, FIRED, route=known.route)


def _delete_due(pks: list[int], now: datetime) -> set[int]:
    """``RouteTimer.objects.filter(pk__in=pks, due__lte=now).delete()`` in one statement,
    returning the ids it deleted (``RETURNING`` where the database has it; else one DELETE
    per row, its row count telling)."""
    if not pks:
        return set()
    conn = connections[stepper.database()]
    quote = conn.ops.quote_name
    returning = ledger.returning(conn)
    marks = ", ".join(["%s"] * (len(pks) if returning else 1))
    sql = (
        f"DELETE FROM {quote(RouteTimer._meta.db_table)} WHERE {quote('id')} IN ({marks})"
        f" AND {quote('due')} <= %s" + (f" RETURNING {quote('id')}" if returning else "")
    )
    when = _DUE.get_db_prep_save(now, conn)
    with conn.cursor() as cursor:
        if returning:
            cursor.execute(sql, [*pks, when])
            return {pk for (pk,) in cursor.fetchall()}
        deleted = set()
        for pk in pks:
            cursor.execute(sql, [pk, when])
            if cursor.rowcount:
                deleted.add(pk)
        return deleted


_DUE = RouteTimer._meta.get_field("due")


def _snooze(row: RouteTimer, now: datetime, reason: str) -> str:
    """Try the row again later (no attempt spent), if it is still there and due."""
    delay = timedelta(seconds=timer_settings.TIMER_SNOOZE_SECONDS)
    snoozed = (
        RouteTimer.objects.using(stepper.database())
        .filter(pk=row.pk, due__lte=now)
        .update(due=now + delay, reason=reason[:300], claimed_until=None)
    )
    if not snoozed:
        return SKIPPED
    log.info("route timer %s: %s", row.pk, reason)
    return SNOOZED


def next_due() -> datetime | None:
    due: datetime | None = RouteTimer.objects.using(stepper.database()).aggregate(first=Min("due"))[
        "first"
    ]
    return due


def claimable_waiting(now: datetime) -> bool:
    return (
        RouteTimer.objects.using(stepper.database())
        .filter(due__lte=now)
        .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
        .order_by("due", "id")
        .values_list("pk", flat=True)
        .first()
        is not None
    )


def unregistered_routes() -> list[tuple[str, int]]:
    """Route names on rows that no registered route has, with their row counts."""
    known = set(registry.routes())
    counted = (
        RouteTimer.objects.using(stepper.database())
        .exclude(route__in=known)
        .values_list("route")
        .annotate(rows=Count("id"))
        .order_by("route")
    )
    return [(name, rows) for name, rows in counted]


# An operator's actions on one waiting row (timers.operating), each inside the operator's
# transaction, under the row's execution's lock.


def fire_now_locked(row: RouteTimer, now: datetime) -> tuple[str, list[Claimed]]:
    """Fire now: the row made due ``now`` and fired as a chunk of one (liveness, the
    take-and-decide write, its own key in the ledger); its outcome and what to perform
    after the commit (:func:`perform_claimed`)."""
    RouteTimer.objects.using(stepper.database()).filter(pk=row.pk).update(due=now)
    row.due = now
    outcomes, claimed = _fire_chunk_locked([row], now)
    return outcomes[0], claimed


def perform_claimed(claimed: list[Claimed]) -> None:
    """Step 4 of ``fire_rows`` for keys claimed by :func:`fire_now_locked`."""
    if claimed:
        more: list[int] = []
        perform_many(claimed, more, before=_taken)
        if more:
            stepper.deliver(more)


def cancel_locked(row: RouteTimer, now: datetime, reason: str) -> None:
    """Cancel: the row deleted, its key ``cancelled`` in the ledger with ``reason``."""
    ledger.write(_clear_message(row), row.key, DeliveryStatus.CANCELLED, now, reason)
    RouteTimer.objects.using(stepper.database()).filter(pk=row.pk).delete()
    route_telemetry.timer_cancelled(row, now, reason)
