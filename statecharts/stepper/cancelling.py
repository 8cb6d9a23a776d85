"""A cancel, as the execution's status's rule says (``statecharts.statuses``): with
``<onexit>`` when its position can be stepped (by its own chart, or by the stored chart the
position names), without running chart code when it cannot, and recorded as discarded once
it has finished. Inside the step's transaction, under the execution's lock.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from statecharts import signals
from statecharts.core.errors import StatechartError
from statecharts.core.model import Chart as CompiledChart
from statecharts.core.position import DamagedDatamodelError, Position, PositionError, decode
from statecharts.drivers.durable import Input
from statecharts.exceptions import StepRefused
from statecharts.models import Chart, Execution, HistoryEntry
from statecharts.models.history import Disposition
from statecharts.runtime import compiled_chart
from statecharts.statuses import CancelRule, ExecutionStatus, rules
from statecharts.stepper import observing, sql
from statecharts.stepper.applying import _apply, _load_position
from statecharts.stepper.recording import (
    _UNAPPLIED_FIELDS,
    _record_discarded,
    _stored_input,
    unsteppable_reason,
)
from statecharts.stepper.transaction import StepResult


def _cancel_locked(
    execution: Execution,
    step_input: Input,
    now: datetime,
    outbox: list[int],
    caller_context: dict[str, Any] | None,
    cause: dict[str, Any] | None = None,
) -> tuple[StepResult, StepRefused | None]:
    """Cancel, as its status's rule says: with ``<onexit>`` when the position can be stepped,
    without running chart code when it cannot, and recorded as discarded once finished."""
    rule = rules(execution.status).cancel
    if rule is CancelRule.FINISHED:
        reason = f"execution {execution.status}"
        return _record_discarded(
            execution, step_input, now, reason, cause, caller_context
        ), None
    why = execution.failure_reason
    if rule is not CancelRule.WITHOUT_CHART_CODE:
        found: tuple[CompiledChart, Position] | None = None
        try:
            compiled = compiled_chart(execution.chart)
            found = (compiled, _load_position(execution, compiled))
        except StatechartError as exc:  # (a source that no longer compiles, too)
            found = _position_by_its_chart(execution)
            why = str(exc) if isinstance(exc, PositionError) else unsteppable_reason(
                execution, exc
            )
        if found is not None:
            compiled, position = found
            try:
                return _apply(
                    execution, compiled, position, step_input, now, outbox, caller_context, cause
                )
            except DamagedDatamodelError as exc:
                why = f"{type(exc).__name__}: {exc}"
    return _cancel_without_chart_code(
        execution, step_input, now, why, cause, caller_context
    ), None


def _position_by_its_chart(execution: Execution) -> tuple[CompiledChart, Position] | None:
    """The execution's position decoded by the stored chart it names, when its own chart no
    longer matches it (it needs migration: damage, or its chart row changed), to cancel it
    with ``<onexit>``; None when no stored chart decodes it."""
    try:
        sha256 = decode(bytes(execution.position)).chart.sha256
    except PositionError:
        return None
    for row in Chart.objects.using(sql.database()).filter(content_hash=sha256):
        try:
            compiled = compiled_chart(row)
            return compiled, decode(bytes(execution.position), chart=compiled, require_running=True)
        except StatechartError:  # (its source no longer compiles either)
            continue
    return None


def _cancel_without_chart_code(
    execution: Execution,
    step_input: Input,
    now: datetime,
    why: str,
    cause: dict[str, Any] | None = None,
    caller_context: dict[str, Any] | None = None,
) -> StepResult:
    """Cancel an execution whose stored data cannot be stepped, as data: no ``<onexit>`` runs
    (there is no configuration to run it in); its timers are discarded like any finished
    execution's (``execution_finished``)."""
    execution.status = ExecutionStatus.CANCELLED
    execution.outcome = "cancelled"
    execution.ended = now
    reason = f"cancelled without running chart code: {why}"
    execution.failure_reason = reason[:10_000]
    execution.steps += 1
    execution.updated = now
    sql.update_row(execution, (*_UNAPPLIED_FIELDS, "outcome", "ended"))
    entry = HistoryEntry.of(
        execution,
        **_stored_input(step_input),
        disposition=Disposition.APPLIED,
        reason=reason,
        cause=cause,
        caller_context=caller_context,
        created=now,
    )
    sql.insert_row(entry)
    observing.step(execution, entry)
    observing.finished(execution)
    signals.execution_finished.send(Execution, execution=execution)
    return StepResult(execution, entry, ())
