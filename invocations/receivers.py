"""Keeping an invocation row true from its parent's own steps."""

from __future__ import annotations

from typing import Any

from invocations.models import Invocation, InvocationStatus
from statecharts.core.state import State
from statecharts.models import Execution, HistoryEntry
from statecharts.policies import codecs
from statecharts.stepper import database


def note_answers(
    sender: Any, execution: Execution, entry: HistoryEntry, **kwargs: Any
) -> None:
    """``step_finished`` receiver: the parent applied ``done.invoke.<id>`` from its child, so
    the invocation is ``done`` (written in the parent's own step), even if that same step,
    or an earlier one, left the invoking state: the child did finish, before it was
    cancelled."""
    cause = entry.cause or {}
    ordinal = cause.get("invocation")
    if ordinal is None:
        return
    event = (entry.input or {}).get("event") or {}
    name = event.get("name") or ""
    if name.startswith("error.communication.invoke."):
        try:  # the event's data as the payload codec wrote it (statecharts.policies.codecs)
            data = codecs.decode_event(event, entry.codec).get("data")
        except (codecs.CodecUnavailable, codecs.CorruptPayload):
            data = None
        reason = str(data.get("message")) if isinstance(data, dict) else "failed"
        Invocation.objects.using(database()).filter(
            parent=execution,
            ordinal=ordinal,
            status__in=[
                InvocationStatus.STARTING,
                InvocationStatus.ACTIVE,
                InvocationStatus.CANCELLED,  # (this same step may have left the state)
            ],
        ).update(status=InvocationStatus.FAILED, reason=reason[:2000], updated=entry.created)
    if name.startswith("done.invoke."):
        Invocation.objects.using(database()).filter(
            parent=execution,
            ordinal=ordinal,
            status__in=[
                InvocationStatus.STARTING,
                InvocationStatus.ACTIVE,
                InvocationStatus.CANCELLED,
            ],
        ).update(status=InvocationStatus.DONE, reason="", updated=entry.created)


def ignore_after_cancellation(
    execution: Execution, step_input: Any, cause: dict[str, Any], state: State
) -> str | None:
    """Input guard (spec 6.4.3): once the parent cancelled an invocation, what its child sent
    after the cancellation is not processed; what it sent before still is (W3C 236: a child
    that finished sends done.invoke, and the parent gets it after leaving the state). An
    invoke handler's answer that comes after its invocation failed (the parent was fed
    ``error.communication.invoke.<id>``: an operator's cancel, a timeout, a failed start) is
    not processed either: a failed invocation gives that one answer."""
    ordinal = cause.get("invocation")
    if ordinal is None or cause.get("failed"):
        return None
    if cause.get("answer") is not None:  # an invoke handler's answer (invocations.answers)
        failed = (
            Invocation.objects.using(database())
            .filter(parent=execution, ordinal=ordinal, status=InvocationStatus.FAILED)
            .exists()
        )
        if failed:  # (an operator's cancel, a timeout: the platform's failure was its answer)
            return f"sent by invocation #{ordinal} after it failed"
    if any(invocation.ordinal == ordinal for invocation in state.invocations):
        return None  # still active
    row = (
        Invocation.objects.using(database())
        .filter(parent=execution, ordinal=ordinal)
        .values_list("status", "cancelled_after_message")
        .first()
    )
    if row is None or row[0] != InvocationStatus.CANCELLED:
        return None
    message = cause.get("message")
    if message is not None and row[1] is not None and message <= row[1]:
        return None  # sent before the cancellation
    return f"sent by invocation #{ordinal} after it was cancelled (SCXML 6.4.3)"
