"""The timers' telemetry: the storage family's ``timer.*`` events (docs/telemetry.md).

Sent through ``statecharts.core.telemetry`` (driver ``"durable"``) after the transaction that
settled the timer commits, so a fire rolled back (a batch falling back to one by one) is
never reported. With nothing listening, nothing is built.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime
from functools import partial
from typing import Any

from django.db import transaction

from statecharts.core import telemetry
from statecharts.core.telemetry import TelemetryEvent
from statecharts.stepper import database
from timers.models import Timer

DURABLE = telemetry.Driver.DURABLE.value

_lock = threading.local()


def listening() -> bool:
    return bool(telemetry.listeners)


class LockTimer:
    """Measures how long the firer waited for its execution locks (``with LockTimer():``)."""

    def __enter__(self) -> LockTimer:
        self.started = time.perf_counter() if telemetry.listeners else None
        return self

    def __exit__(self, *exc: object) -> None:
        if self.started is not None:
            _lock.wait = time.perf_counter() - self.started


def timer_event(
    event: TelemetryEvent,
    timer: Timer,
    *,
    now: datetime | None = None,
    session_id: str | None = None,
    **attributes: Any,
) -> None:
    """Emit ``event`` for ``timer`` after the current transaction commits. ``now`` (the
    fire's clock) gives ``lateness_s``: how long after its due time it was handled."""
    if not telemetry.listeners:
        return
    name = timer.event.get("name") if isinstance(timer.event, dict) else None
    data = {
        "timer_id": timer.pk,
        "execution_id": timer.execution_id,
        "send_id": timer.send_id,
        "event_name": name,
        "due": timer.due.isoformat() if timer.due else None,
        "delivery": timer.delivery,
        "codec": timer.codec,
        "caller_context": timer.context,
        **attributes,
    }
    if now is not None and timer.due is not None:
        data["lateness_s"] = (now - timer.due).total_seconds()
    if event is TelemetryEvent.TIMER_FIRED:
        data["lock_wait_s"] = getattr(_lock, "wait", None)
    transaction.on_commit(
        partial(telemetry.emit, event, DURABLE, session_id, **data), using=database()
    )


def bulk_event(event: TelemetryEvent, execution: Any, count: int, **attributes: Any) -> None:
    """One event for timers settled together by one UPDATE (``count`` of them)."""
    if not telemetry.listeners or not count:
        return
    transaction.on_commit(
        partial(
            telemetry.emit,
            event,
            DURABLE,
            execution.session_id,
            execution_id=execution.pk,
            count=count,
            **attributes,
        ),
        using=database(),
    )
