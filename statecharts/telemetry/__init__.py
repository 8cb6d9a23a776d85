"""Telemetry as Django signals and log records (docs/telemetry.md).

Every telemetry event (``statecharts.core.telemetry.TelemetryEvent``), from the memory driver
and the durable stepper alike, is sent as the Django signal of the same name below, with
``sender`` the event and the event's attributes as keyword arguments (``driver`` and
``session_id`` on every one), and logged on the ``statecharts.telemetry`` logger at DEBUG
(the attributes in the record's ``telemetry`` attribute). A signal with no receivers and a
logger not enabled for DEBUG cost a truth test each.

The durable stepper sends them after the step's transaction commits (never inside it: a
receiver cannot roll a step back, and a rolled-back step is never reported). A receiver that
raises is logged (``statecharts.telemetry``, ERROR) and the next one still runs.

Receive one::

    from statecharts import telemetry

    @receiver(telemetry.step)
    def count_steps(sender, driver, session_id, duration_s, disposition, **attributes):
        ...

The apps built on the stepper declare events of their own (``Declaration.telemetry_events``:
a ``StrEnum`` whose members are named ``<family>.<outcome>``, e.g. the routes app's
``route.delivered``); each member has its signal here too (:func:`signal_for`, which the app
also exposes by name, e.g. ``routes.telemetry.delivered``), sent and logged the same way, by
the same listener, and the core's enum is not extended. :func:`declared_events` lists them
(and refuses two families naming one event); :func:`all_signals` is every signal, the core's
and the apps'.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from enum import StrEnum
from functools import partial
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.dispatch import Signal
from django.utils.module_loading import import_string

from statecharts.core import telemetry as core
from statecharts.core.telemetry import TelemetryEvent

log = logging.getLogger("statecharts.telemetry")


class TelemetrySignal(Signal):
    """A signal that subscribes the bridge to the drivers' telemetry while any telemetry
    signal has a receiver (or the logger wants DEBUG records), and unsubscribes it when none
    is left: with nothing listening, the drivers do not even build the events."""

    def connect(self, *args: Any, **kwargs: Any) -> None:
        super().connect(*args, **kwargs)
        refresh()

    def disconnect(self, *args: Any, **kwargs: Any) -> bool:
        disconnected = super().disconnect(*args, **kwargs)
        refresh()
        return disconnected


# The execution family (every driver).
execution_started = TelemetrySignal()
step = TelemetrySignal()
effect_performed = TelemetrySignal()
effect_unroutable = TelemetrySignal()
execution_finished = TelemetrySignal()
execution_halted = TelemetrySignal()
autoforward_dropped = TelemetrySignal()
# The storage family (durable rows: the timers app, the stepper's outbox).
timer_scheduled = TelemetrySignal()
timer_cancelled = TelemetrySignal()
timer_fired = TelemetrySignal()
timer_discarded = TelemetrySignal()
timer_snoozed = TelemetrySignal()
timer_retried = TelemetrySignal()
timer_failed = TelemetrySignal()
timer_expired = TelemetrySignal()
outbox_delivered = TelemetrySignal()
outbox_waiting = TelemetrySignal()
outbox_undeliverable = TelemetrySignal()

SIGNALS: dict[TelemetryEvent, Signal] = {
    TelemetryEvent.EXECUTION_STARTED: execution_started,
    TelemetryEvent.STEP: step,
    TelemetryEvent.EFFECT_PERFORMED: effect_performed,
    TelemetryEvent.EFFECT_UNROUTABLE: effect_unroutable,
    TelemetryEvent.EXECUTION_FINISHED: execution_finished,
    TelemetryEvent.EXECUTION_HALTED: execution_halted,
    TelemetryEvent.AUTOFORWARD_DROPPED: autoforward_dropped,
    TelemetryEvent.TIMER_SCHEDULED: timer_scheduled,
    TelemetryEvent.TIMER_CANCELLED: timer_cancelled,
    TelemetryEvent.TIMER_FIRED: timer_fired,
    TelemetryEvent.TIMER_DISCARDED: timer_discarded,
    TelemetryEvent.TIMER_SNOOZED: timer_snoozed,
    TelemetryEvent.TIMER_RETRIED: timer_retried,
    TelemetryEvent.TIMER_FAILED: timer_failed,
    TelemetryEvent.TIMER_EXPIRED: timer_expired,
    TelemetryEvent.OUTBOX_DELIVERED: outbox_delivered,
    TelemetryEvent.OUTBOX_WAITING: outbox_waiting,
    TelemetryEvent.OUTBOX_UNDELIVERABLE: outbox_undeliverable,
}
assert set(SIGNALS) == set(TelemetryEvent)  # one signal per event, always


# The apps' events (Declaration.telemetry_events): one signal per member, made the first time
# it is asked for. (A StrEnum member hashes as its name: two families naming one event would
# share a signal, which declared_events refuses.)
_app_signals: dict[StrEnum, TelemetrySignal] = {}
_app_signals_lock = threading.Lock()


def signal_for(event: StrEnum) -> Signal:
    """The Django signal of ``event``: a core event's (:data:`SIGNALS`), or an app event's
    (one per member, the same object every time)."""
    if isinstance(event, TelemetryEvent):
        return SIGNALS[event]
    signal = _app_signals.get(event)
    if signal is None:
        with _app_signals_lock:
            signal = _app_signals.setdefault(event, TelemetrySignal())
    return signal


def declared_events() -> list[StrEnum]:
    """Every event the installed apps declare (``Declaration.telemetry_events``), in
    ``INSTALLED_APPS`` order. ImproperlyConfigured: a path that is not a ``StrEnum``, a name
    that is not ``<family>.<outcome>``, or a name the core or another enum already has."""
    from statecharts.conf import declarations

    owners: dict[str, str] = {event.value: "statecharts.core.telemetry" for event in TelemetryEvent}
    found: list[StrEnum] = []
    for declaration in declarations():
        for path in declaration.telemetry_events:
            enum = import_string(path)
            if not (isinstance(enum, type) and issubclass(enum, StrEnum)):
                raise ImproperlyConfigured(f"{declaration.app}: {path!r} is not a StrEnum")
            for member in enum:
                family, outcome = core.family(member)
                if not family or not outcome:
                    raise ImproperlyConfigured(
                        f"{path}: the event {member.value!r} is not named <family>.<outcome>"
                    )
                owner = owners.setdefault(member.value, path)
                if owner != path:
                    raise ImproperlyConfigured(
                        f"the telemetry event {member.value!r} is declared by {owner} and {path}"
                    )
                found.append(member)
    return found


def all_signals() -> dict[StrEnum, Signal]:
    """Every telemetry signal: the core's events', then the installed apps' declared ones."""
    return {**SIGNALS, **{event: signal_for(event) for event in declared_events()}}


def listening() -> bool:
    """Whether anything listens (a signal's receiver, DEBUG records, the OpenTelemetry
    bridge, a listener of the core's): test it before building an event's attributes."""
    return bool(core.listeners)


def after_commit(event: StrEnum, session_id: str | None, /, **attributes: Any) -> None:
    """Emit ``event`` (driver ``"durable"``) once the stepper database's current transaction
    commits, at once outside one: a write rolled back is never reported, and no receiver
    runs inside a step's transaction. Nothing is done when nothing listens."""
    if not core.listeners:
        return
    from django.db import transaction

    from statecharts.stepper import database

    transaction.on_commit(
        partial(core.emit, event, core.Driver.DURABLE.value, session_id, **attributes),
        using=database(),
    )


def bridge(event: StrEnum, attributes: Mapping[str, Any]) -> None:
    """The listener that sends the signal and writes the log record of ``event``."""
    signal = SIGNALS[event] if isinstance(event, TelemetryEvent) else signal_for(event)
    if signal.receivers:
        for receiver, answer in signal.send_robust(sender=event, **attributes):
            if isinstance(answer, Exception):
                log.error(
                    "telemetry receiver %r failed on %s: %s",
                    receiver,
                    event,
                    answer,
                    exc_info=answer,
                )
    if log.isEnabledFor(logging.DEBUG):
        log.debug(
            "%s %s %s",
            event.value,
            attributes.get("driver"),
            attributes.get("session_id"),
            extra={"telemetry": {"telemetry_event": event.value, **attributes}},
        )


def _listener_failed(listener: Any, event: StrEnum, exc: BaseException) -> None:
    log.error("telemetry listener %r failed on %s: %s", listener, event, exc, exc_info=exc)


_logging_wanted = False


def refresh() -> None:
    """Subscribe the bridge while a signal has a receiver or DEBUG records are wanted."""
    if not _installed:
        return
    if (
        _logging_wanted
        or any(signal.receivers for signal in SIGNALS.values())
        or any(signal.receivers for signal in tuple(_app_signals.values()))
    ):
        core.subscribe(bridge)
    else:
        core.unsubscribe(bridge)


_installed = False


def install() -> None:
    """Connect the signals and logging to every driver's telemetry (the ``statecharts`` app
    does it in ``ready()``, after Django configured logging). Whether the
    ``statecharts.telemetry`` logger wants DEBUG records is read here: call it again after
    changing the logging configuration at run time."""
    global _installed, _logging_wanted
    _installed = True
    core.on_listener_error = _listener_failed
    _logging_wanted = log.isEnabledFor(logging.DEBUG)
    refresh()
