"""The step proper, inside the step's transaction under the execution's lock: advance the
interpreter (the input, then self-sends, to quiescence), with the host's registered-types
snapshot, reachability and route answers; over a budget, roll the step back and halt it;
else perform every instruction, persist the new position and append one history row
(``statecharts.stepper.transaction`` has the whole loop). And the thread's cache of decoded
positions (``_load_position``).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

from statecharts import signals
from statecharts.conf import statecharts_settings
from statecharts.core import effects as fx
from statecharts.core.host import ROUTE_OK, Host, RouteAnswer
from statecharts.core.model import Chart as CompiledChart
from statecharts.core.plan import InstructionKind
from statecharts.core.position import ChartIdentity, Position, decode, encode
from statecharts.core.state import State
from statecharts.drivers.durable import START, Advance, Input, advance, status_of
from statecharts.exceptions import EventUnhandled, Halted, StartRefused, StepRefused
from statecharts.models import Execution, HistoryEntry
from statecharts.models.history import Disposition
from statecharts.runtime import interpreter_for
from statecharts.statuses import LIVE_STATUSES, TERMINAL_STATUSES, ExecutionStatus
from statecharts.stepper import observing, sql
from statecharts.stepper.performing import (
    StepContext,
    perform,
    registered_types,
    registered_types_record,
    route_checker,
    writes_no_rows,
)
from statecharts.stepper.recording import (
    _RUNNING_STEP_FIELDS,
    _STEP_FIELDS,
    _record_unapplied,
    _stored_input,
)
from statecharts.stepper.transaction import UNHANDLED, StepResult, phase

# Decoding the same blob twice gives the same state; reusing the very State object lets the
# thread's interpreter keep its datamodel engine alive instead of rebuilding it.
_positions = threading.local()


def _load_position(execution: Execution, compiled: CompiledChart) -> Position:
    blob = bytes(execution.position)
    cache: dict[int, tuple[bytes, Position]] | None = getattr(_positions, "cache", None)
    if cache is None:
        cache = _positions.cache = {}
    hit = cache.get(execution.pk)
    if hit is not None and hit[0] == blob and hit[1].chart.sha256 == compiled.source_hash:
        return hit[1]
    return decode(blob, chart=compiled, require_running=True)


def _remember_position(execution: Execution, blob: bytes, position: Position) -> None:
    cache: dict[int, tuple[bytes, Position]] | None = getattr(_positions, "cache", None)
    if cache is None:
        cache = _positions.cache = {}
    if len(cache) >= 4096:
        cache.clear()
    cache[execution.pk] = (blob, position)


def _apply(
    execution: Execution,
    compiled: CompiledChart,
    position: Position | None,
    step_input: Input,
    now: datetime,
    outbox: list[int],
    caller_context: dict[str, Any] | None = None,
    cause: dict[str, Any] | None = None,
    strict: bool = False,
) -> tuple[StepResult, StepRefused | None]:
    interpreter = interpreter_for(compiled, tracing=execution.tracing)
    answers: dict[str, bool] = {}
    database = sql.database()

    def is_reachable(session_id: str) -> bool:
        if session_id not in answers:
            answers[session_id] = (
                Execution.objects.using(database)
                .filter(session_id=session_id, status__in=LIVE_STATUSES)
                .exists()
            )
        return answers[session_id]

    # A route's answers about the targets of this step's sends (statecharts.core.host), in
    # the order they were asked: recorded with the registered types, so replay gets them.
    route_answers: list[list[Any]] = []
    checker = route_checker()

    def check_route(route: str, send_type: str, target: str | None) -> RouteAnswer:
        answer = ROUTE_OK if checker is None else checker(execution, route, send_type, target)
        route_answers.append([route, send_type, target, answer.to_text()])
        return answer

    host = Host(
        registered_types(),
        is_reachable,
        step_clock(),
        check_route=check_route,
        chart=chart_facts(execution),
    )
    outcome = advance(
        interpreter,
        position.state if position is not None else None,
        step_input,
        send_budget=statecharts_settings.SEND_BUDGET,
        host=host,
    )
    phase("advanced")
    chart = execution.chart
    identity = ChartIdentity(compiled.source_hash, chart.name or None, chart.version or None)
    state = outcome.state
    halted = outcome.halted or _over_host_budgets(outcome)
    blob = b"" if halted else encode(state, identity)
    if not halted and len(blob) > statecharts_settings.POSITION_BUDGET_BYTES:
        halted = {
            "budget": "position_bytes",
            "limit": statecharts_settings.POSITION_BUDGET_BYTES,
            "used": len(blob),
        }
    if halted:
        return _halt(execution, position, step_input, now, halted, cause, caller_context)
    if outcome.unhandled and strict:
        return _refuse_unhandled(execution, step_input, now, cause, caller_context)
    execution.position = blob
    execution.status = status_of(state)
    execution.configuration = _atomic_ids(compiled, state)
    execution.active_states = _active_ids(compiled, state)
    execution.steps += 1
    execution.updated = now
    finished = execution.status in TERMINAL_STATUSES
    _record_ending(execution, outcome, now)
    written = _RUNNING_STEP_FIELDS if state.running else _STEP_FIELDS
    # When performing writes no row, nothing is written between the execution's UPDATE and
    # the history INSERT: the two go together (one statement on PostgreSQL). Otherwise the
    # UPDATE comes first, so performers see the execution's new row.
    together = execution.pk is not None and writes_no_rows(outcome.instructions)
    if execution.pk is None:
        execution.save(force_insert=True, using=database)
    elif not together:
        sql.update_row(execution, written)
    if step_input.kind == START and observing.listening():
        observing.started(execution)  # (before what the start performs: the memory order)
    context = StepContext(execution, state, now, execution.steps, caller_context, outbox)
    summary = perform(context, outcome.instructions)
    entry = HistoryEntry.of(
        execution,
        **_stored_input(step_input),
        disposition=Disposition.APPLIED,
        effects=summary,
        reachability=answers,
        registered_types=(
            {**registered_types_record(), "route_answers": route_answers}
            if route_answers
            else registered_types_record()
        ),
        position_sha256=hashlib.sha256(blob).hexdigest(),
        reason=UNHANDLED if outcome.unhandled else "",
        cause=cause,
        caller_context=caller_context,
        created=now,
    )
    if together:
        sql.update_and_insert(execution, written, entry)
    else:
        sql.insert_row(entry)
    if state.running:
        _remember_position(execution, blob, Position(identity, state))
    effects = tuple(outcome.effects)
    instructions = tuple(outcome.instructions)
    if observing.listening():
        observing.step(execution, entry, instructions, caller_context)
        if finished:
            observing.finished(execution)
    signals.step_finished.send(
        Execution, execution=execution, entry=entry, effects=effects, instructions=instructions
    )
    if finished:
        signals.execution_finished.send(Execution, execution=execution)
    return StepResult(execution, entry, effects, instructions), None


def chart_facts(execution: Execution) -> Callable[[], dict[str, Any]]:
    """``_x.chart`` for ``execution`` (``statecharts.core.host.Host.chart``): its chart
    row's version and, when it was migrated, the version it came from and when, from its
    last ``migrated`` history entry (never the clock). Read only when the chart's code names
    ``_x`` and its datamodel is built; replay reads the same."""

    def facts() -> dict[str, Any]:
        migrated = (
            HistoryEntry.objects.using(sql.database())
            .filter(execution_id=execution.pk, disposition=Disposition.MIGRATED)
            .order_by("-seq")
            .values_list("input", "created")
            .first()
        )
        source = (migrated[0] or {}).get("from") or {} if migrated is not None else {}
        return {
            "version": execution.chart.version or None,
            "migratedFrom": (source.get("version") or None) if migrated is not None else None,
            "migratedAt": migrated[1].isoformat() if migrated is not None else None,
        }

    return facts


def step_clock() -> Any:
    """The monotonic clock the step's time budget reads (``STEP_CLOCK``; tests inject one)."""
    return statecharts_settings.imported("STEP_CLOCK")


def _over_host_budgets(outcome: Advance) -> dict[str, Any] | None:
    """The budget only the host can count: the delayed sends one step schedules (the core
    counts the others, ``output_bytes`` included, as the step runs)."""
    scheduled = sum(1 for i in outcome.outgoing if i.kind is InstructionKind.SCHEDULE)
    limit = statecharts_settings.DELAYED_SENDS_BUDGET
    if scheduled > limit:
        return {"budget": "delayed_sends", "limit": limit, "used": scheduled}
    return None


def describe_budget(halted: dict[str, Any]) -> str:
    budget, limit, used = halted.get("budget"), halted.get("limit"), halted.get("used")
    detail = halted.get("detail") or f"{used} > {limit}"
    return (
        f"a step went over its {budget} budget ({detail}) and was rolled back: "
        "the chart probably loops, or does far more in one step than it should"
    )


def _halt(
    execution: Execution,
    position: Position | None,
    step_input: Input,
    now: datetime,
    halted: dict[str, Any],
    cause: dict[str, Any] | None = None,
    caller_context: dict[str, Any] | None = None,
) -> tuple[StepResult, StepRefused]:
    """The step went over a budget: nothing of it is kept (no effect performed, the position
    as it was), the execution is ``halted`` with the budget that tripped, and the input is
    recorded as refused. A wall-clock cut is not deterministic; the record is what replay
    reads (a refused input is not re-run)."""
    reason = describe_budget(halted)
    if position is None:  # a start has no earlier state to keep: nothing is written
        raise StartRefused(f"the chart could not start: {reason}")
    execution.status = ExecutionStatus.HALTED
    execution.failure_reason = reason
    result = _record_unapplied(
        execution,
        step_input,
        now,
        Disposition.REFUSED,
        reason,
        effects=[{"kind": "budget_exhausted", **halted}],
        cause=cause,
        caller_context=caller_context,
    )
    observing.halted(execution, halted)
    signals.execution_halted.send(Execution, execution=execution, entry=result.entry)
    return result, Halted(f"execution {execution.session_id} halted: {reason}")


def _refuse_unhandled(
    execution: Execution,
    step_input: Input,
    now: datetime,
    cause: dict[str, Any] | None,
    caller_context: dict[str, Any] | None,
) -> tuple[StepResult, StepRefused]:
    """Strict mode: no transition was selected for the event. Nothing of the step is kept
    (no effect performed: a ``<finalize>``'s assignments and autoforwarded copies included;
    the position as it was) and the input is recorded as refused; replay does not re-run it."""
    assert step_input.event is not None
    result = _record_unapplied(
        execution,
        step_input,
        now,
        Disposition.REFUSED,
        f"{UNHANDLED} (strict: refused, nothing kept)",
        cause=cause,
        caller_context=caller_context,
    )
    return result, EventUnhandled(
        f"execution {execution.session_id}: no transition takes {step_input.event.name!r} "
        f"in {', '.join(execution.configuration) or 'its configuration'}; nothing was kept "
        f"(history entry {result.entry.seq})"
    )


def _atomic_ids(compiled: CompiledChart, state: State) -> list[str]:
    states = compiled.states
    return [states[i].id for i in state.configuration if states[i].is_atomic]


def _active_ids(compiled: CompiledChart, state: State) -> list[str]:
    """Every active state id, ancestors included (what ``Execution.objects.in_state`` finds)."""
    states = compiled.states
    return [states[i].id for i in state.configuration if i != 0]


def _record_ending(execution: Execution, outcome: Advance, now: datetime) -> None:
    state = outcome.state
    if state.running:
        return
    execution.ended = now
    execution.outcome = state.outcome or ""
    for effect in outcome.effects:
        if effect.kind == fx.DONE:
            execution.donedata = effect.data.get("donedata")
            if effect.data.get("final"):
                execution.configuration = [effect.data["final"]]
                execution.active_states = [effect.data["final"]]
            if effect.data.get("donedata_error"):
                execution.donedata_error = str(effect.data.get("error") or "")
            elif effect.data.get("error"):
                execution.failure_reason = f"datamodel error: {effect.data['error']}"
