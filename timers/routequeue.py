"""The default route timer queue (the ``routes`` app's TimerQueue behaviour): delayed route
sends as ``RouteTimer`` rows, fired by the same loop as SCXML timers (``fire_due``, the
django-q2 sweeper and drains, ``fire_timers``). Loaded only when the routes app is installed.

Firing one row, in one transaction, with one lock order (the execution, then the row):

1. **Liveness**, under the execution's lock, by the execution status table
   (``statecharts.statuses``): an execution that finished or is missing has the row deleted
   with no delivery, in the write that would have fired it, and the reason written to the
   ledger (``discarded``); a status that holds timers snoozes it.
2. **The route**: a name not registered here (any more) is a fact about this deployment, not
   about the row: the row is snoozed with a visible reason, no attempt spent (and
   ``manage.py check --database default`` warns, ``timers.W001``).
   The send's data is decoded with the row's payload codec (``statecharts.codecs``): a
   codec or key not deployed here snoozes the row the same way; a payload that can never be
   decoded deletes it undelivered, ``discarded`` with reason ``undecodable: ...``.
3. **Take and decide in one write**: the row is deleted and the key claimed in the ledger in
   the same transaction. A ``<cancel>`` is a step, which holds the same execution lock and
   deletes the row too: a fire and a cancel of one row never both succeed.
4. After the commit, with no lock held: the route's ``deliver(config, message, key)``; the
   ledger goes ``claimed`` -> ``delivered`` / ``failed`` (the sender is then told
   ``error.communication``). A firer that dies between 3 and 4 leaves the key ``claimed``:
   "in doubt", never retried blindly (at most once).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from django.apps import apps
from django.db import connections, transaction
from django.db.models import Count, Min, Q

from routes import ledger, registry
from routes.base import RouteMessage
from routes.delivering import perform
from routes.models import DeliveryStatus
from routes.queue import TimerEntry, configured_queue
from statecharts import codecs, stepper
from statecharts.core.plan import Instruction
from statecharts.models import Execution
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
                    created=entry.created,
                )
            ],
            ignore_conflicts=True,
        )

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
    """Claim up to ``limit`` due rows (a lease: a dead firer only delays them), skipping rows
    another firer is claiming. The claim only saves work: the fire decides again."""
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
        ids = list(due.values_list("pk", flat=True)[:limit])
        RouteTimer.objects.using(database).filter(pk__in=ids).update(claimed_until=now + lease)
    return ids


def fire_due(*, now: datetime | None = None, limit: int | None = None) -> list[str]:
    """Claim and fire one batch of due route timer rows; their outcomes."""
    now = now or timer_settings.now()
    return [fire(pk, now=now) for pk in claim(now, limit or timer_settings.TIMER_BATCH)]


def fire(pk: int, *, now: datetime | None = None) -> str:
    """Fire one row (see the module docstring); its outcome."""
    now = now or timer_settings.now()
    database = stepper.database()
    owner = RouteTimer.objects.using(database).filter(pk=pk).values_list(
        "execution_id", flat=True
    ).first()
    if owner is None:
        return SKIPPED
    with transaction.atomic(using=database, durable=True):
        try:
            execution: Execution | None = stepper.lock(owner)
        except Execution.DoesNotExist:
            execution = None
        row = (
            RouteTimer.objects.using(database)
            .select_for_update()
            .filter(pk=pk, due__lte=now)
            .first()
        )
        if row is None:
            return SKIPPED  # cancelled or fired meanwhile (the first to lock decided)
        outcome = _liveness(row, _clear_message(row), execution, now)
        if outcome is not None:
            return outcome
        known = registry.get(row.route)
        if known is None:
            return _snooze(row, now, f"route {row.route!r} is not registered here: snoozed")
        try:
            message = _message(row)
        except codecs.CodecUnavailable as exc:
            # The row's codec or key is not deployed here (yet): a deployment fact.
            return _snooze(row, now, f"{exc}: snoozed")
        except codecs.CorruptPayload as exc:  # a fact about the row: it can never be sent
            return _discard(row, _clear_message(row), now, f"undecodable: {exc}")
        # Take and decide: the row goes, the key is claimed, in this one write.
        RouteTimer.objects.using(database).filter(pk=row.pk).delete()
        claimed = ledger.claim(message, row.key, now)
        if claimed is None:
            return SKIPPED  # its key was decided before (e.g. delivered immediately)
        if known.route.deliver_atomic(row.config, message, row.key):
            ledger.settle(claimed.pk, DeliveryStatus.DELIVERED, now)
            return FIRED
    if fault_hook is not None:
        fault_hook("taken")
    more: list[int] = []
    perform(claimed.pk, known.route, row.config, message, row.key, more)
    if more:
        stepper.deliver(more)
    return FIRED


def _liveness(
    row: RouteTimer, message: RouteMessage, execution: Execution | None, now: datetime
) -> str | None:
    if execution is None:
        return _discard(row, message, now, "execution missing")
    rule = rules(execution.status).timers
    if rule is TimerRule.DISCARD:
        return _discard(row, message, now, f"execution {execution.status} before it was due")
    if rule is TimerRule.SNOOZE:
        held = str(execution.status).replace("_", " ")
        return _snooze(row, now, f"execution {held}: snoozed")
    return None


def _discard(row: RouteTimer, message: RouteMessage, now: datetime, reason: str) -> str:
    """Delete the row undelivered, its reason in the ledger (spec 6.2's discard)."""
    ledger.write(message, row.key, DeliveryStatus.DISCARDED, now, reason)
    RouteTimer.objects.using(stepper.database()).filter(pk=row.pk).delete()
    return DISCARDED


def _snooze(row: RouteTimer, now: datetime, reason: str) -> str:
    delay = timedelta(seconds=timer_settings.TIMER_SNOOZE_SECONDS)
    RouteTimer.objects.using(stepper.database()).filter(pk=row.pk).update(
        due=now + delay, reason=reason[:300], claimed_until=None
    )
    log.info("route timer %s: %s", row.pk, reason)
    return SNOOZED


def next_due() -> datetime | None:
    due: datetime | None = RouteTimer.objects.using(stepper.database()).aggregate(
        first=Min("due")
    )["first"]
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

