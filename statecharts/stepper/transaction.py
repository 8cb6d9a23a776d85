"""One step: every input to an execution is one database transaction.

The loop, for each input::

    with transaction.atomic(durable=True):
        lock the execution row (select_for_update)
        what does its status do with the input (statecharts.statuses)? apply it; refuse it
            (recorded); discard it (recorded: it has finished); a cancel is applied, with or
            without running chart code
        load the position blob (re-checking the chart identity)
        advance (statecharts.drivers.durable: the input, then self-sends, to quiescence),
            with the host's registered-types snapshot and reachability answers
        over a budget? roll the step back: keep the position, mark it halted, record why
        perform every instruction (statecharts.stepper.performing)
        persist the new position and append one history row (with the snapshot and answers)
    after commit (statecharts.stepper.delivery): deliver the outbox rows this step wrote

A crash anywhere before the commit leaves the previous committed state; a crash after it
leaves outbox rows that the sweeper (``statecharts.stepper.delivery.deliver_pending``)
delivers. **Each step writes only rows of its own execution** (its row, its history, its
outbox, rows owned by it such as its timers): anything that crosses to another execution
goes through the outbox and is applied in that execution's own step.

The statements of a step (the lock, the execution's UPDATE, the history INSERT) are compiled
once per process (``statecharts.stepper.sql``): the same SQL and the same field conversions as
the ORM calls they replace, without the ORM's per-call compiling. So a step does not send
Django's ``pre_save``/``post_save`` for the execution or its history rows (``start``'s INSERT
of the execution still does); receive ``statecharts.signals`` instead. Inside
``batched_writes`` (a batch of steps in one transaction: a chunk of timer fires) the
execution's UPDATE and the history INSERT of each step are held on PostgreSQL and sent with
the batch's others in one statement, before anything else runs in the transaction
(``statecharts.stepper.postgres.WriteBehind``); the entry has its id at once.
"""

from __future__ import annotations

import hashlib
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction

from statecharts import signals
from statecharts.conf import statecharts_settings
from statecharts.core import effects as fx
from statecharts.core.datamodel import check_tagged
from statecharts.core.effects import Effect
from statecharts.core.errors import StatechartError
from statecharts.core.host import ROUTE_OK, Host, RouteAnswer
from statecharts.core.model import Chart as CompiledChart
from statecharts.core.plan import Instruction, InstructionKind
from statecharts.core.position import (
    ChartIdentity,
    ChartMismatchError,
    DamagedDatamodelError,
    Position,
    PositionError,
    decode,
    encode,
)
from statecharts.core.state import State
from statecharts.drivers.durable import CANCEL, START, Advance, Input, advance, status_of
from statecharts.exceptions import (
    BusinessKeyInUse,
    Halted,
    IdempotencyConflict,
    NeedsMigration,
    NeedsRepair,
    StartRefused,
    StepRefused,
)
from statecharts.models import AppliedMessage, Chart, Execution, HistoryEntry
from statecharts.models.history import Disposition
from statecharts.policies import codecs, idempotency
from statecharts.runtime import compiled_chart, interpreter_for
from statecharts.statuses import (
    LIVE_STATUSES,
    TERMINAL_STATUSES,
    CancelRule,
    ExecutionStatus,
    InputRule,
    rules,
)
from statecharts.stepper import observing, sql
from statecharts.stepper.performing import (
    NoPerformer,
    StepContext,
    guard_input,
    perform,
    performer_for,
    registered_types,
    registered_types_record,
    route_checker,
    writes_no_rows,
)

# Tests install a callable here to stop a real process at a phase of the step ("locked",
# "advanced", "before_commit", "committed") and kill it there. It is never set otherwise.
fault_hook: Callable[[str], None] | None = None


def phase(name: str) -> None:
    if fault_hook is not None:
        fault_hook(name)


@dataclass(frozen=True, slots=True)
class StepResult:
    execution: Execution
    entry: HistoryEntry
    effects: tuple[Effect, ...]
    # One instruction per effect, in order (the planner's): what the step asked for.
    instructions: tuple[Instruction, ...] = ()
    # True when the input repeated an earlier one's idempotency key: nothing was applied, and
    # ``entry`` is the earlier input's history entry (what it did then).
    repeated: bool = False

    @property
    def disposition(self) -> str:
        return self.entry.disposition

    @property
    def applied(self) -> bool:
        return self.entry.disposition == Disposition.APPLIED


# ---- starting ----------------------------------------------------------------------------------


def start_step(
    chart: Chart,
    outbox: list[int],
    *,
    data: dict[str, Any] | None = None,
    business_key: str | None = None,
    metadata: dict[str, Any] | None = None,
    session_id: str | None = None,
    now: datetime | None = None,
    caller_context: dict[str, Any] | None = None,
    io_processors: dict[str, str] | None = None,
    parent: Execution | None = None,
    invokeid: str | None = None,
    invoke_ordinal: int | None = None,
    subject: Any = None,
    idempotency_key: str | None = None,
    tracing: bool = False,
    sender: dict[str, Any] | None = None,
) -> StepResult:
    """Create an execution of ``chart`` and run it to its first stable configuration, in one
    transaction; the outbox ids it wrote are appended to ``outbox``. ``parent``, ``invokeid``
    and ``invoke_ordinal`` start the child of an ``<invoke>`` (``_event`` of what it sends to
    ``#_parent`` carries the invoke id; one child per (parent, ordinal)).

    ``idempotency_key``: unique per chart *name* (``statecharts.policies.idempotency``); a start
    that
    repeats one returns the execution the first started (``repeated``), starting nothing,
    and one that asked for something else raises ``IdempotencyConflict``."""
    observing.step_started()
    compiled = compiled_chart(chart)
    if data is not None:
        check_tagged(data)  # ValueError names the bad path; nothing is written
    asked = idempotency.start_content(data, business_key, metadata, session_id)
    session_id = session_id or uuid.uuid4().hex
    database = sql.database()
    written = len(outbox)
    try:
        with transaction.atomic(using=database, durable=True):
            if idempotency_key is not None:
                earlier = idempotency.earlier_start(chart, idempotency_key, asked, using=database)
                if earlier is not None:
                    return StepResult(earlier[0], earlier[1], (), (), repeated=True)
            if (
                business_key is not None
                and Execution.objects.using(database)
                .filter(chart=chart, business_key=business_key)
                .exists()
            ):
                raise IntegrityError("business key in use")
            now = now or statecharts_settings.now()
            execution = Execution(
                chart=chart,
                session_id=session_id,
                business_key=business_key,
                metadata=metadata or {},
                parent=parent,
                invoke_ordinal=invoke_ordinal,
                invokeid=invokeid or "",
                tracing=tracing,
                created=now,
            )
            if subject is not None:
                execution.subject = subject  # (statecharts.policies.subjects checked it)
            start_input = Input.start(
                session_id,
                data,
                io_processors,
                parent_session_id=parent.session_id if parent is not None else None,
                invokeid=invokeid,
                sender=sender,  # who started it, when a door checked (recorded with it)
            )
            result, _ = _apply(
                execution, compiled, None, start_input, now, outbox, caller_context
            )
            if idempotency_key is not None:
                idempotency.remember_start(execution, idempotency_key, asked, now, using=database)
                HistoryEntry.objects.using(database).filter(pk=result.entry.pk).update(
                    idempotency_key=idempotency_key
                )
                result.entry.idempotency_key = idempotency_key
            phase("before_commit")
    except IntegrityError:
        # Checked first for a clear error; the unique constraints settle a concurrent race:
        # the same idempotency key first (the other attempt won: its result is this one's).
        if idempotency_key is not None:
            earlier = idempotency.earlier_start(chart, idempotency_key, asked, using=database)
            if earlier is not None:
                del outbox[written:]  # nothing of this attempt was committed
                return StepResult(earlier[0], earlier[1], (), (), repeated=True)
        if business_key is not None and (
            Execution.objects.using(database)
            .filter(chart=chart, business_key=business_key)
            .exists()
        ):
            raise BusinessKeyInUse(
                f"chart {chart} already has an execution with business key {business_key!r}"
            ) from None
        raise
    phase("committed")
    return result


# ---- one step ----------------------------------------------------------------------------------


def feed_step(
    pk: int,
    step_input: Input,
    now: datetime | None,
    outbox: list[int],
    *,
    caller_context: dict[str, Any] | None = None,
    applying: int | None = None,
    cause: dict[str, Any] | None = None,
    idempotency_key: str | None = None,
) -> StepResult | None:
    """Apply one input to the execution ``pk`` in one transaction.

    ``applying`` is the id of the outbox message this input comes from: the step then records
    that this execution applied it (``AppliedMessage``), and returns None, applying nothing,
    if it already had, or if the execution can no longer take it (not active: the sender is
    then told instead, by the delivery). Raises the refusal (``NeedsMigration``) after the
    commit when the input was refused.

    ``idempotency_key`` (a caller's retry after losing the response): if this execution
    already took an input with that key, nothing is applied and the earlier entry comes back
    (``repeated``); with different content, ``IdempotencyConflict`` is raised. The key is
    stored with the entry, unique per execution.
    """
    database = sql.database()
    with transaction.atomic(using=database, durable=True):
        execution = lock(pk)
        phase("locked")
        now = now or statecharts_settings.now()
        if applying is not None:
            if rules(execution.status).inputs is not InputRule.APPLY:
                return None
            if (
                AppliedMessage.objects.using(database)
                .filter(execution_id=pk, message_id=applying)
                .exists()
            ):
                return None  # applied by an earlier delivery of the same message
        if idempotency_key is not None:
            earlier = _earlier_with_key(pk, idempotency_key, step_input)
            if earlier is not None:
                return StepResult(execution, earlier, (), (), repeated=True)
        result, refusal = step_locked(
            execution,
            step_input,
            now,
            outbox,
            caller_context,
            cause=cause,
        )
        if applying is not None and refusal is None:
            AppliedMessage.objects.using(database).create(
                execution=execution, message_id=applying, seq=result.entry.seq, applied=now
            )
        if idempotency_key is not None:
            HistoryEntry.objects.using(database).filter(pk=result.entry.pk).update(
                idempotency_key=idempotency_key
            )
            result.entry.idempotency_key = idempotency_key
        phase("before_commit")
    phase("committed")
    if refusal is not None:
        raise refusal
    return result


def _stored_input(step_input: Input) -> dict[str, Any]:
    """The history row's ``input`` and ``codec``: the input as the payload codec writes it
    (``statecharts.policies.codecs``; the default stores it as it is)."""
    stored, codec = codecs.encode_input(step_input.to_dict())
    return {"input": stored, "codec": codec}


def _earlier_with_key(pk: int, key: str, step_input: Input) -> HistoryEntry | None:
    earlier = (
        HistoryEntry.objects.using(sql.database())
        .filter(execution_id=pk, idempotency_key=key)
        .first()
    )
    if earlier is None:
        return None
    if codecs.decode_input(earlier.input, earlier.codec) != step_input.to_dict():
        raise IdempotencyConflict(
            f"idempotency key {key!r} was used for another input of this execution "
            f"(step {earlier.seq}); nothing was applied"
        )
    return earlier


def step_locked(
    execution: Execution,
    step_input: Input,
    now: datetime,
    outbox: list[int],
    caller_context: dict[str, Any] | None = None,
    *,
    cause: dict[str, Any] | None = None,
) -> tuple[StepResult, StepRefused | None]:
    """Apply one input to an execution the caller locked (``lock``), in the caller's transaction.

    For hosts that must do more in the same transaction (the timers app fires a timer and
    marks it fired atomically). What happens is the execution's status's rule
    (``statecharts.statuses``). Returns the result and, when the input was refused, the error
    to raise after the commit (the refusal itself is recorded). Outbox ids written by the step
    are appended to ``outbox``: pass them to ``deliver`` after the commit. ``cause`` says what
    the input came from (a timer, an outbox message: JSON), recorded with the history entry so
    the timeline links a step to the one that caused it; it is never part of a key.
    An input with a cause passes the input guards apps registered first
    (``register_input_guard``): a guard may have it recorded as discarded with a reason (the
    invocations app discards what a cancelled invocation sent after its cancellation, spec
    6.4.3).
    """
    observing.step_started()  # (the lock wait, before it, is measured on its own)
    status_rules = rules(execution.status)
    if step_input.kind == CANCEL:
        return _cancel_locked(execution, step_input, now, outbox, caller_context, cause)
    if status_rules.inputs is InputRule.DISCARD:
        reason = f"execution {execution.status}"
        return _record_discarded(
            execution, step_input, now, reason, cause, caller_context
        ), None
    if status_rules.inputs is InputRule.REFUSE:
        reason = f"execution {execution.status}: {execution.failure_reason}"
        result = _record_unapplied(
            execution,
            step_input,
            now,
            Disposition.REFUSED,
            reason,
            cause=cause,
            caller_context=caller_context,
        )
        return result, _refusal(execution)
    try:
        compiled = compiled_chart(execution.chart)
        position = _load_position(execution, compiled)
    except StatechartError as exc:  # a damaged position, or a source that no longer compiles
        return _unsteppable(execution, step_input, now, exc, cause, caller_context)
    if cause is not None:
        reason = guard_input(execution, step_input, cause, position.state)
        if reason is not None:
            return _record_discarded(
                execution, step_input, now, reason, cause, caller_context
            ), None
    try:
        return _apply(
            execution, compiled, position, step_input, now, outbox, caller_context, cause
        )
    except DamagedDatamodelError as exc:
        # The datamodel snapshot is only rebuilt when the interpreter runs, before any chart
        # code and before _apply writes anything: the same refusal as an undecodable blob.
        return _unsteppable(execution, step_input, now, exc, cause, caller_context)


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


def perform_delivery(
    execution: Execution,
    instruction: Instruction,
    now: datetime,
    outbox: list[int],
    caller_context: dict[str, Any] | None = None,
    *,
    cause: dict[str, Any] | None = None,
) -> StepResult | None:
    """Perform a delivery the planner made of a stored delayed send (``plan.delivery``), for an
    execution the caller locked, in the caller's transaction.

    A delivery to the execution itself is a step (``deliver_self``: an external event;
    ``deliver_internal``: an internal one), whose result is returned; refusals raise
    ``StepRefused`` (the step's refusal is recorded first). Any other delivery goes to its
    performer (an outbox row, an invoked child, a route), and None is returned. Raises
    ``NoPerformer`` when nothing here performs that kind: a fact about this deployment, not
    about the row.
    """
    kind = instruction.kind
    event = instruction.event
    if rules(execution.status).inputs is not InputRule.APPLY:
        raise _refusal(execution)
    if kind is InstructionKind.DELIVER_SELF or kind is InstructionKind.DELIVER_INTERNAL:
        assert event is not None
        step_input = Input.internal(event) if kind is InstructionKind.DELIVER_INTERNAL else (
            Input.external(event)
        )
        result, refusal = step_locked(
            execution, step_input, now, outbox, caller_context, cause=cause
        )
        if refusal is not None:
            raise refusal
        return result
    performer = performer_for(kind)
    if performer is None or not kind.is_delivery:
        raise NoPerformer(f"nothing performs {kind.value} here ({instruction.reason or 'no app'})")
    try:
        state = _load_position(execution, compiled_chart(execution.chart)).state
    except StatechartError as exc:
        # As a step would find it: the status says so (the caller holds the delivery back).
        _mark_unsteppable(execution, exc)
        execution.updated = now
        sql.update_row(execution, ("updated", "status", "failure_reason"))
        refusal = _refusal(execution)
        refusal.__cause__ = exc
        raise refusal from exc
    performer(StepContext(execution, state, now, execution.steps, caller_context, outbox),
              instruction)
    return None


def lock(pk: int) -> Execution:
    """Lock an execution row for the rest of the transaction (its chart is loaded too)."""
    if not observing.listening():
        return sql.lock_execution(pk)
    waited = time.perf_counter()
    execution = sql.lock_execution(pk)
    observing.lock_waited(time.perf_counter() - waited)
    return execution


def lock_many(pks: set[int]) -> dict[int, Execution]:
    """Lock several executions in ascending id order (the one order every batch follows)."""
    if not observing.listening():
        return sql.lock_executions(pks)
    waited = time.perf_counter()
    executions = sql.lock_executions(pks)
    observing.lock_waited(time.perf_counter() - waited)
    return executions


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

    host = Host(registered_types(), is_reachable, step_clock(), check_route=check_route)
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


__all__ = [
    "BusinessKeyInUse",
    "NoPerformer",
    "StepResult",
    "feed_step",
    "lock",
    "lock_many",
    "perform_delivery",
    "start_step",
    "step_locked",
]
