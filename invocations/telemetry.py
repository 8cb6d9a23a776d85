"""The invocations app's telemetry events (docs/telemetry.md): an invocation's lifecycle.

Declared in ``invocations/declaration.py`` (``telemetry_events``), so ``statecharts.telemetry``
gives each member a Django signal (below, named like the event: ``invocation.started`` is
``invocation_started``), writes its DEBUG log record and hands it to the OpenTelemetry bridge,
like the core's events. Sent with driver ``"durable"`` after the transaction that decided it
commits (at once when there is none); each function here returns at once when nothing
listens, before building anything.

- ``invocation.started``: a child chart's first step committed, or a handler's ``start``
  returned (it may answer later). It carries ``started_ns`` and ``duration_s`` (the child's
  start, the handler's call), so the OpenTelemetry bridge makes it a span in the trace of the
  parent's step that invoked (the invocation row keeps that step's caller context);
- ``invocation.answered``: an answer was fed to the parent (a handler's ``done``, ``event`` or
  ``failed``; a child chart's ``done.invoke``), ``answer_kind`` saying which;
- ``invocation.retried``: a handler's ``start`` raised and will be tried again;
- ``invocation.failed``: it ended failed (a child chart that cannot start; a handler's start
  failing its last attempt, an answer the platform refused, params that cannot be read);
- ``invocation.cancelled``: the parent left the invoking state (or stopped), or an operator
  cancelled it;
- ``invocation.timed_out``: a handler gave no answer within
  ``INVOKE_HANDLER_TIMEOUT_SECONDS`` (it ends failed: this event, not ``invocation.failed``).

Every event has ``invocation_id``, ``execution_id`` (the parent), ``invokeid``, ``ordinal``,
``invoke_type`` and ``caller_context``; ``session_id`` is the parent's.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from invocations.models import Invocation, InvocationStatus
from statecharts.core import telemetry as core
from statecharts.telemetry import after_commit, signal_for


class InvocationEvent(StrEnum):
    STARTED = "invocation.started"
    ANSWERED = "invocation.answered"
    RETRIED = "invocation.retried"
    FAILED = "invocation.failed"
    CANCELLED = "invocation.cancelled"
    TIMED_OUT = "invocation.timed_out"


log = logging.getLogger("statecharts.telemetry")

invocation_started = signal_for(InvocationEvent.STARTED)
invocation_answered = signal_for(InvocationEvent.ANSWERED)
invocation_retried = signal_for(InvocationEvent.RETRIED)
invocation_failed = signal_for(InvocationEvent.FAILED)
invocation_cancelled = signal_for(InvocationEvent.CANCELLED)
invocation_timed_out = signal_for(InvocationEvent.TIMED_OUT)

# The answer key the platform's own failure answer is fed under (invocations.tasks.fail): it is
# reported as the invocation's end (failed, cancelled, timed out), not as an answer.
PLATFORM_FAILURE_KEY = "failed"


@dataclass(frozen=True, slots=True)
class Began:
    """When a start began (made only while something listens: :func:`begin`)."""

    started_ns: int
    started: float


def begin() -> Began | None:
    """Note the start of a child's start or a handler's call (None when nothing listens)."""
    if not core.listeners:
        return None
    return Began(time.time_ns(), time.perf_counter())


def _session_of(invocation: Invocation) -> str | None:
    """The parent's session id: from the parent already loaded, else one read."""
    if Invocation.parent.is_cached(invocation):  # type: ignore[attr-defined]
        return invocation.parent.session_id
    from statecharts.models import Execution
    from statecharts.stepper import database

    found: str | None = (
        Execution.objects.using(database())
        .filter(pk=invocation.parent_id)
        .values_list("session_id", flat=True)
        .first()
    )
    return found


def _emit(event: InvocationEvent, invocation: Invocation, **attributes: Any) -> None:
    after_commit(
        event,
        _session_of(invocation),
        invocation_id=invocation.pk,
        execution_id=invocation.parent_id,
        invokeid=invocation.invokeid,
        ordinal=invocation.ordinal,
        invoke_type=invocation.type,
        caller_context=invocation.caller_context,
        **attributes,
    )


def started(invocation: Invocation, began: Began | None, **attributes: Any) -> None:
    """``invocation.started`` (``began``: :func:`begin`, before the start)."""
    if not core.listeners:
        return
    if began is not None:
        attributes["started_ns"] = began.started_ns
        attributes["duration_s"] = time.perf_counter() - began.started
    _emit(InvocationEvent.STARTED, invocation, attempts=invocation.attempts, **attributes)


def answered(invocation: Invocation, reply: Any, key: str) -> None:
    """``invocation.answered``: ``reply`` (an ``invocations.handlers.Answer``) was fed to the
    parent under ``key``. The platform's own failure answer is not reported here."""
    if not core.listeners or key == PLATFORM_FAILURE_KEY:
        return
    _emit(
        InvocationEvent.ANSWERED,
        invocation,
        answer_kind=reply.kind,
        event_name=reply.name or None,
        key=key,
    )


def child_answered(child: Any, invokeid: str) -> None:
    """``invocation.answered`` for a child chart that finished: its ``done.invoke`` is
    written for the parent (in the child's last step)."""
    if not core.listeners:
        return
    from statecharts.stepper import database

    invocation = (
        Invocation.objects.using(database())
        .filter(parent_id=child.parent_id, ordinal=child.invoke_ordinal)
        .first()
    )
    if invocation is None:
        return
    _emit(
        InvocationEvent.ANSWERED,
        invocation,
        answer_kind="done",
        event_name=f"done.invoke.{invokeid}",
        child_execution_id=child.pk,
    )


def retried(invocation: Invocation, error: str) -> None:
    """``invocation.retried``: a handler's start raised (``error``); it is tried again."""
    if not core.listeners:
        return
    _emit(InvocationEvent.RETRIED, invocation, attempts=invocation.attempts, error=error)


def ended(
    invocation: Invocation,
    reason: str,
    event: InvocationEvent = InvocationEvent.FAILED,
    *,
    count: int = 1,
) -> None:
    """The invocation's end: ``invocation.failed`` (``error``: why), ``.cancelled`` or
    ``.timed_out`` (``reason``). ``count``: this invocation and those of the same step refused
    with it for the same reason (a bound refusing a batch of children: one event)."""
    if not core.listeners:
        return
    said = {"error": reason} if event is InvocationEvent.FAILED else {"reason": reason}
    _emit(event, invocation, attempts=invocation.attempts, count=count, **said)


def left(invocation: Invocation, reason: str) -> None:
    """``invocation.cancelled`` for an invocation the parent's step cancelled (it left the
    invoking state, or stopped), if the row is still ``cancelled`` once that step commits: a
    step that leaves the state because of the invocation's own answer (``done.invoke``, its
    error) marks it ``done`` or ``failed`` in the same step (``invocations.receivers``), and
    that is an answer or a failure, not a cancellation."""
    if not core.listeners:
        return
    from django.db import transaction

    from statecharts.stepper import database

    def if_still_cancelled() -> None:
        try:
            status = (
                Invocation.objects.using(database())
                .filter(pk=invocation.pk)
                .values_list("status", flat=True)
                .first()
            )
            if status == InvocationStatus.CANCELLED:
                ended(invocation, reason, InvocationEvent.CANCELLED)
        except Exception as exc:  # (telemetry never reaches the step that committed)
            log.error("invocation %s: telemetry failed: %s", invocation.pk, exc, exc_info=exc)

    transaction.on_commit(if_still_cancelled, using=database())
