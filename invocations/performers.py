"""The performers the invocations app registers: how a step performs ``<invoke>`` durably.

All run inside the step's transaction, under its execution's lock, and write only rows of
that execution (its invocation rows, its outbox): the child is started, cancelled and sent to
through the outbox, in the child's own steps (docs/architecture.md, the scale-out invariant).

- ``start_invocation``: the invocation row (``starting``) and an ``invocations.start`` message;
- ``cancel_invocation``: the row ``cancelled`` (unless it already finished) and an
  ``invocations.cancel`` message;
- ``deliver_child`` (``<send target="#_<invokeid>">``, now or from a timer) and
  ``autoforward``: an event message for the child's session;
- ``finish`` (of a child): ``done.invoke.<invokeid>`` with its donedata, for its parent,
  unless the parent is the one that cancelled it.
"""

from __future__ import annotations

from datetime import timedelta
from functools import partial

from django.db import transaction
from django.db.models import Max

from invocations import telemetry as invocation_telemetry
from invocations.children import (
    CANCEL,
    CANCEL_HANDLER,
    RUN_HANDLER,
    START,
    child_session_id,
    write_message,
)
from invocations.conf import invocation_settings
from invocations.models import OPEN_STATUSES, Invocation, InvocationStatus
from invocations.tree import lineage
from statecharts.core import telemetry
from statecharts.core.events import EXTERNAL, PLATFORM, Event, error_data
from statecharts.core.plan import Instruction
from statecharts.core.telemetry import TelemetryEvent
from statecharts.models import OutboxMessage
from statecharts.policies import codecs
from statecharts.stepper import CANCELLED_BY_PARENT, Input, StepContext, database, step_locked


def start_invocation(context: StepContext, instruction: Instruction) -> None:
    data = instruction.data
    depth, root = lineage(context.execution)
    content = data.get("content")
    scxml = (data.get("type") or "scxml") == "scxml"
    timeout = timedelta(seconds=invocation_settings.INVOKE_HANDLER_TIMEOUT_SECONDS)
    # The params are event data: written by the payload codec (statecharts.policies.codecs).
    params, codec = codecs.encode_value(data.get("data"))
    invocation = Invocation.objects.using(database()).create(
        parent=context.execution,
        ordinal=data["invoke_ordinal"],
        invokeid=data["invokeid"],
        type=data.get("type") or "scxml",
        state=data.get("state") or "",
        src=data.get("src") or "",
        content=content if isinstance(content, str) else "",
        params=params,
        codec=codec,
        autoforward=bool(data.get("autoforward")),
        defined_at_run_time=bool(data.get("defined_at_run_time")),
        caller_context=context.caller_context,
        depth=depth + 1,
        root_id=root,
        started_in=context.seq,
        deadline=None if scxml else context.now + timeout,
        created=context.now,
        updated=context.now,
    )
    kind = START if scxml else RUN_HANDLER
    write_message(context.execution, kind, invocation, context.now, context.outbox)


def cancel_invocation(context: StepContext, instruction: Instruction) -> None:
    ordinal = instruction.data.get("invoke_ordinal")
    invocation = (
        Invocation.objects.using(database())
        .filter(parent=context.execution, ordinal=ordinal)
        .first()
    )
    if invocation is None or invocation.status not in OPEN_STATUSES:
        return  # it finished, failed, or was never started: nothing to stop
    reason = "the parent stopped" if not context.state.running else "the invoking state was exited"
    # The cut: what the child had sent this parent when it was cancelled (a read of the
    # child's rows; they are committed, or they come after the cut).
    child = child_session_id(context.execution.session_id, invocation.ordinal)
    cut = (
        OutboxMessage.objects.using(database())
        .filter(sender__session_id=child, target_session_id=context.execution.session_id)
        .aggregate(last=Max("id"))["last"]
    )
    Invocation.objects.using(database()).filter(pk=invocation.pk).update(
        status=InvocationStatus.CANCELLED,
        reason=reason,
        cancelled_after_message=cut or 0,
        next_attempt_at=None,
        updated=context.now,
    )
    invocation_telemetry.left(invocation, reason)
    kind = CANCEL if invocation.is_scxml else CANCEL_HANDLER
    write_message(context.execution, kind, invocation, context.now, context.outbox)


def _to_child(context: StepContext, ordinal: int, event: dict[str, object]) -> None:
    message = OutboxMessage.objects.using(database()).create(
        sender=context.execution,
        target_session_id=child_session_id(context.execution.session_id, ordinal),
        event=event,
        send_id=str(event.get("sendid") or ""),
        created=context.now,
    )
    context.outbox.append(message.pk)


def deliver_child(context: StepContext, instruction: Instruction) -> None:
    assert instruction.target is not None and instruction.event is not None
    invokeid = instruction.target.invokeid
    active = [i for i in context.state.invocations if i.invokeid == invokeid]
    if not active:
        # (a delayed send fired after the invocation ended: the sender is told, spec 6.2)
        error = Event(
            "error.communication",
            PLATFORM,
            error_data(f"invocation {invokeid!r} is gone", tagname="send"),
            sendid=instruction.event.sendid,
        )
        step_locked(context.execution, Input.internal(error), context.now, context.outbox)
        return
    _to_child(context, active[-1].ordinal, instruction.event.to_dict())


def autoforward(context: StepContext, instruction: Instruction) -> None:
    """Forward the event, unmodified (spec 6.4.2), to the invocation's child. A child that is
    not running (it failed to start, or finished) does not get it, and the parent is told
    nothing: SCXML 6.4 defines no error for it. The drop is an ``autoforward.dropped``
    telemetry event. (A child still starting gets it once it is up.)"""
    data = instruction.data
    ordinal = data["invoke_ordinal"]
    invocation = (
        Invocation.objects.using(database())
        .filter(parent=context.execution, ordinal=ordinal)
        .only("status", "invokeid")
        .first()
    )
    if invocation is not None and invocation.status not in OPEN_STATUSES:
        if telemetry.listeners:
            event = data["event"]
            transaction.on_commit(
                partial(
                    telemetry.emit,
                    TelemetryEvent.AUTOFORWARD_DROPPED,
                    telemetry.Driver.DURABLE.value,
                    context.execution.session_id,
                    execution_id=context.execution.pk,
                    invokeid=invocation.invokeid,
                    event_name=event.get("name") if isinstance(event, dict) else None,
                    reason=f"the invocation is {invocation.status}",
                ),
                using=database(),
            )
        return
    _to_child(context, ordinal, data["event"])


def finish(context: StepContext, instruction: Instruction) -> None:
    execution = context.execution
    parent_session_id = context.state.parent_session_id
    if parent_session_id is None or execution.invoke_ordinal is None:
        return  # not an invoked child
    if instruction.data.get("reason") == CANCELLED_BY_PARENT:
        return  # the parent cancelled it: it tells the parent nothing more
    invokeid = execution.invokeid or context.state.invokeid or ""
    event = Event(
        f"done.invoke.{invokeid}", EXTERNAL, instruction.data.get("donedata"), invokeid=invokeid
    )
    message = OutboxMessage.objects.using(database()).create(
        sender=execution,
        target_session_id=parent_session_id,
        event=event.to_dict(),
        via_invocation=execution.invoke_ordinal,
        created=context.now,
    )
    context.outbox.append(message.pk)
    invocation_telemetry.child_answered(execution, invokeid)
