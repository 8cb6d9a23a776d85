"""Delivering route sends: the ledger claim, the outside action after the commit, the outcome.

Immediate sends: the step writes an outbox message of kind ``routes.deliver`` (in its own
transaction, so nothing is sent for a step that rolls back). After the commit, the process
that ran the step (or the outbox sweeper, after a crash) delivers it: it claims the key in the
ledger (its own short transaction), then calls the route with no lock held, then settles the
ledger row. A claim that finds the key already in the ledger does nothing: at most once.

Delayed sends: the route timer queue's firer claims the keys of a chunk of rows in the
transaction that takes them (``timers.routequeue``), then calls :func:`perform_many` after
the commit: each route is called in turn, the delivered keys are settled together at the end
(one UPDATE), a failed one at once (it tells its sender).

A delivery that raises is ``failed``, and the sender gets ``error.communication`` with the
send id, in the same transaction that settles the ledger row (the sender locked first: the
lock order of every step, one execution). Unless the route raised ``NotSent`` and its retry
policy has attempts left: then the key waits ``retrying`` for a route timer row that tries
it again, same key (``routes.retrying``). A route that answers ``Cancel``/``Discard`` gives
the key up: ``cancelled``/``discarded`` with its reason, the sender told the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction

from routes import ledger, registry, retrying
from routes import telemetry as route_telemetry
from routes.base import GiveUp, RouteConfig, RouteMessage
from routes.conf import route_settings
from routes.models import DeliveryStatus
from statecharts.core.events import PLATFORM, Event
from statecharts.models import Execution, OutboxMessage
from statecharts.stepper import Input, database, lock, step_locked

log = logging.getLogger("routes")

KIND = "routes.deliver"  # the outbox message kind of an immediate route send

# Tests install a callable here to stop a real process at a phase of a delivery ("claimed":
# the ledger row is committed, the route not called yet). It is never set otherwise.
fault_hook: Callable[[str], None] | None = None


def outbox_payload(
    route: str, config: RouteConfig | None, message: RouteMessage, key: str, refused: str = ""
) -> dict[str, Any]:
    return {
        "route": route,
        "config": dict(config) if config is not None else None,
        "message": message.to_dict(),
        "key": key,
        "refused": refused,
    }


def deliver_message(message: OutboxMessage, more: list[int]) -> bool:
    """The outbox handler of ``routes.deliver`` messages: True once the key is decided.

    A route not registered here leaves the message pending (a fact about this deployment: the
    sweeper tries again). Otherwise the key is claimed (or found claimed: done already) and
    the route called after the claim commits."""
    payload = message.event
    route_message = RouteMessage.from_dict(payload["message"])
    key = str(payload["key"])
    known = registry.get(str(payload["route"]))
    if known is None and not payload.get("refused"):
        return False
    now = route_settings.now()
    with transaction.atomic(using=database()):
        claimed = ledger.claim(route_message, key, now)
        if claimed is None:
            route_telemetry.found_claimed(route_message, key)  # (if still claimed: in doubt)
            return True  # claimed before (a repeat, or the run before a crash): at most once
        refused = str(payload.get("refused") or "")
        config = payload.get("config") or {}
        tried = route_telemetry.attempt(key, message.caller_context, message.created)
        if (
            not refused
            and known is not None
            and known.route.deliver_atomic(config, route_message, key)
        ):
            ledger.settle(claimed.pk, DeliveryStatus.DELIVERED, now)
            route_telemetry.delivered(claimed.pk, route_message, tried)
            return True
    if refused:  # (after the claim's commit: the sender's lock is taken first, alone)
        fail(claimed.pk, route_message, refused, more)
        return True
    assert known is not None
    perform(claimed.pk, known.route, config, route_message, key, more, origin=message)
    return True


def perform(
    delivery_id: int,
    route: Any,
    config: RouteConfig,
    message: RouteMessage,
    key: str,
    more: list[int] | None = None,
    *,
    origin: OutboxMessage | None = None,
) -> bool:
    """The outside action of a claimed key (no transaction, no lock held); True if it
    succeeded. A raise settles the key ``failed`` and tells the sender (or, for a
    ``NotSent`` its route's policy retries, leaves it ``retrying``: ``not_delivered``).
    ``origin``: the outbox message it came from (its caller context and age, for
    telemetry)."""
    more = [] if more is None else more
    if fault_hook is not None:
        fault_hook("claimed")
    tried = route_telemetry.attempt_from(key, origin)
    try:
        answer = route.deliver(config, message, key)
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}"
        log.warning("route %s: delivery %s failed: %s", message.route, key, reason)
        not_delivered(delivery_id, config, message, key, exc, more, route_telemetry.stopped(tried))
        return False
    if isinstance(answer, GiveUp):
        give_up(delivery_id, message, answer, more, route_telemetry.stopped(tried))
        return False
    route_telemetry.delivered(delivery_id, message, tried)
    ledger.settle(delivery_id, DeliveryStatus.DELIVERED, route_settings.now())
    return True


def not_delivered(
    delivery_id: int,
    config: RouteConfig,
    message: RouteMessage,
    key: str,
    exc: BaseException,
    more: list[int],
    tried: route_telemetry.Attempt | None = None,
) -> None:
    """A claimed key whose route raised: a retry scheduled for a ``NotSent`` its route's
    policy retries (``routes.retrying``), else ``fail`` (the sender told)."""
    reason = retrying.after_raise(delivery_id, config, message, key, exc, route_settings.now())
    if reason is not None:
        fail(delivery_id, message, reason, more, tried)


def give_up(
    delivery_id: int,
    message: RouteMessage,
    answer: GiveUp,
    more: list[int],
    tried: route_telemetry.Attempt | None = None,
) -> None:
    """A claimed key whose route answered ``Cancel``/``Discard``: ended so at once, the
    reason recorded, the sender told (``fail``)."""
    status, reason = retrying.given_up(answer)
    log.info("route %s: delivery of %s %s", message.route, message.send_id, reason)
    fail(delivery_id, message, reason, more, tried, status=status)


@dataclass(frozen=True, slots=True)
class Claimed:
    """A key claimed in the ledger (``delivery_id``), its action not done yet."""

    delivery_id: int
    route: Any
    config: RouteConfig
    message: RouteMessage
    key: str
    caller_context: Any = None  # the scheduling step's (telemetry: the span's parent)
    due: datetime | None = None  # when it was due (telemetry: lateness)


def perform_many(
    claimed: Sequence[Claimed], more: list[int], before: Callable[[], None] | None = None
) -> list[bool]:
    """:func:`perform` for each claimed key in turn (no transaction, no lock held), calling
    ``before()`` first; the keys delivered are settled ``delivered`` in one UPDATE once all
    were tried (until then they show ``claimed``: a crash in between leaves them "in doubt",
    never delivered twice), a failure at once (``fail``: its sender is told). Whether each
    succeeded, in order."""
    delivered: list[int] = []
    results: list[bool] = []
    try:
        for item in claimed:
            if before is not None:
                before()
            if fault_hook is not None:
                fault_hook("claimed")
            tried = route_telemetry.attempt(item.key, item.caller_context, item.due)
            try:
                answer = item.route.deliver(item.config, item.message, item.key)
            except Exception as exc:
                reason = f"{type(exc).__name__}: {exc}"
                log.warning(
                    "route %s: delivery %s failed: %s", item.message.route, item.key, reason
                )
                not_delivered(
                    item.delivery_id,
                    item.config,
                    item.message,
                    item.key,
                    exc,
                    more,
                    route_telemetry.stopped(tried),
                )
                results.append(False)
                continue
            if isinstance(answer, GiveUp):
                give_up(
                    item.delivery_id, item.message, answer, more, route_telemetry.stopped(tried)
                )
                results.append(False)
                continue
            route_telemetry.delivered(item.delivery_id, item.message, tried)
            delivered.append(item.delivery_id)
            results.append(True)
    finally:
        ledger.settle_many(delivered, DeliveryStatus.DELIVERED, route_settings.now())
    return results


def fail(
    delivery_id: int,
    message: RouteMessage,
    reason: str,
    more: list[int],
    tried: route_telemetry.Attempt | None = None,
    *,
    status: str = DeliveryStatus.FAILED,
) -> None:
    """Settle the key ``failed`` (or ``status``: a route's give-up) and tell the sender
    ``error.communication`` (send id set), in one transaction under the sender's lock; a
    sender that finished meanwhile records the error as discarded (spec 6.2). ``tried``: the
    route's call that raised or gave up (telemetry)."""
    now: datetime = route_settings.now()
    with transaction.atomic(using=database()):
        try:
            sender: Execution | None = lock(message.execution_id)
        except Execution.DoesNotExist:
            sender = None
        if not ledger.settle(delivery_id, status, now, reason):
            return
        route_telemetry.failed(delivery_id, message, reason, tried)
        if sender is None:
            return
        data = {"message": f"route {message.route!r}: {reason}", "route": message.route}
        if status != DeliveryStatus.FAILED:
            data["given_up"] = status  # (the route answered Cancel or Discard)
        error = Event("error.communication", PLATFORM, data, sendid=message.send_id or None)
        step_locked(sender, Input.internal(error), now, more, cause={"route_delivery": delivery_id})
