"""The TimerQueue behaviour: where delayed route sends wait until they are due.

The host implements it and names it in ``STATECHARTS["ROUTE_TIMER_QUEUE"]`` (a dotted path in
settings only; the default is the ``timers`` app's ``timers.routequeue.RouteTimerQueue``,
fired by the same loop as SCXML timers). Without a queue, a delayed send on a route is refused
(``error.communication`` in the chart), never dropped.

An entry carries two keys, and a send id alone is never one (``send_1`` recurs in every
execution):

- the **cancellation key** ``(scope, send_id)``: ``cancel(scope, send_id)`` removes that
  scope's entries for the send id, and no other scope's; it may match many entries or none;
- the **dedup key** (``key``, the route's idempotency key): the queue holds at most one entry
  per key, a repeat ``schedule`` is a no-op that answers ok, and (the delivery ledger) one
  that arrives after the entry fired adds nothing either. Two entries under one
  ``(scope, send_id)`` with different keys are two sends, and both are kept.

Both methods run inside the scheduling (or cancelling) step's transaction, with the
execution's row locked: what they write commits or rolls back with the step. The routes app
also schedules the retry of a delivery that was not sent (``routes.retrying``), under the
same lock, with the key ``retrying`` in the ledger: the queue keeps it as any entry, and its
fire claims the key back through ``routes.ledger`` (``write_many`` takes a retrying key).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from django.apps import apps
from django.utils.module_loading import import_string

from routes.base import RouteConfig, RouteMessage


@dataclass(frozen=True, slots=True)
class TimerEntry:
    scope: int  # the execution (with send_id: the cancellation key)
    send_id: str
    key: str  # the dedup key: the route's idempotency key for this send
    route: str  # the route's registered name (resolved again when it fires)
    config: RouteConfig  # the route's configuration under the scope, when scheduled
    message: RouteMessage
    due: datetime
    created: datetime
    # The history seq of the step that scheduled it; None for a retry of a send that was not
    # sent (routes.retrying: no step scheduled it).
    scheduled_in: int | None
    # The scheduling step's caller context (opaque; never a key): kept so the delivery's
    # telemetry joins that step's trace (docs/telemetry.md). A queue may ignore it.
    caller_context: Any = None


@dataclass(frozen=True, slots=True)
class WaitingSend:
    """A delayed route send a queue keeps, not fired yet (an execution's read model)."""

    pk: Any  # the queue's own id of it
    key: str
    route: str
    send_id: str
    message: dict[str, Any] | None  # as the queue stores it (its codec's form)
    due: datetime
    reason: str


@runtime_checkable
class TimerQueue(Protocol):
    """What ``ROUTE_TIMER_QUEUE`` names. A queue may also have
    ``waiting(scope) -> list[WaitingSend]`` (an execution's entries not fired yet, due
    order): the routes section of the read model shows them (none without it)."""

    def schedule(self, entry: TimerEntry) -> None:
        """Keep ``entry`` until due (a repeat of its key is a no-op)."""

    def cancel(self, scope: int, send_id: str, *, now: datetime, reason: str) -> int:
        """Remove ``scope``'s entries under ``send_id``; how many it removed."""


class QueueUnavailable(LookupError):
    """The configured queue cannot be loaded here (a deployment fact)."""


def load_queue(path: Any) -> TimerQueue:
    """The queue a ``ROUTE_TIMER_QUEUE`` setting names: a dotted path to a class in an
    installed app (a path outside every installed app is unavailable, and is not even
    imported: the default names the timers app, which a deployment may leave out), or a
    class."""
    if isinstance(path, str) and apps.get_containing_app_config(path) is None:
        raise QueueUnavailable(f"{path!r} is not in an installed app")
    try:
        cls = import_string(path) if isinstance(path, str) else path
    except (ImportError, RuntimeError) as exc:
        # (RuntimeError: Django refuses the models of an app that is not installed)
        raise QueueUnavailable(f"{path!r} cannot be imported: {exc}") from exc
    if not inspect.isclass(cls):
        raise QueueUnavailable(f"{path!r} is not a class")
    available = getattr(cls, "available", None)
    if callable(available) and not available():
        raise QueueUnavailable(f"{path!r} is not available here (its app is not installed)")
    queue = cls()
    if not isinstance(queue, TimerQueue):
        raise QueueUnavailable(f"{path!r} has no schedule(entry) and cancel(scope, send_id)")
    return queue


def configured_queue() -> TimerQueue | None:
    """The configured queue, or None (no setting, or it cannot be loaded here)."""
    from routes.conf import route_settings

    path = route_settings.ROUTE_TIMER_QUEUE
    if path is None:
        return None
    try:
        return load_queue(path)
    except QueueUnavailable:
        return None
