"""What a step writes on the execution row, and an input recorded as not applied.

The fields a step may change (``_RUNNING_STEP_FIELDS``, ``_STEP_FIELDS``,
``_UNAPPLIED_FIELDS``), the history row's stored input (``_stored_input``, through the
payload codec), and the inputs a step records without applying them: discarded (nothing
should be), refused (the status refuses inputs), unsteppable (the position cannot be read
back or its chart no longer compiles: the status then says so). All of it runs inside the
step's transaction, under the execution's lock (``statecharts.stepper.transaction``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from statecharts import signals
from statecharts.core.errors import StatechartError
from statecharts.core.position import ChartMismatchError, PositionError
from statecharts.drivers.durable import Input
from statecharts.exceptions import Halted, NeedsMigration, NeedsRepair, StepRefused
from statecharts.models import Execution, HistoryEntry
from statecharts.models.history import Disposition
from statecharts.policies import codecs
from statecharts.statuses import ExecutionStatus
from statecharts.stepper import observing, sql
from statecharts.stepper.transaction import StepResult

# What a step may change; the rest of the row (chart, session id, key, metadata) is fixed.
# A step that leaves the execution running changes only the first five (``_record_ending``
# writes the rest, and only when it finishes).
_RUNNING_STEP_FIELDS = (
    "position",
    "status",
    "configuration",
    "active_states",
    "steps",
    "updated",
)
_STEP_FIELDS = (
    *_RUNNING_STEP_FIELDS,
    "ended",
    "outcome",
    "donedata",
    "donedata_error",
    "failure_reason",
)
_UNAPPLIED_FIELDS = ("steps", "updated", "status", "failure_reason")


# An event's routing fields, left out of a stored input when unset (None): most events have
# none of them, and the history row is written at every step (issue 31: four keys of null
# were about 60 of its bytes). ``Event.from_dict`` reads an absent one as None.
_UNSET_WHEN_ABSENT = ("sendid", "origin", "origintype", "invokeid")


def stored_form(raw: Any) -> Any:
    """An input (``Input.to_dict()``) as a history row keeps it: its event's unset routing
    fields left out. Rows written before kept them as null; both read back as the same
    input, and compare equal once both are in this form (an idempotent repeat's check)."""
    event = raw.get("event") if isinstance(raw, dict) else None
    if isinstance(event, dict) and any(
        key in event and event[key] is None for key in _UNSET_WHEN_ABSENT
    ):
        kept = {
            key: value
            for key, value in event.items()
            if value is not None or key not in _UNSET_WHEN_ABSENT
        }
        return {**raw, "event": kept}
    return raw


def _stored_input(step_input: Input) -> dict[str, Any]:
    """The history row's ``input`` and ``codec``: the input in its stored form, as the
    payload codec writes it (``statecharts.policies.codecs``; the default stores it as it
    is)."""
    stored, codec = codecs.encode_input(stored_form(step_input.to_dict()))
    return {"input": stored, "codec": codec}


def _record_discarded(
    execution: Execution,
    step_input: Input,
    now: datetime,
    reason: str,
    cause: dict[str, Any] | None,
    caller_context: dict[str, Any] | None = None,
) -> StepResult:
    """Record an input that was not applied because nothing should be (recorded, signalled)."""
    result = _record_unapplied(
        execution,
        step_input,
        now,
        Disposition.DISCARDED,
        reason,
        cause=cause,
        caller_context=caller_context,
    )
    signals.input_discarded.send(Execution, execution=execution, entry=result.entry)
    return result


def _record_unapplied(
    execution: Execution,
    step_input: Input,
    now: datetime,
    disposition: str,
    reason: str = "",
    *,
    effects: list[dict[str, Any]] | None = None,
    cause: dict[str, Any] | None = None,
    caller_context: dict[str, Any] | None = None,
) -> StepResult:
    execution.steps += 1
    execution.updated = now
    sql.update_row(execution, _UNAPPLIED_FIELDS)
    entry = HistoryEntry.of(
        execution,
        **_stored_input(step_input),
        disposition=disposition,
        effects=effects or [],
        reason=reason,
        cause=cause,
        caller_context=caller_context,
        created=now,
    )
    sql.insert_row(entry)
    observing.step(execution, entry)
    return StepResult(execution, entry, ())


def _refusal(execution: Execution) -> StepRefused:
    kind = {
        ExecutionStatus.HALTED: Halted,
        ExecutionStatus.NEEDS_MIGRATION: NeedsMigration,
    }.get(execution.status, NeedsRepair)
    said = {
        ExecutionStatus.HALTED: "is halted",
        ExecutionStatus.NEEDS_MIGRATION: "needs migration",
    }.get(execution.status, "needs repair")
    return kind(f"execution {execution.session_id} {said}: {execution.failure_reason}")


def unsteppable_reason(execution: Execution, exc: StatechartError) -> str:
    """Why ``execution`` cannot be stepped, for its ``failure_reason``: its position cannot
    be read back, or its chart's stored source no longer compiles (an upgrade that tightened
    validation, a database edit: ``runtime.compiled_chart`` raised)."""
    if isinstance(exc, PositionError):
        return f"{type(exc).__name__}: {exc}"
    return (
        f"its chart {execution.chart_id} no longer compiles from its stored source "
        f"({type(exc).__name__}: {exc}); repair the chart row, or cancel the execution"
    )[:10_000]


def _mark_unsteppable(execution: Execution, exc: StatechartError) -> None:
    """The status an execution that cannot be stepped gets: a chart that no longer matches
    its position needs migration; anything else (its stored data, its chart's source) needs
    repair. ``failure_reason`` says why."""
    if isinstance(exc, ChartMismatchError):
        execution.status = ExecutionStatus.NEEDS_MIGRATION
    else:
        execution.status = ExecutionStatus.NEEDS_REPAIR
    execution.failure_reason = unsteppable_reason(execution, exc)


def _unsteppable(
    execution: Execution,
    step_input: Input,
    now: datetime,
    exc: StatechartError,
    cause: dict[str, Any] | None = None,
    caller_context: dict[str, Any] | None = None,
) -> tuple[StepResult, StepRefused]:
    """The stored position cannot be stepped (or its chart no longer compiles): see
    ``_mark_unsteppable``. Either way the input is refused and recorded, and the status says
    so (visible to an operator), instead of the same failure repeating on every input."""
    _mark_unsteppable(execution, exc)
    result = _record_unapplied(
        execution,
        step_input,
        now,
        Disposition.REFUSED,
        execution.failure_reason,
        cause=cause,
        caller_context=caller_context,
    )
    refusal = _refusal(execution)
    refusal.__cause__ = exc
    return result, refusal


def record_operation(
    execution: Execution,
    *,
    action: str,
    row: dict[str, Any],
    reason: str,
    now: datetime,
    caller_context: dict[str, Any] | None = None,
) -> HistoryEntry:
    """Record an operator's action on a row of a locked ``execution`` (a timer fired now,
    cancelled or rescheduled, ...) as its next history entry, disposition ``operated``: the
    input names the ``action`` and the ``row`` it touched, ``reason`` is what the operator
    typed, ``caller_context`` who did it (``statecharts.policies.attribution``). Its
    position does not change; replay skips the entry. Call it inside the transaction that
    locked ``execution`` (``lock``) and did the action."""
    execution.steps += 1
    execution.updated = now
    execution.save(update_fields=["steps", "updated"])
    entry = HistoryEntry.of(
        execution,
        input={"kind": "operation", "action": action, "row": row},
        disposition=Disposition.OPERATED,
        created=now,
        reason=reason[:10_000],
        caller_context=caller_context,
    )
    entry.save(using=sql.database())
    return entry
