"""The durable stepper's telemetry (``statecharts.core.telemetry``, driver ``"durable"``).

Every event is handed to the listeners **after the transaction that did the work commits**
(``transaction.on_commit``): a step rolled back (a batch of timer fires falling back to one
by one, a crash) is never reported, and a listener never runs inside a step's transaction,
so it cannot slow the lock down or roll the step back. A step's timing (``duration_s``: from
the step's start to the end of its writes, the commit excluded; ``lock_wait_s``: how long the
execution's row lock took) is measured only while something listens.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from functools import partial
from typing import Any

from django.db import transaction

from statecharts.core import telemetry
from statecharts.core.plan import Instruction, InstructionKind
from statecharts.core.telemetry import TelemetryEvent
from statecharts.stepper.sql import database

DURABLE = telemetry.Driver.DURABLE.value

_step = threading.local()


def listening() -> bool:
    return bool(telemetry.listeners)


def after_commit(event: TelemetryEvent, session_id: str | None, /, **attributes: Any) -> None:
    """Emit ``event`` once the current transaction commits (at once outside one)."""
    if not telemetry.listeners:
        return
    transaction.on_commit(
        partial(telemetry.emit, event, DURABLE, session_id, **attributes), using=database()
    )


def step_started() -> None:
    """Mark the start of a step in this thread (its duration is measured from here)."""
    if telemetry.listeners:
        _step.started = time.perf_counter()
        _step.started_ns = time.time_ns()


def lock_waited(seconds: float) -> None:
    _step.lock_wait = seconds


def caller_context_of(entry: Any, given: Any = None) -> Any:
    """The caller context of a step: the one it was given, else one its history entry keeps
    (a ``caller_context`` column, or a key of its input), else None."""
    if given is not None:
        return given
    kept = getattr(entry, "caller_context", None)
    if kept is not None:
        return kept
    raw = getattr(entry, "input", None)
    return raw.get("caller_context") if isinstance(raw, dict) else None


def step(
    execution: Any,
    entry: Any,
    instructions: Iterable[Instruction] = (),
    caller_context: Any = None,
) -> None:
    """``step``: one input recorded (applied, refused or discarded), with its timing."""
    if not telemetry.listeners:
        return
    started = getattr(_step, "started", None)
    now = time.perf_counter()
    raw = entry.input if isinstance(entry.input, dict) else {}
    event = raw.get("event")
    kinds = [i.effect.kind for i in instructions if i.effect is not None]
    after_commit(
        TelemetryEvent.STEP,
        execution.session_id,
        execution_id=execution.pk,
        chart=execution.chart.name or None,
        seq=entry.seq,
        input_kind=raw.get("kind"),
        event_name=event.get("name") if isinstance(event, dict) else None,
        disposition=str(entry.disposition),
        status=str(execution.status),
        duration_s=(now - started) if started is not None else None,
        started_ns=getattr(_step, "started_ns", None),
        lock_wait_s=getattr(_step, "lock_wait", None),
        effects=sum(1 for kind in kinds if not kind.is_trace),
        effect_counts=telemetry.effect_counts(kind for kind in kinds if not kind.is_trace),
        cause=entry.cause,
        caller_context=caller_context_of(entry, caller_context),
    )
    _step.started = _step.started_ns = _step.lock_wait = None


def started(execution: Any) -> None:
    after_commit(
        TelemetryEvent.EXECUTION_STARTED,
        execution.session_id,
        execution_id=execution.pk,
        chart=execution.chart.name or None,
    )


def finished(execution: Any) -> None:
    after_commit(
        TelemetryEvent.EXECUTION_FINISHED,
        execution.session_id,
        execution_id=execution.pk,
        chart=execution.chart.name or None,
        status=str(execution.status),
        outcome=execution.outcome or None,
    )


def halted(execution: Any, budget: dict[str, Any]) -> None:
    after_commit(
        TelemetryEvent.EXECUTION_HALTED,
        execution.session_id,
        execution_id=execution.pk,
        chart=execution.chart.name or None,
        budget=budget,
        reason=execution.failure_reason,
    )


def effect(execution: Any, instruction: Instruction, *, unroutable: str | None = None) -> None:
    """``effect.performed`` (a performer acted on it) or ``effect.unroutable``."""
    effect_ = instruction.effect
    kind = str(effect_.kind) if effect_ is not None else None
    if unroutable is not None:
        after_commit(
            TelemetryEvent.EFFECT_UNROUTABLE,
            execution.session_id,
            execution_id=execution.pk,
            effect=kind,
            reason=unroutable,
        )
    elif instruction.kind is not InstructionKind.OBSERVE:
        after_commit(
            TelemetryEvent.EFFECT_PERFORMED,
            execution.session_id,
            execution_id=execution.pk,
            effect=kind,
            instruction=instruction.kind.value,
        )
