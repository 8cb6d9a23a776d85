"""One telemetry contract for every driver: the events, and the emitter every driver calls.

The design documents' rule (one family, the driver's name on every event): a step taken in
memory and a step taken durably are the same kind of thing, so they are the same event, with
``driver`` telling them apart (``"memory"`` or ``"durable"``). What only a durable host has
(timer rows, outbox rows) is a second family, the storage events (``timer.*``,
``outbox.*``), sent by the apps that own those rows.

This module is pure (no Django, no clock): drivers and apps call :func:`emit`; listeners
(:func:`subscribe`) turn events into Django signals and log records
(``statecharts.telemetry``), OpenTelemetry spans and metrics (``statecharts.telemetry.otel``)
or anything else. With no listener, :func:`emit` returns at once, and the drivers skip
building an event's attributes (they test :data:`listeners` first): telemetry nobody listens
to costs a truth test per step (benchmarks/JOURNAL.md).

Apps add families of their own (the routes app's ``route.*`` and ``route_timer.*``, the
invocations app's ``invocation.*``): each declares a ``StrEnum`` of its events, named
``<family>.<outcome>``, and sends them through the same :func:`emit` (this module's enum
stays the core's own). A listener gets those members as ``event`` too: it tells the
families apart by ``isinstance`` or by the name's family (:func:`family`).

Attributes every event carries: ``driver``; ``session_id``. The rest, per event, are listed in
docs/telemetry.md. A listener must not raise (a raise is caught, logged by the Django bridge,
and never reaches the step) and must not keep the attributes dict (it is shared between
listeners).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any


class TelemetryEvent(StrEnum):
    # The execution family (every driver).
    EXECUTION_STARTED = "execution.started"
    STEP = "step"
    EFFECT_PERFORMED = "effect.performed"
    EFFECT_UNROUTABLE = "effect.unroutable"
    EXECUTION_FINISHED = "execution.finished"
    EXECUTION_HALTED = "execution.halted"
    # An <invoke autoforward="true"> whose child is not running (it failed to start, or has
    # finished): the event is not forwarded, and nothing tells the chart (SCXML 6.4 defines
    # no error for it).
    AUTOFORWARD_DROPPED = "autoforward.dropped"
    # The storage family (durable rows).
    TIMER_SCHEDULED = "timer.scheduled"
    TIMER_CANCELLED = "timer.cancelled"
    TIMER_FIRED = "timer.fired"
    TIMER_DISCARDED = "timer.discarded"
    TIMER_SNOOZED = "timer.snoozed"
    TIMER_RETRIED = "timer.retried"
    TIMER_FAILED = "timer.failed"
    TIMER_EXPIRED = "timer.expired"  # later than its ds:expires (the chart is told)
    OUTBOX_DELIVERED = "outbox.delivered"
    OUTBOX_WAITING = "outbox.waiting"
    OUTBOX_UNDELIVERABLE = "outbox.undeliverable"


class Driver(StrEnum):
    """The driver names: frozen (dashboards are built on them)."""

    MEMORY = "memory"
    DURABLE = "durable"


# An event: a TelemetryEvent, or a member of an app's own StrEnum of events.
Listener = Callable[[StrEnum, Mapping[str, Any]], None]

# Subscribed listeners, in order. Drivers test its truth before building attributes.
listeners: list[Listener] = []
# Called with (listener, event, exception) when a listener raises (the Django bridge logs it).
on_listener_error: Callable[[Listener, StrEnum, BaseException], None] | None = None


def subscribe(listener: Listener) -> None:
    """Add ``listener`` (once: subscribing it again does nothing)."""
    if listener not in listeners:
        listeners.append(listener)


def unsubscribe(listener: Listener) -> None:
    if listener in listeners:
        listeners.remove(listener)


def emit(event: StrEnum, driver: str, session_id: str | None, /, **attributes: Any) -> None:
    """Hand one event to every listener. A listener that raises is reported to
    :data:`on_listener_error` and skipped: telemetry never changes what a step does."""
    if not listeners:
        return
    attributes["driver"] = driver
    attributes["session_id"] = session_id
    for listener in tuple(listeners):
        try:
            listener(event, attributes)
        except Exception as exc:
            if on_listener_error is not None:
                on_listener_error(listener, event, exc)


def family(event: StrEnum) -> tuple[str, str]:
    """``(family, outcome)`` of an event name: ``"route_timer.fired"`` is
    ``("route_timer", "fired")``; a name without a dot is a family of its own (``step``)."""
    name, _, outcome = str(event).partition(".")
    return name, outcome


def effect_counts(kinds: Any) -> dict[str, int]:
    """``{kind: n}`` of an iterable of effect (or instruction) kinds, in first-seen order."""
    counts: dict[str, int] = {}
    for kind in kinds:
        key = str(kind)
        counts[key] = counts.get(key, 0) + 1
    return counts
