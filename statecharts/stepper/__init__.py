"""The durable stepper: the one public surface for driving executions stored as rows.

Everything an app, a view, a command or a worker does to an execution goes through these
names (``timers`` and ``invocations`` use nothing else of ``statecharts`` but the models and
the core's public names)::

    start(chart, *, data, business_key, metadata, session_id, now, caller_context,
          idempotency_key, subject, tracing, user)              # -> Execution
    start_result(chart, ...)                                    # the same -> StepResult
    submit(request)                                             # a request -> StepResult
    admit(request)                                              # a request asking no step
    start_internal(request, *, io_processors, parent, invokeid, invoke_ordinal, outbox)
    trace(execution, on=True)                                   # keep its trace effects
    send(execution, name, data=None, *, now, caller_context, idempotency_key, user, **fields)
    cancel(execution, *, now, caller_context, reason, idempotency_key, user)
    feed(execution, step_input, *, now, caller_context, idempotency_key)  # any Input
    step_locked(execution, step_input, now, outbox, caller_context)
    lock(pk) / lock_many(pks)                                   # inside your transaction
    record_operation(execution, action, row, reason, now, caller_context)  # under its lock
    batched_writes(expected)                                    # a batch of steps, one txn
    perform_delivery(execution, instruction, now, outbox, caller_context)
    deliver(message_ids) / deliver_pending() / retry_message(message_id)
    register_message_kind(kind, handler)                        # outbox messages of an app
    register_input_guard(guard)                                 # discard an input with a cause
    ensure_every_minute(name, func)                             # a sweeper's django-q2 schedule
    ensure_scheduled(name, func, minutes=60)                    # the same, every N minutes
    database()                                                  # the alias steps use
    register_performer(kind, performer)                         # in AppConfig.ready()
    register_invoke_types(types) / register_send_type(type, route)
    register_send_types(types, owner=...)                       # replaces the owner's types
    register_route_checker(checker)                             # a route's answer per <send>
    register_start_check(check)                                 # refuse a bad start early
    registered_types()                                          # this step's snapshot

``StepResult`` (execution, history entry, effects, instructions), ``StepContext`` (what a
performer gets), ``Input``, ``NoPerformer``, the requests (``StartRequest``,
``EventRequest``, ``CancelRequest``, ``AnswerRequest``, ``JSONText``, and those that ask for
no step: ``CallerContextRequest``, ``ChartLoadRequest``, ``ChartLookupRequest``,
``ImportRequest``, ``ImportedRowRequest``, ``MigrationRequest``, ``ErasureRequest``,
``OperatorRequest``: ``requests``) and the refusals (``InvalidInput``, ``StepRefused``,
``NeedsMigration``, ``BusinessKeyInUse``; what each door answers for each:
``statecharts.policies.refusals``) come with it.

``start``, ``start_result``, ``send`` and ``cancel`` build a request and submit it; what
comes from outside is checked in one place, the ``gate``, before anything is written.

Concerns, one module each: ``requests`` and ``gate`` (what outside data asks, checked
once); one step, one transaction: ``transaction`` (the loop, its phases, ``StepResult``, the
locks), ``starting`` (a start), ``stepping`` (an input: ``feed_step``, ``step_locked``,
``perform_delivery``), ``cancelling`` (a cancel, with or without chart code), ``applying``
(advance, budgets, persist; the position cache), ``recording`` (an input recorded as not
applied, and the fields a step writes); ``performing`` (instructions and their performers),
``delivery`` (the outbox, exactly once), ``sweeper`` (django-q2 glue for crash leftovers),
``sql`` (the hand-compiled statements of the hot path).
The compiled-chart cache is ``statecharts.runtime`` (models use it too).

Lock order: one execution per step (``lock``); a batch (``lock_many``) takes its executions in
ascending id order before anything else; rows an execution owns (its timers, its outbox) are
only written under its lock, after it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction as db_transaction  # (`transaction` is a submodule here)

from statecharts.conf import statecharts_settings
from statecharts.core.events import Event
from statecharts.drivers.durable import CANCELLED_BY_PARENT, EVENT, Input
from statecharts.exceptions import (
    BusinessKeyInUse,
    IdempotencyConflict,
    InvalidInput,
    NeedsMigration,
    StepRefused,
)
from statecharts.models import Chart, Execution
from statecharts.stepper import gate
from statecharts.stepper.delivery import REASON_MAX_LENGTH as OUTBOX_RETRY_REASON_MAX_LENGTH
from statecharts.stepper.delivery import (
    MessageHandler,
    deliver,
    deliver_pending,
    register_message_kind,
    this_call,
)
from statecharts.stepper.delivery import retry as retry_message
from statecharts.stepper.performing import (
    NoPerformer,
    Performer,
    StepContext,
    register_input_guard,
    register_invoke_types,
    register_performer,
    register_route_checker,
    register_send_type,
    register_send_types,
    register_start_check,
    registered_types,
)
from statecharts.stepper.recording import record_operation
from statecharts.stepper.requests import (
    AdmittedRequest,
    AnswerRequest,
    CallerContextRequest,
    CancelRequest,
    ChartLoadRequest,
    ChartLookupRequest,
    ErasureRequest,
    EventRequest,
    ImportedRowRequest,
    ImportRequest,
    JSONText,
    MigrationRequest,
    OperatorRequest,
    Request,
    StartRequest,
)
from statecharts.stepper.sql import batched_writes, database
from statecharts.stepper.starting import start_step
from statecharts.stepper.stepping import feed_step, perform_delivery, step_locked
from statecharts.stepper.sweeper import ensure_every_minute, ensure_scheduled
from statecharts.stepper.transaction import UNHANDLED, StepResult, lock, lock_many


def start(
    chart: Chart,
    *,
    data: dict[str, Any] | None = None,
    business_key: str | None = None,
    metadata: dict[str, Any] | None = None,
    session_id: str | None = None,
    now: datetime | None = None,
    caller_context: dict[str, Any] | None = None,
    subject: Any = None,
    idempotency_key: str | None = None,
    tracing: bool = False,
    user: Any = None,
    joined: bool = False,
) -> Execution:
    """Create an execution of ``chart`` and run it to its first stable configuration (one
    transaction), then deliver what it sent to other executions: a :class:`StartRequest`
    built from the keywords, given to :func:`submit`. ``tracing`` keeps the core's trace
    effects of its steps in its history (see ``trace``).

    ``caller_context``: opaque JSON saying who or what started it
    (``statecharts.policies.attribution``),
    stored with the start's history entry and carried on what the step schedules and sends.
    ``idempotency_key``: a client that retries a start after losing the response passes the
    same key; the start is done once per chart *name* and key, and the repeat returns the
    execution the first one started (the same key with other data raises
    ``IdempotencyConflict``). :func:`start_result` says which it was.

    Everything given here from outside is checked first, by the stepper's gate
    (``statecharts.stepper.gate``, the rules of ``statecharts.policies.validation``): an
    :class:`~statecharts.exceptions.InvalidInput` (a ``ValueError``) names the bad path, and
    nothing is written. A ``session_id`` given here is 1 to 64 letters, digits, ``_`` and
    ``-`` (``validation.SESSION_ID_ALPHABET``); without one, a uuid4 hex is minted.

    ``subject``: the model instance the execution is about (``Execution.subject``; a saved
    object, checked by ``statecharts.policies.subjects``).

    ``user``: the user starting it; ``statecharts.policies.authorization`` checks they may
    (``statecharts.add_execution`` and ``START_PERMISSIONS``; else ``StartNotPermitted``, a
    ``PermissionDenied``, and nothing is written) and the history records who started it.
    Without it the caller is trusted code and nothing is checked.

    ``joined``: inside the caller's transaction (see :func:`start_result`)."""
    return start_result(
        chart,
        data=data,
        business_key=business_key,
        metadata=metadata,
        session_id=session_id,
        now=now,
        caller_context=caller_context,
        subject=subject,
        idempotency_key=idempotency_key,
        tracing=tracing,
        user=user,
        joined=joined,
    ).execution


def start_result(
    chart: Chart,
    *,
    data: dict[str, Any] | None = None,
    business_key: str | None = None,
    metadata: dict[str, Any] | None = None,
    session_id: str | None = None,
    now: datetime | None = None,
    caller_context: dict[str, Any] | None = None,
    subject: Any = None,
    idempotency_key: str | None = None,
    tracing: bool = False,
    user: Any = None,
    joined: bool = False,
) -> StepResult:
    """:func:`start`, returning the step's result: the execution, its first history entry,
    and ``repeated`` when the idempotency key repeated an earlier start's (nothing was
    started; ``execution`` is the one the earlier start created).

    ``joined``: start inside the caller's transaction, if one is open (a savepoint of it: the
    execution, its first history entry, its timers and its outbox rows commit or roll back
    with the caller's rows; what it sent is delivered after the outer commit, through
    ``transaction.on_commit``). Without it a start is a durable transaction of its own, and
    calling it inside another raises ``RuntimeError``. ``statecharts.fields.StatechartField``
    starts its executions this way, on the host object's first save."""
    request = StartRequest(
        chart=chart,
        data=data,
        business_key=business_key,
        metadata=metadata,
        session_id=session_id,
        subject=subject,
        caller_context=caller_context,
        idempotency_key=idempotency_key,
        user=user,
        now=now,
        tracing=tracing,
    )
    return _start(request, joined=joined)


def submit(request: Request) -> StepResult:
    """Apply one request from outside (``statecharts.stepper.requests``): the gate checks it
    (``InvalidInput``, nothing written), asks whether its user may (``NotPermitted``) and
    records who; then one step, in one transaction, and what it sent is delivered. What the
    execution refuses raises one of the ``StepRefused`` family
    (``statecharts.policies.refusals``)."""
    if isinstance(request, EventRequest):
        return _send(request)
    if isinstance(request, StartRequest):
        return _start(request)
    if isinstance(request, CancelRequest):
        return _cancel(request)
    if isinstance(request, AnswerRequest):
        return _answer(request)
    raise TypeError(f"not a request: {request!r}")


def admit(request: AdmittedRequest) -> Any:
    """Check a request from outside that asks for no step (a chart load or lookup, an
    import, a migration's renames, an erasure's or an operator's reason:
    ``statecharts.stepper.requests``) in
    the gate, the one place outside data is checked: ``InvalidInput`` naming each bad field,
    else what the check returns (an imported row's checked texts, a chart reference)."""
    return gate.admit(request)


def answer_event(request: AnswerRequest) -> Event:
    """The event an invoke handler's answer becomes (``done.invoke.<id>``,
    ``error.communication.invoke.<id>`` or its own event), checked by the gate as
    :func:`submit` checks it (``InvalidInput``), for an app that applies it itself in a step
    of its own transaction (``step_locked``: the invocations app's operator cancel)."""
    return gate.answer(request)


def admit_chart(name: str, version: str) -> None:
    """``Chart.objects.load``'s check of the name and version it stores (through the models'
    facade, which cannot import the stepper): :func:`admit` of a ``ChartLoadRequest``."""
    gate.chart_load(ChartLoadRequest(name=name, version=version))


def start_internal(
    request: StartRequest,
    *,
    io_processors: dict[str, str] | None = None,
    parent: Execution | None = None,
    invokeid: str | None = None,
    invoke_ordinal: int | None = None,
    outbox: list[int] | None = None,
) -> StepResult:
    """The platform's own start (not a public API): :func:`submit` of a start with what only
    the apps give. ``io_processors``: the execution's ``_ioprocessors`` entries (the routes
    app's Basic HTTP address); ``parent``, ``invokeid`` and ``invoke_ordinal`` start an
    ``<invoke>``'s child (the invocations app; its params, from the parent's own datamodel,
    are the platform's and keep their tags). With ``outbox``, the ids of what it sent are
    appended there instead, for the caller to ``deliver`` when it is ready."""
    return _start(
        request,
        io_processors=io_processors,
        parent=parent,
        invokeid=invokeid,
        invoke_ordinal=invoke_ordinal,
        outbox=outbox,
    )


def _start(
    request: StartRequest,
    *,
    io_processors: dict[str, str] | None = None,
    parent: Execution | None = None,
    invokeid: str | None = None,
    invoke_ordinal: int | None = None,
    outbox: list[int] | None = None,
    joined: bool = False,
) -> StepResult:
    checked, starter = gate.start(request, trusted_data=parent is not None)
    deliver_now = outbox is None
    outbox = [] if outbox is None else outbox
    result = start_step(
        checked.chart,
        outbox,
        data=checked.data,
        business_key=checked.business_key,
        metadata=checked.metadata,
        session_id=checked.session_id,
        now=checked.now,
        caller_context=checked.caller_context,
        io_processors=io_processors,
        parent=parent,
        invokeid=invokeid,
        invoke_ordinal=invoke_ordinal,
        subject=checked.subject,
        idempotency_key=checked.idempotency_key,
        tracing=checked.tracing,
        sender=starter,
        joined=joined,
    )
    if deliver_now and joined:  # (after the caller's commit; at once when none is open)
        sent = list(outbox)
        db_transaction.on_commit(lambda: deliver(sent), using=database())
    elif deliver_now:
        deliver(outbox)
    return result


def trace(execution: Execution | int, on: bool = True) -> bool:
    """Turn tracing on (or off) for one execution: from its next step, the history keeps
    the core's trace effects (the transitions each microstep selected, the states exited and
    entered, the guards evaluated, the events raised and dequeued, ...), and its timeline
    shows them. It changes what is recorded, never what the chart does. Returns whether the
    flag changed (taken under the execution's lock, like a step)."""
    pk = execution.pk if isinstance(execution, Execution) else execution
    with db_transaction.atomic(using=database(), durable=True):
        locked = lock(pk)
        if locked.tracing == on:
            return False
        locked.tracing = on
        locked.save(update_fields=["tracing"])
    if isinstance(execution, Execution):
        execution.tracing = on
    return True


def send(
    execution: Execution | int,
    name: str,
    data: Any = None,
    *,
    now: datetime | None = None,
    caller_context: dict[str, Any] | None = None,
    idempotency_key: str | None = None,
    user: Any = None,
    strict: bool | None = None,
    **fields: Any,
) -> StepResult:
    """Feed one external event named ``name`` (fields: sendid, origin, origintype, invokeid).

    An event no transition takes is consumed, as SCXML says (``StepResult.handled`` is then
    False); with ``strict`` (None: the ``STRICT_EVENTS`` setting) it is refused instead:
    ``EventUnhandled``, the step rolled back and the input recorded as refused.

    ``caller_context`` is opaque JSON saying who or what sent it
    (``statecharts.policies.attribution``):
    stored with the input's history entry, handed to performers (timer rows, outbox messages
    and invocation rows keep it; a fired timer's step gets it back). The event
    comes from outside: its name (never a reserved one: ``error.*``, ``done.*``), data and
    fields are checked first (``statecharts.policies.validation``); an ``InvalidInput`` (a
    ``ValueError``) names the bad path and nothing is written. The platform's own events go
    through :func:`feed`, which trusts what it is given. ``idempotency_key``: see ``feed``.

    ``user``: the user sending it; ``statecharts.policies.authorization`` checks they may (else
    ``EventNotPermitted``, a ``PermissionDenied``, and nothing is written) and the history
    records who sent it. Without it the caller is trusted code and nothing is checked. The
    user is recorded in the caller context too (``"user"``), unless it already names one.
    """
    return _send(
        EventRequest(
            execution=execution,
            name=name,
            data=data,
            fields=fields,
            caller_context=caller_context,
            idempotency_key=idempotency_key,
            user=user,
            now=now,
            strict=strict,
        )
    )


def _send(request: EventRequest) -> StepResult:
    event, context, sender = gate.event(request)
    strict = request.strict
    return feed(
        request.execution,
        Input(EVENT, event=event, sender=sender),
        now=request.now,
        caller_context=context,
        idempotency_key=request.idempotency_key,
        cause=request.cause,
        strict=statecharts_settings.STRICT_EVENTS if strict is None else strict,
    )


def cancel(
    execution: Execution | int,
    *,
    now: datetime | None = None,
    caller_context: dict[str, Any] | None = None,
    reason: str | None = None,
    idempotency_key: str | None = None,
    user: Any = None,
) -> StepResult:
    """Stop an execution from outside: its onexit handlers run, then it is ``cancelled``.

    ``reason`` says why, in the caller's words: it is recorded with the input in the history
    (and shown in its timeline); the outcome is ``cancelled`` whatever it says (the
    invocations app's ``cancelled_by_parent`` is the one reason kept as the outcome).

    ``user``: the user cancelling it; ``statecharts.policies.authorization`` checks they may
    (``statecharts.change_execution`` and ``CANCEL_PERMISSIONS``; else
    ``CancelNotPermitted``, a ``PermissionDenied``, and nothing is written) and the history
    records who cancelled it. Without it the caller is trusted code and nothing is checked
    (the check reads the execution before the step's lock, as a send's does)."""
    return _cancel(
        CancelRequest(
            execution=execution,
            reason=reason,
            caller_context=caller_context,
            idempotency_key=idempotency_key,
            user=user,
            now=now,
        )
    )


def _cancel(request: CancelRequest) -> StepResult:
    context, canceller = gate.cancel(request)
    return feed(
        request.execution,
        Input.cancel(request.reason, sender=canceller),
        now=request.now,
        caller_context=context,
        idempotency_key=request.idempotency_key,
    )


def feed(
    execution: Execution | int,
    step_input: Input,
    *,
    now: datetime | None = None,
    caller_context: dict[str, Any] | None = None,
    idempotency_key: str | None = None,
    cause: dict[str, Any] | None = None,
    strict: bool = False,
) -> StepResult:
    """Apply one input in one transaction, then deliver the outbox rows it wrote.

    ``idempotency_key``: a client that retries after losing the response (a timeout, a
    dropped connection) passes the same key; the input is applied once, and the repeat
    returns the first one's result (``StepResult.repeated``); the same key with different
    content raises ``IdempotencyConflict``. ``cause`` records where the input came from.
    ``strict``: an event no transition takes is refused (``EventUnhandled``), nothing kept.
    """
    pk = execution.pk if isinstance(execution, Execution) else execution
    outbox: list[int] = []
    result = feed_step(
        pk,
        step_input,
        now,
        outbox,
        caller_context=caller_context,
        idempotency_key=idempotency_key,
        cause=cause,
        strict=strict,
    )
    assert result is not None
    deliver(outbox)
    return result


def answer(
    execution: Execution | int,
    event: Event,
    *,
    key: str,
    cause: dict[str, Any] | None = None,
    caller_context: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> StepResult:
    """The entry point for an invoke handler's answer (``done.invoke.<id>``,
    ``error.communication.invoke.<id>`` or an event of its own), idempotent per ``key``.

    Answers are not sends from outside: the platform's reserved names are open to them.
    """
    return feed(
        execution,
        Input.external(event),
        now=now,
        caller_context=caller_context,
        idempotency_key=key,
        cause=cause,
    )


def _answer(request: AnswerRequest) -> StepResult:
    return answer(
        request.execution,
        gate.answer(request),
        key=request.key,
        cause=request.cause,
        caller_context=request.caller_context,
        now=request.now,
    )


__all__ = [
    "CANCELLED_BY_PARENT",
    "OUTBOX_RETRY_REASON_MAX_LENGTH",
    "UNHANDLED",
    "AdmittedRequest",
    "AnswerRequest",
    "BusinessKeyInUse",
    "CallerContextRequest",
    "CancelRequest",
    "ChartLoadRequest",
    "ChartLookupRequest",
    "ErasureRequest",
    "EventRequest",
    "IdempotencyConflict",
    "ImportRequest",
    "ImportedRowRequest",
    "Input",
    "InvalidInput",
    "JSONText",
    "MessageHandler",
    "MigrationRequest",
    "NeedsMigration",
    "NoPerformer",
    "OperatorRequest",
    "Performer",
    "Request",
    "StartRequest",
    "StepContext",
    "StepRefused",
    "StepResult",
    "admit",
    "admit_chart",
    "answer",
    "answer_event",
    "batched_writes",
    "cancel",
    "database",
    "deliver",
    "deliver_pending",
    "ensure_every_minute",
    "ensure_scheduled",
    "feed",
    "lock",
    "lock_many",
    "perform_delivery",
    "record_operation",
    "register_input_guard",
    "register_invoke_types",
    "register_message_kind",
    "register_performer",
    "register_route_checker",
    "register_send_type",
    "register_send_types",
    "register_start_check",
    "registered_types",
    "retry_message",
    "send",
    "start",
    "start_internal",
    "start_result",
    "step_locked",
    "submit",
    "this_call",
    "trace",
]
