"""What a stored execution can do now: its available events (``execution.available_events()``).

A thin wrapper over the core's pure function (``statecharts.core.availability``): it reads the
execution's last committed position (never locking it, never writing anything), leaves out
the names outsiders may not send (``RESERVED_EVENT_PREFIXES``), the events the chart only
sends itself (``statecharts.core.outside``: a delayed ``<send>`` to itself is not a button;
a user with ``statecharts.send_internal_events`` still sees them) and, given a ``user``, the
events ``statecharts.policies.authorization`` would refuse them. The API's execution detail
(``available_events``) and the admin's send form show the same list.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from statecharts.core import outside
from statecharts.core.availability import Availability, AvailableEvent, GuardTime
from statecharts.core.availability import available_events as core_available_events
from statecharts.core.errors import StatechartError
from statecharts.core.model import Chart as CompiledChart
from statecharts.core.position import decode
from statecharts.models import Execution, ExecutionStatus
from statecharts.policies import authorization
from statecharts.policies.validation import reserved_event_prefixes
from statecharts.runtime import limits

__all__ = [
    "Availability",
    "AvailableEvent",
    "GuardTime",
    "Unavailable",
    "as_json",
    "available_events",
    "guard_time",
    "offered",
]

# Who is offered the events a chart only sends itself (buttons, pick lists, the API's list).
INTERNAL_EVENTS_PERMISSION = "statecharts.send_internal_events"


def offered(compiled: CompiledChart, name: str, user: Any = None) -> bool:
    """Whether the doors offer ``name`` to ``user``: not an event ``compiled`` only sends
    itself (or one its ``ds:external-events`` leaves out), unless the user has
    ``statecharts.send_internal_events``. Offering is not permitting: a name left out can
    still be sent (``EVENT_PERMISSIONS`` is what refuses)."""
    if outside.of(compiled).may_send(name):
        return True
    return user is not None and bool(user.has_perm(INTERNAL_EVENTS_PERMISSION))


class Unavailable(StatechartError):
    """The execution's chart or position cannot be read: nothing can be said."""


def guard_time() -> GuardTime:
    """A wall-clock allowance for the guards of one request (``GUARDS_TIME_BUDGET_MS`` of
    ``statecharts.core.availability``): a page showing several executions' events passes
    the same one to each."""
    return GuardTime(time.monotonic)


def available_events(
    execution: Execution,
    *,
    user: Any = None,
    include_reserved: bool = False,
    include_internal: bool = False,
    guards: GuardTime | None = None,
) -> tuple[AvailableEvent, ...]:
    """The events that would enable a transition of ``execution`` now (document order).

    Only an ``active`` execution has any. Linear in the chart's size: transitions lists past
    the answer's work budget are cut short (``truncated``), and the guards get the time
    ``guards`` has left (a new :func:`guard_time` when None). With ``user``, the events
    ``statecharts.policies.authorization`` refuses them are left out (a wildcard entry stays: which
    names it takes is decided when one is sent); a user who may send no event at all
    (``statecharts.change_execution``) gets none. Raises :class:`Unavailable` when the chart
    or the position cannot be read. The events the chart only sends itself are left out
    (:func:`offered`) unless ``include_internal`` (the whole truth: ``Execution.available_events``).
    """
    if execution.status != ExecutionStatus.ACTIVE:
        return ()
    try:
        compiled = execution.chart.compiled()
        state = decode(bytes(execution.position or b""), chart=compiled).state
    except (StatechartError, ValueError) as exc:
        raise Unavailable(f"execution {execution.pk}: {exc}") from None
    if user is not None and not authorization.may_send_events(user):
        return ()  # (before the work: a user who may send nothing is shown nothing)
    events = core_available_events(
        compiled,
        state,
        limits=limits(),
        reserved=reserved_event_prefixes(),
        guard_time=guards if guards is not None else guard_time(),
    )
    if not include_reserved:
        events = tuple(event for event in events if not event.reserved)
    if not include_internal:
        events = tuple(
            event for event in events if event.any_name or offered(compiled, event.name, user)
        )
    if user is not None:
        events = tuple(
            event
            for event in events
            if event.any_name or authorization.may_send(user, execution, event.name)
        )
    return events


def accepts_free_names(events: Sequence[AvailableEvent]) -> bool:
    """Whether a sender may type a name the list does not show: the chart has a wildcard
    (``*``) or a family (``order.*``) among the active states' descriptors."""
    return any(event.any_name or event.family for event in events)


def as_json(event: AvailableEvent) -> dict[str, Any]:
    """One available event as the API shows it."""
    return {
        "name": event.name,
        "availability": event.availability.value,
        "any_name": event.any_name,
        "family": event.family,
        "truncated": event.truncated,
        "transitions": [
            {
                "source": option.source,
                "targets": list(option.targets),
                "event": option.event,
                "cond": option.cond,
                "guard": option.guard.value,
                "availability": option.availability.value,
                "reason": option.reason,
            }
            for option in event.transitions
        ],
    }
