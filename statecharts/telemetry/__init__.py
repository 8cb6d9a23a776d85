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
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from django.dispatch import Signal

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
    TelemetryEvent.OUTBOX_DELIVERED: outbox_delivered,
    TelemetryEvent.OUTBOX_WAITING: outbox_waiting,
    TelemetryEvent.OUTBOX_UNDELIVERABLE: outbox_undeliverable,
}
assert set(SIGNALS) == set(TelemetryEvent)  # one signal per event, always


def bridge(event: TelemetryEvent, attributes: Mapping[str, Any]) -> None:
    """The listener that sends the signal and writes the log record of ``event``."""
    signal = SIGNALS[event]
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


def _listener_failed(listener: Any, event: TelemetryEvent, exc: BaseException) -> None:
    log.error("telemetry listener %r failed on %s: %s", listener, event, exc, exc_info=exc)


_logging_wanted = False


def refresh() -> None:
    """Subscribe the bridge while a signal has a receiver or DEBUG records are wanted."""
    if not _installed:
        return
    if _logging_wanted or any(signal.receivers for signal in SIGNALS.values()):
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
