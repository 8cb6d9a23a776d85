"""Delivering outbox messages: exactly once, each side writing only its own rows.

A message (``OutboxMessage``, the sender's row) is delivered after the sender's step commits,
by the process that ran it (``deliver``), and otherwise by the sweeper (``deliver_pending``,
run every minute on the django-q2 cluster: ``statecharts.stepper.sweeper``), e.g. after that
process died right after its commit. Delivering message M to the target T:

1. **T's step** (one transaction, T locked): if T already applied M (an ``AppliedMessage``
   row, T's own) nothing happens; if T is not active, nothing happens (go to 3); otherwise
   the event is applied and the ``AppliedMessage`` row written, in the same transaction.
2. **Bookkeeping** (its own transaction): M, still pending, is marked ``delivered``.
3. **The sender's step**, when T is gone or finished (and did not apply M): the sender is
   told ``error.communication`` (spec 6.2) and M is marked ``undeliverable``, in the same
   transaction (M is the sender's row).

A crash between 1 and 2 leaves M pending with T's record of it: the next delivery finds the
record (1 applies nothing) and does 2. Re-delivery is therefore harmless, and the lock order
is one execution per transaction: there is nothing to deadlock on.

**Inline, then the workers.** The process that ran a step delivers what it sent right after
the commit (``deliver``), and what those deliveries send in turn, but at most
``INLINE_DELIVERIES`` messages: a ping-pong between two executions would otherwise keep the
caller of the first send waiting while it runs (1,000 deliveries: seconds). The rest stay
pending for the sweeper (``deliver_pending``, ``OUTBOX_BATCH`` a run). Per (sender, target)
order is kept: an inline delivery leaves its message pending too when an earlier message of
the same sender to the same target is still pending (deferred, or waiting), so it never
overtakes it; the sweeper delivers them in id order.

Messages of other kinds (``OutboxMessage.kind``) are delivered by the handler an app
registered for the kind (``register_message_kind``), with the same guarantees to keep: it is
called again after a crash until it says the message is handled, so it must be idempotent
(the invocations app's ``invocations.start`` creates a child at most once, on its unique
(parent, invocation ordinal)). A kind nobody registered here stays pending (a fact about this
deployment, not about the message); a handler that raises leaves it pending with the attempt
counted and the error kept, for an operator to see. A handler that returns False leaves it
pending with no attempt counted: it can so leave a message for a later call, e.g. to bound
what one call does inline (``this_call``: counters for the current ``deliver`` call; the
invocations app starts at most ``INVOKE_STARTS_PER_DELIVERY`` child charts of one tree per
call).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import F

from statecharts.conf import statecharts_settings
from statecharts.core.events import PLATFORM, Event, error_data
from statecharts.core.telemetry import TelemetryEvent
from statecharts.drivers.durable import Input
from statecharts.exceptions import StepRefused
from statecharts.models import AppliedMessage, Execution, OutboxMessage
from statecharts.models.outbox import OutboxStatus
from statecharts.policies import codecs
from statecharts.statuses import InputRule, rules
from statecharts.stepper import gate, observing, sql
from statecharts.stepper.recording import record_operation
from statecharts.stepper.requests import OperatorRequest
from statecharts.stepper.stepping import feed_step, step_locked
from statecharts.stepper.transaction import lock

log = logging.getLogger("statecharts.stepper")

EVENT = "event"

# (the message, the list to append the outbox ids it writes to) -> whether it is handled
MessageHandler = Callable[[OutboxMessage, list[int]], bool]
_kinds: dict[str, MessageHandler] = {}
# What message handlers counted during the current ``deliver`` call (``this_call``).
_this_call: ContextVar[dict[str, int] | None] = ContextVar("statecharts_delivery", default=None)


def register_message_kind(kind: str, handler: MessageHandler) -> None:
    """Deliver outbox messages of ``kind`` with ``handler`` (an app does it in ``ready()``)."""
    if kind == EVENT:
        raise ValueError("the 'event' kind is the stepper's own")
    _kinds[kind] = handler


def deliver(message_ids: Iterable[int], *, limit: int | None = None) -> int:
    """Deliver outbox messages (and those their deliveries write), each in its own step.

    Returns how many were delivered. Without ``limit`` this is the inline delivery after a
    step: it takes at most ``INLINE_DELIVERIES`` messages (delivered or not), and leaves a
    message pending when an earlier one of the same sender to the same target still is (the
    module docstring); the rest stay pending for ``deliver_pending``. With ``limit`` (the
    sweeper's ``OUTBOX_BATCH``) it stops after that many deliveries.
    """
    inline = limit is None
    limit = statecharts_settings.INLINE_DELIVERIES if inline else limit
    queue = deque(message_ids)
    delivered = taken = 0
    token = _this_call.set({})
    try:
        while queue and delivered < limit and (not inline or taken < limit):
            more: list[int] = []
            taken += 1
            if deliver_one(queue.popleft(), more, in_order=inline):
                delivered += 1
            queue.extend(more)
    finally:
        _this_call.reset(token)
    if queue and inline:  # (they are pending rows: the sweeper delivers them)
        log.debug("%d outbox message(s) left for the sweeper after %d inline", len(queue), taken)
    return delivered


def this_call() -> dict[str, int]:
    """For a message handler: counters kept for the current ``deliver`` call (a fresh dict
    outside one). A handler can so bound the work one call does inline (the invocations app
    bounds the child charts one call starts in one tree) and return False past it: the
    message stays pending, for the sweeper's next call."""
    counts = _this_call.get()
    return {} if counts is None else counts


def deliver_pending(
    *, limit: int | None = None, older_than: timedelta | None = None, now: datetime | None = None
) -> int:
    """Deliver messages left pending (e.g. by a process that died right after its commit).

    ``older_than`` skips messages written more recently than that (the process that wrote them
    is normally delivering them right now; the sweeper leaves those alone).
    """
    limit = statecharts_settings.OUTBOX_BATCH if limit is None else limit
    pending = OutboxMessage.objects.using(sql.database()).pending()
    if older_than is not None:
        pending = pending.filter(created__lte=(now or statecharts_settings.now()) - older_than)
    ids = list(pending.order_by("id").values_list("pk", flat=True)[:limit])
    return deliver(ids, limit=limit)


def deliver_one(
    message_id: int, more: list[int], *, tell_sender: bool = True, in_order: bool = False
) -> bool:
    """Deliver one message (see the module docstring); True if its target applied it now.

    ``tell_sender=False`` (an operator's retry) marks a message that still cannot be
    delivered undeliverable again without telling the sender a second time. ``in_order``
    (inline deliveries): a message with an earlier one of the same sender to the same target
    still pending is left pending, for the sweeper to deliver after it.
    """
    database = sql.database()
    message = (
        OutboxMessage.objects.using(database)
        .filter(pk=message_id, status=OutboxStatus.PENDING)
        .first()
    )
    if message is None:
        return False
    if message.kind != EVENT:
        return _deliver_other_kind(message, more)
    if in_order and _behind_an_earlier_one(message):
        return False  # it would overtake a deferred message: the sweeper delivers both
    target_session_id = message.target_session_id
    sender_id, send_id = message.sender_id, message.send_id
    try:
        event = codecs.decode_event(message.event, message.codec)
    except codecs.CodecUnavailable as exc:
        # A fact about this deployment (a codec or key not deployed here yet): it waits,
        # pending, and the sweeper tries again; the reason is kept for an operator.
        _waiting(message, f"{exc}: waiting")
        return False
    except codecs.CorruptPayload as exc:  # a fact about the row: it can never be delivered
        reason = f"undecodable: {exc}"
        _settle_undelivered(sender_id, message_id, send_id, reason, more, tell_sender)
        return False
    target = _target(target_session_id)
    if target is None and _waiting_for_its_target(message):
        return False  # the target is still to be created (e.g. an invoked child): later
    if target is not None and rules(target[1]).inputs is InputRule.APPLY:
        step_input = Input.external(Event.from_dict(event))
        cause: dict[str, Any] = {"message": message_id, "sender": sender_id}
        if message.via_invocation is not None:
            cause["invocation"] = message.via_invocation
        try:
            applied = feed_step(
                target[0],
                step_input,
                None,
                more,
                applying=message_id,
                cause=cause,
                caller_context=message.caller_context,  # the sender's, carried across
            )
        except StepRefused:  # the step was refused (e.g. it went over a budget: halted)
            applied = None
        if applied is not None:
            _mark_delivered(message_id)
            _delivered(message, event.get("name"))
            return True
        target = _target(target_session_id)  # it applied it before, or it cannot take it
    # The target never applied it, and cannot: the sender is told (spec 6.2:
    # error.communication), in the step that marks its message undeliverable.
    reason = (
        f"session {target_session_id!r} does not exist"
        if target is None
        else f"session {target_session_id!r} is {target[1]}"
    )
    _settle_undelivered(sender_id, message_id, send_id, reason, more, tell_sender)
    return False


def _waiting(message: OutboxMessage, reason: str) -> None:
    log.warning("outbox message %s: %s", message.pk, reason)
    OutboxMessage.objects.using(sql.database()).filter(
        pk=message.pk, status=OutboxStatus.PENDING
    ).update(last_error=reason[:2000])
    if observing.listening():
        observing.after_commit(
            TelemetryEvent.OUTBOX_WAITING, None, **_attributes(message), reason=reason
        )


def _attributes(message: OutboxMessage) -> dict[str, Any]:
    """What every ``outbox.*`` event says of its message (docs/telemetry.md)."""
    return {
        "message_id": message.pk,
        "kind": message.kind,
        "sender_id": message.sender_id,
        "target_session_id": message.target_session_id,
        "codec": message.codec,
    }


def _delivered(message: OutboxMessage, event_name: str | None = None) -> None:
    if observing.listening():
        lateness = (statecharts_settings.now() - message.created).total_seconds()
        observing.after_commit(
            TelemetryEvent.OUTBOX_DELIVERED,
            None,
            **_attributes(message),
            event_name=event_name,
            lateness_s=lateness,
        )


def _behind_an_earlier_one(message: OutboxMessage) -> bool:
    """Whether an earlier message of the same sender to the same target is still pending."""
    return (
        OutboxMessage.objects.using(sql.database())
        .pending()
        .filter(
            sender_id=message.sender_id,
            target_session_id=message.target_session_id,
            pk__lt=message.pk,
        )
        .exists()
    )


def _waiting_for_its_target(message: OutboxMessage) -> bool:
    """Whether an earlier message still pending will create the target (sent to a child
    whose start is not delivered yet): then this one waits, in order, instead of failing."""
    return (
        OutboxMessage.objects.using(sql.database())
        .pending()
        .filter(target_session_id=message.target_session_id, pk__lt=message.pk)
        .exclude(kind=EVENT)
        .exists()
    )


def _deliver_other_kind(message: OutboxMessage, more: list[int]) -> bool:
    handler = _kinds.get(message.kind)
    if handler is None:
        return False  # no app here delivers this kind: it waits (the sweeper tries again)
    try:
        handled = handler(message, more)
    except Exception as exc:  # kept on the row for an operator; the sweeper tries again
        log.warning("outbox message %s (%s) failed: %s", message.pk, message.kind, exc)
        OutboxMessage.objects.using(sql.database()).filter(pk=message.pk).update(
            attempts=F("attempts") + 1, last_error=f"{type(exc).__name__}: {exc}"[:2000]
        )
        return False
    if handled:
        _mark_delivered(message.pk)
        _delivered(message)
    return handled


def _target(session_id: str) -> tuple[int, str] | None:
    found: tuple[int, str] | None = (
        Execution.objects.using(sql.database())
        .filter(session_id=session_id)
        .values_list("pk", "status")
        .first()
    )
    return found


def _applied_by_someone(message_id: int) -> bool:
    return AppliedMessage.objects.using(sql.database()).filter(message_id=message_id).exists()


def _mark_delivered(message_id: int) -> None:
    """Bookkeeping on the sender's row (no step: the target's step already decided)."""
    now = statecharts_settings.now()
    OutboxMessage.objects.using(sql.database()).filter(
        pk=message_id, status=OutboxStatus.PENDING
    ).update(status=OutboxStatus.DELIVERED, delivered=now, reason="")


def _settle_undelivered(
    sender_id: int, message_id: int, send_id: str, reason: str, more: list[int], tell: bool
) -> None:
    """In the sender's step: the message is delivered after all (its target's record says
    so: a delivery raced this one), or undeliverable, and then the sender is told."""
    database = sql.database()
    with transaction.atomic(using=database, durable=True):
        try:
            sender: Execution | None = lock(sender_id)
        except Execution.DoesNotExist:
            sender = None
        if _applied_by_someone(message_id):
            _mark_delivered(message_id)
            return
        now = statecharts_settings.now()
        taken = (
            OutboxMessage.objects.using(database)
            .filter(pk=message_id, status=OutboxStatus.PENDING)
            .update(status=OutboxStatus.UNDELIVERABLE, reason=reason, delivered=now)
        )
        if taken and observing.listening():
            observing.after_commit(
                TelemetryEvent.OUTBOX_UNDELIVERABLE,
                sender.session_id if sender is not None else None,
                message_id=message_id,
                sender_id=sender_id,
                send_id=send_id,
                reason=reason,
            )
        if taken and tell and sender is not None:
            error = Event(
                "error.communication",
                PLATFORM,
                error_data(reason, tagname="send"),
                sendid=send_id or None,
            )
            step_locked(
                sender, Input.internal(error), now, more, cause={"undeliverable": message_id}
            )


REASON_MAX_LENGTH = 300  # an operator's reason for a retry (as for timers' actions)


def retry(
    message_id: int,
    *,
    reason: str,
    caller_context: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> bool:
    """Try an undeliverable message again (an operator's action: the target may be back, e.g.
    after a migration). The sender was told ``error.communication`` when it failed; if the
    retry succeeds the target gets the event after all, and if it fails again the sender is
    not told twice. Returns whether it was delivered (False, and nothing recorded, for a
    message that is not undeliverable).

    An operator's action like the others: ``reason`` (required, not blank, at most
    ``REASON_MAX_LENGTH``) and ``caller_context`` pass the gate (``OperatorRequest``;
    ``InvalidInput`` otherwise, nothing done); the message is taken back from undeliverable
    and the retry recorded as the sender's next history entry (disposition ``operated``,
    action ``outbox_retry``) in one transaction under the sender's lock; the delivery runs
    after that commit, as every delivery does."""
    text = reason.strip() if isinstance(reason, str) else reason
    context = gate.admit(
        OperatorRequest(reason=text, max_length=REASON_MAX_LENGTH, caller_context=caller_context)
    )
    database = sql.database()
    messages = OutboxMessage.objects.using(database)
    found = messages.filter(pk=message_id).values_list("sender_id", "target_session_id").first()
    if found is None:
        return False
    sender_id, target = found
    with transaction.atomic(using=database, durable=True):
        sender = lock(sender_id)
        reset = messages.filter(pk=message_id, status=OutboxStatus.UNDELIVERABLE).update(
            status=OutboxStatus.PENDING, reason="", delivered=None
        )
        if not reset:
            return False
        record_operation(
            sender,
            action="outbox_retry",
            row={"message": message_id, "target": target},
            reason=text,
            now=now or statecharts_settings.now(),
            caller_context=context,
        )
    more: list[int] = []
    delivered = deliver_one(message_id, more, tell_sender=False)
    deliver(more)
    return delivered
