"""An operator's actions on one invoke handler's invocation (``<invoke type>`` other than
SCXML): retry its start now, or cancel it.

- **retry now**: an open invocation whose handler start is waiting (never started, or waiting
  for a retry after a failed start) has its ``start`` run now instead of at its next attempt
  (``invocations.tasks.run``, the same at-least-once start as the sweeper's);
- **cancel**: the invocation ends failed with the operator's reason: its parent gets
  ``error.communication.invoke.<id>`` (the one answer a failed invocation gives, once per
  key, so a late answer of the handler is ignored); the handler's ``cancel`` is called when
  the parent leaves the invoking state, as for any invocation (a chart that stays in it
  after an error keeps the handler uncancelled until it leaves).

Each is decided under the parent execution's lock and recorded as its next history entry
(disposition ``operated``, ``stepper.record_operation``: the action, the invocation, the
reason the operator typed, the caller context); the handler work runs after that commit. An
invocation that is not open (done, failed, cancelled), a child SCXML execution (cancel the
child execution instead), or, for retry now, one whose handler already started and is not
waiting for a retry, is refused with :class:`NotActionable` (the refusal table's ``refused``
row); a missing one is ``Invocation.DoesNotExist`` (``not_found``). Each action has its own
permission (:data:`PERMISSIONS`), checked by the doors: the admin (``invocations.admin``),
the API (``invocations.api``) and ``manage.py invocation_action``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction

from invocations import answers, tasks
from invocations import telemetry as invocation_telemetry
from invocations.conf import invocation_settings
from invocations.handlers import Answer
from invocations.models import OPEN_STATUSES, Invocation, InvocationStatus
from invocations.telemetry import InvocationEvent
from statecharts import stepper
from statecharts.exceptions import StepRefused
from statecharts.models import Execution

REASON_MAX_LENGTH = 300
ACTIONS = ("retry_now", "cancel")
PERMISSIONS = {
    "retry_now": "invocations.retry_invocation",
    "cancel": "invocations.cancel_invocation",
}


class NotActionable(StepRefused):
    """The invocation's state does not allow the action."""


def retry_now(
    invocation_id: int,
    *,
    reason: str,
    caller_context: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> str:
    """Run a waiting handler start now; returns what the start did (``started``,
    ``retrying``, ``failed``, ...: ``invocations.tasks.run``)."""
    _locked(invocation_id, "retry_now", reason, caller_context, now)
    return tasks.run(invocation_id, now=now)


def cancel(
    invocation_id: int,
    *,
    reason: str,
    caller_context: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> str:
    """End an open handler invocation, failed with the operator's reason (its parent told
    ``error.communication.invoke.<id>``); returns ``cancelled``."""
    outbox: list[int] = []
    invocation = _locked(invocation_id, "cancel", reason, caller_context, now, outbox)
    stepper.deliver(outbox)
    invocation_telemetry.ended(invocation, _cancelled(reason), InvocationEvent.CANCELLED)
    return "cancelled"


def _cancelled(reason: str) -> str:
    return f"cancelled by an operator: {reason.strip()}"


def _locked(
    invocation_id: int,
    action: str,
    reason: str,
    caller_context: dict[str, Any] | None,
    now: datetime | None,
    outbox: list[int] | None = None,
) -> Invocation:
    """Check the action under the parent's lock, record it and, for a cancel, apply it; the
    invocation as read.

    A cancel is decided and applied in one transaction under the parent's lock: the parent
    takes ``error.communication.invoke.<id>`` as a step of that transaction (its answer key
    ``failed``, so no later failure of the same invocation is fed again), so a handler's
    answer racing it is either applied first (then the invocation is no longer open and the
    cancel is refused) or comes after the failure (then it is discarded: sent after the
    invocation failed, ``invocations.receivers.ignore_after_cancellation``). Its ids of
    outbox rows are appended to ``outbox`` for the caller to deliver after the commit."""
    # The stepper's gate checks the reason (required, not blank, fits, no NUL), as it does
    # for every operator action (docs/durable-executions.md, "Data from outside").
    text = reason.strip() if isinstance(reason, str) else reason
    stepper.admit(stepper.OperatorRequest(reason=text, max_length=REASON_MAX_LENGTH))
    database = stepper.database()
    when = now or invocation_settings.now()
    rows = Invocation.objects.using(database)
    parent_id = rows.filter(pk=invocation_id).values_list("parent_id", flat=True).first()
    if parent_id is None:
        raise Invocation.DoesNotExist(f"invocation {invocation_id} does not exist")
    with transaction.atomic(using=database, durable=True):
        try:
            parent: Execution = stepper.lock(parent_id)
        except Execution.DoesNotExist:
            raise NotActionable(f"invocation {invocation_id}: its parent is gone") from None
        invocation = rows.get(pk=invocation_id)
        _refuse(invocation, action)
        if action == "retry_now":
            # Due now: the start claims it like any due retry (invocations.leases).
            rows.filter(pk=invocation_id).update(next_attempt_at=when, updated=when)
        stepper.record_operation(
            parent,
            action=f"invocation_{action}",
            row={"invocation": invocation.pk, "invokeid": invocation.invokeid},
            reason=text,
            now=when,
            caller_context=caller_context,
        )
        refused = None
        if action == "cancel":
            failure = _cancelled(text)
            refused = _fail_locked(parent, invocation, failure, when, outbox, caller_context)
    if refused is not None:
        raise refused  # (recorded as refused: the parent's status does not take inputs)
    return invocation


def _fail_locked(
    parent: Execution,
    invocation: Invocation,
    reason: str,
    when: datetime,
    outbox: list[int] | None,
    caller_context: dict[str, Any] | None,
) -> StepRefused | None:
    """The invocation's failure, applied to its locked parent in the caller's transaction:
    the row fenced (a running start's answer is dropped: ``invocations.leases``) and the
    parent fed ``error.communication.invoke.<id>`` (the row is then ``failed``: the parent's
    own step writes it, ``invocations.receivers.note_answers``). Returns the refusal to raise
    after the commit, if the parent's status refused the input (``stepper.step_locked``)."""
    Invocation.objects.using(stepper.database()).filter(
        pk=invocation.pk, status__in=OPEN_STATUSES
    ).update(last_error=reason, next_attempt_at=None, claimed_until=None, claim_token=None)
    failure = answers.request_of(
        invocation, Answer.failed(reason), key=invocation_telemetry.PLATFORM_FAILURE_KEY
    )
    event = stepper.answer_event(failure)
    cause = {**(failure.cause or {}), "failed": True}
    _, refused = stepper.step_locked(
        parent,
        stepper.Input.external(event),
        when,
        [] if outbox is None else outbox,
        caller_context,
        cause=cause,
    )
    return refused


def _refuse(invocation: Invocation, action: str) -> None:
    pk = invocation.pk
    if invocation.type == "scxml":
        raise NotActionable(
            f"invocation {pk} is a child execution: cancel or send to the child itself"
        )
    if invocation.status not in OPEN_STATUSES:
        raise NotActionable(
            f"invocation {pk} is {invocation.status}: only an open one can be acted on"
        )
    waiting = invocation.status == InvocationStatus.STARTING or invocation.next_attempt_at
    if action == "retry_now" and not waiting:
        raise NotActionable(
            f"invocation {pk} has started and is not waiting for a retry: nothing to retry"
        )
