"""The routes app's telemetry events (docs/telemetry.md): route deliveries and route timers.

Declared in ``routes/declaration.py`` (``telemetry_events``), so ``statecharts.telemetry``
gives each member a Django signal (below, named like the event: ``route.delivered`` is
``route_delivered``), writes its DEBUG log record and hands it to the OpenTelemetry bridge, like
the core's events. Every event is sent through ``statecharts.core.telemetry.emit`` with driver
``"durable"``, after the transaction that decided it commits (at once when there is none);
each function here returns at once when nothing listens, before building anything, so a
delivery pays a truth test per point.

Deliveries (one ledger row, one key):

- ``route.delivered``: the route's ``deliver`` (or ``deliver_atomic``) returned, or an
  operator marked a delivery in doubt delivered (``marked_by_operator``);
- ``route.failed``: the key was settled ``failed`` (the route raised, or the send was refused
  after the step, e.g. a scope override no longer allowed; its sender is told
  ``error.communication``), or an operator marked a delivery in doubt failed;
- ``route.in_doubt``: a key claimed and never settled, once per delivery (the row's
  ``doubt_reported``): when a delivery of an immediate send finds its key claimed (the
  attempt before it died between the claim and the settle, or is still running after
  ``OUTBOX_SWEEP_AGE_SECONDS``; the route is not called again: at most once), or, for any
  delivery, immediate or delayed, when the every-minute report (``report_in_doubt``) finds it
  claimed longer than ``ROUTE_IN_DOUBT_SECONDS``: nothing else would ever see a delayed
  send's key again, whose worker died in the route's call.

An event for a route's call carries ``started_ns`` and ``duration_s`` (the call itself) and
the caller context of the step that sent it: the OpenTelemetry bridge makes it a span in that
step's trace (a delayed send's row keeps the context it was scheduled with).

Route timers (the route timer queue's rows): ``route_timer.scheduled``, ``.fired`` (its key
claimed: ``route.delivered`` or ``route.failed`` follows), ``.discarded`` (liveness: its
execution finished or is missing, or its payload cannot be read), ``.cancelled`` (a
``<cancel>``, or an operator), ``.snoozed`` (its execution holds timers, or its route, codec
or key is not deployed here).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from routes.base import RouteMessage
from routes.conf import route_settings
from statecharts.core import telemetry as core
from statecharts.telemetry import after_commit, signal_for


class RouteEvent(StrEnum):
    DELIVERED = "route.delivered"
    FAILED = "route.failed"
    IN_DOUBT = "route.in_doubt"
    TIMER_SCHEDULED = "route_timer.scheduled"
    TIMER_FIRED = "route_timer.fired"
    TIMER_DISCARDED = "route_timer.discarded"
    TIMER_CANCELLED = "route_timer.cancelled"
    TIMER_SNOOZED = "route_timer.snoozed"


route_delivered = signal_for(RouteEvent.DELIVERED)
route_failed = signal_for(RouteEvent.FAILED)
route_in_doubt = signal_for(RouteEvent.IN_DOUBT)
route_timer_scheduled = signal_for(RouteEvent.TIMER_SCHEDULED)
route_timer_fired = signal_for(RouteEvent.TIMER_FIRED)
route_timer_discarded = signal_for(RouteEvent.TIMER_DISCARDED)
route_timer_cancelled = signal_for(RouteEvent.TIMER_CANCELLED)
route_timer_snoozed = signal_for(RouteEvent.TIMER_SNOOZED)


# ---- deliveries ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Attempt:
    """One call of a route: when it started, and what caused it (made only while something
    listens: :func:`attempt`)."""

    key: str
    started_ns: int  # wall clock (the span's start)
    started: float  # perf_counter (the duration)
    at: datetime  # the injected clock (lateness)
    caller_context: Any
    since: datetime | None  # when the send was written (immediate) or due (delayed)
    duration_s: float | None = None  # set when the call ended (:func:`stopped`)


def attempt(key: str, caller_context: Any = None, since: datetime | None = None) -> Attempt | None:
    """Note the start of a route's call (None when nothing listens)."""
    if not core.listeners:
        return None
    return Attempt(
        key, time.time_ns(), time.perf_counter(), route_settings.now(), caller_context, since
    )


def stopped(tried: Attempt | None) -> Attempt | None:
    """``tried`` with its duration fixed now (the call ended; what follows, e.g. taking the
    sender's lock to tell it, is not the call)."""
    if tried is None or tried.duration_s is not None:
        return tried
    return replace(tried, duration_s=time.perf_counter() - tried.started)


def attempt_from(key: str, origin: Any) -> Attempt | None:
    """:func:`attempt` for an immediate send: ``origin`` is its outbox message (its caller
    context, and when it was written), or None."""
    if origin is None:
        return attempt(key)
    return attempt(key, origin.caller_context, origin.created)


def _delivery(delivery_id: int, message: RouteMessage, tried: Attempt | None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "delivery_id": delivery_id,
        "execution_id": message.execution_id,
        "route": message.route,
        "send_type": message.type,
        "send_id": message.send_id,
        "event_name": message.name,
        "delayed": message.delayed,
    }
    if tried is not None:
        data["key"] = tried.key
        data["caller_context"] = tried.caller_context
        data["started_ns"] = tried.started_ns
        data["duration_s"] = (
            tried.duration_s
            if tried.duration_s is not None
            else time.perf_counter() - tried.started
        )
        if tried.since is not None:
            data["lateness_s"] = (tried.at - tried.since).total_seconds()
    return data


def delivered(delivery_id: int, message: RouteMessage, tried: Attempt | None) -> None:
    """``route.delivered``: the route's call returned (``tried``: :func:`attempt`)."""
    if not core.listeners:
        return
    after_commit(RouteEvent.DELIVERED, message.session_id, **_delivery(delivery_id, message, tried))


def failed(delivery_id: int, message: RouteMessage, reason: str, tried: Attempt | None) -> None:
    """``route.failed``: the key settled ``failed`` (``tried``: the call that raised, None
    when the route was never called); ``error`` is the reason."""
    if not core.listeners:
        return
    after_commit(
        RouteEvent.FAILED,
        message.session_id,
        **_delivery(delivery_id, message, tried),
        error=reason,
    )


def found_claimed(message: RouteMessage, key: str) -> None:
    """``route.in_doubt``, when a delivery found ``key`` already in the ledger and still
    ``claimed`` (a key found settled was decided: nothing to report)."""
    if not core.listeners:
        return
    from routes.models import DeliveryStatus, RouteDelivery
    from statecharts.stepper import database

    rows = RouteDelivery.objects.using(database())
    row = rows.filter(key=key).values("pk", "status").first()
    if row is None or row["status"] != DeliveryStatus.CLAIMED:
        return
    if not rows.filter(pk=row["pk"], doubt_reported=None).update(
        doubt_reported=route_settings.now()
    ):
        return  # reported already (once per delivery)
    after_commit(
        RouteEvent.IN_DOUBT,
        message.session_id,
        **_delivery(row["pk"], message, None),
        key=key,
        reason="found claimed and never settled by an earlier attempt: not called again",
    )


def marked(delivery: Any, status: str, reason: str, session_id: str | None) -> None:
    """``route.delivered`` or ``route.failed`` for a delivery in doubt whose fate an operator
    recorded (``routes.operating``): ``marked_by_operator`` is True, ``reason`` theirs. (Its
    worker died before it could report: each key still ends in one such event.)"""
    if not core.listeners:
        return
    event = RouteEvent.DELIVERED if status == "delivered" else RouteEvent.FAILED
    after_commit(
        event,
        session_id,
        delivery_id=delivery.pk,
        execution_id=delivery.execution_id,
        route=delivery.route,
        send_type=delivery.send_type,
        send_id=delivery.send_id,
        event_name=delivery.event_name,
        delayed=delivery.delayed,
        key=delivery.key,
        marked_by_operator=True,
        reason=reason,
    )


# ---- route timers ---------------------------------------------------------------------------


class TimerRow(Protocol):
    """What the events read of a route timer queue's row (``timers.models.RouteTimer``)."""

    pk: Any
    execution_id: int
    send_id: str
    key: str
    route: str
    due: datetime
    message: Any
    context: Any


def _timer(row: TimerRow) -> dict[str, Any]:
    stored = row.message if isinstance(row.message, dict) else {}
    return {
        "route_timer_id": row.pk,
        "execution_id": row.execution_id,
        "send_id": row.send_id,
        "key": row.key,
        "route": row.route,
        "event_name": stored.get("name"),
        "due": row.due.isoformat() if row.due else None,
        "caller_context": row.context,
    }


def _session(row: TimerRow) -> str | None:
    stored = row.message if isinstance(row.message, dict) else {}
    session_id = stored.get("session_id")
    return str(session_id) if session_id is not None else None


def timer_scheduled(entry: Any) -> None:
    """``route_timer.scheduled`` for a ``routes.queue.TimerEntry`` the queue kept."""
    if not core.listeners:
        return
    message: RouteMessage = entry.message
    after_commit(
        RouteEvent.TIMER_SCHEDULED,
        message.session_id,
        execution_id=entry.scope,
        send_id=entry.send_id,
        key=entry.key,
        route=entry.route,
        event_name=message.name,
        due=entry.due.isoformat(),
        delay_ms=int((entry.due - entry.created).total_seconds() * 1000),
        scheduled_in=entry.scheduled_in,
        caller_context=getattr(entry, "caller_context", None),
    )


def timer_cancelled(row: TimerRow, now: datetime, reason: str) -> None:
    """``route_timer.cancelled``: one row deleted undelivered by a ``<cancel>`` or an
    operator (its key ``cancelled`` in the ledger)."""
    if not core.listeners:
        return
    after_commit(RouteEvent.TIMER_CANCELLED, _session(row), **_timer(row), reason=reason)


# The route timer queue's outcome names (timers.routequeue) -> the event each is.
_OUTCOMES = {
    "fired": RouteEvent.TIMER_FIRED,
    "discarded": RouteEvent.TIMER_DISCARDED,
    "snoozed": RouteEvent.TIMER_SNOOZED,
}


def timer_outcomes(fates: Sequence[Any], outcomes: Sequence[str], now: datetime) -> None:
    """One event per row a fire decided (``fates[i].row``, ``.reason``; ``outcomes[i]``):
    ``fired``, ``discarded``, ``snoozed``; a row skipped (cancelled, fired or snoozed
    meanwhile, or its key decided before) is no event. ``lateness_s``: ``now`` minus the
    row's due time."""
    if not core.listeners:
        return
    for fate, outcome in zip(fates, outcomes, strict=True):
        event = _OUTCOMES.get(outcome)
        if event is None:
            continue
        row: TimerRow = fate.row
        extra: dict[str, Any] = {"lateness_s": (now - row.due).total_seconds()}
        if event is not RouteEvent.TIMER_FIRED:
            extra["reason"] = fate.reason
        after_commit(event, _session(row), **_timer(row), **extra)


IN_DOUBT_BATCH = 500  # deliveries one report looks at (the next minute's takes the rest)
SCHEDULE_NAME = "statecharts routes: report deliveries in doubt"
REPORT = "routes.telemetry.report_in_doubt"


def report_in_doubt(now: datetime | None = None) -> int:
    """``route.in_doubt`` for each delivery claimed longer than ``ROUTE_IN_DOUBT_SECONDS`` and
    never settled that was not reported yet, once per delivery (``doubt_reported`` is set in
    the same transaction, so two reports running at once send each event once). Run every
    minute by django-q2 (its schedule is made after ``migrate``). Returns how many were
    reported; with nothing listening, nothing is read or written."""
    if not core.listeners:
        return 0
    from django.db import transaction

    from routes.models import RouteDelivery
    from statecharts.models import Execution
    from statecharts.stepper import database

    now = now or route_settings.now()
    rows = RouteDelivery.objects.using(database())
    with transaction.atomic(using=database()):
        found = list(
            rows.in_doubt(now, route_settings.ROUTE_IN_DOUBT_SECONDS)
            .filter(doubt_reported=None)
            .select_for_update(skip_locked=True)
            .order_by("pk")[:IN_DOUBT_BATCH]
        )
        rows.filter(pk__in=[d.pk for d in found]).update(doubt_reported=now)
        sessions = dict(
            Execution.objects.using(database())
            .filter(pk__in={d.execution_id for d in found})
            .values_list("pk", "session_id")
        )
        for delivery in found:
            after_commit(
                RouteEvent.IN_DOUBT,
                sessions.get(delivery.execution_id),
                delivery_id=delivery.pk,
                execution_id=delivery.execution_id,
                route=delivery.route,
                send_type=delivery.send_type,
                send_id=delivery.send_id,
                event_name=delivery.event_name,
                delayed=delivery.delayed,
                key=delivery.key,
                claimed_s=(now - delivery.created).total_seconds(),
                reason=(
                    f"claimed {int((now - delivery.created).total_seconds())} s ago and never "
                    "settled: its worker may have died in the route's call (at most once: not "
                    "called again; an operator can mark its fate)"
                ),
            )
    return len(found)


def ensure_schedule_after_migrate(sender: Any, using: str, **kwargs: Any) -> None:
    """``post_migrate`` receiver: the every-minute report's django-q2 schedule."""
    from statecharts.stepper import ensure_every_minute

    ensure_every_minute(SCHEDULE_NAME, REPORT, using=using)
