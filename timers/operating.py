"""An operator's actions on one pending timer: fire it now, cancel it, reschedule it.

Each action is one transaction under its execution's lock (the lock order of every step:
execution, then its timers), decided again under that lock, and recorded as the execution's
next history entry (disposition ``operated``: the action, the timer, the reason the operator
typed, the caller context of the door they used; ``stepper.record_operation``):

- **fire now** goes through the normal fire path (``timers.fire_one``): the row is made due
  now and fired at once, so the liveness check (a finished execution's timer is discarded,
  a held one snoozed), the take (pending -> fired, only if still pending: a cancel or a firer
  that took it first wins) and the delivery are the ones every fire makes. A delivery that
  raises rolls the whole action back: the timer stays as it was and the error is the answer;
- **cancel**: pending -> cancelled, ``cancelled_by`` naming the operator;
- **reschedule**: pending, due at the new time; its identity and its ``(execution, ordinal)``
  key are kept, its claim (if a firer held one) is dropped.

Fire now and reschedule drop the row's expiry (``expires_at``, the chart's ``ds:expires``:
``timers.expiry``): the operator's decision of when it fires replaces the chart's window.

A timer that is not pending (fired, cancelled, discarded, failed, expired: see
``timers.retrying`` for a failed one) is refused with :class:`NotActionable`, a
``StepRefused``: the refusal table's ``refused`` row (``statecharts.policies.refusals``) at
every door; a timer that does not exist is ``Timer.DoesNotExist`` (its ``not_found`` row).
The doors are the admin's actions (``timers.admin``), the API (``timers.api``) and
``manage.py timer_action``; each checks the action's own permission (:data:`PERMISSIONS`)
before calling here.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from enum import StrEnum
from typing import Any

from django.db import transaction

from statecharts import stepper
from statecharts.core.telemetry import TelemetryEvent
from statecharts.exceptions import InvalidInput, StepRefused
from statecharts.models import Execution
from timers import observing
from timers.conf import timer_settings
from timers.fire_one import _fire_with, _lock_execution
from timers.models import RouteTimer, Timer, TimerStatus

REASON_MAX_LENGTH = 300


class Action(StrEnum):
    FIRE_NOW = "fire_now"
    CANCEL = "cancel"
    RESCHEDULE = "reschedule"


# The permission each action needs, at every door (timers.models.Timer.Meta.permissions).
PERMISSIONS = {
    Action.FIRE_NOW: "timers.fire_timer",
    Action.CANCEL: "timers.cancel_timer",
    Action.RESCHEDULE: "timers.reschedule_timer",
}
ROUTE_PERMISSIONS = {
    Action.FIRE_NOW: "timers.fire_routetimer",
    Action.CANCEL: "timers.cancel_routetimer",
    Action.RESCHEDULE: "timers.reschedule_routetimer",
}


class NotActionable(StepRefused):
    """The timer's state does not allow the action (it is no longer pending)."""


class FireFailed(Exception):
    """Fire now's delivery raised: the action was rolled back, the timer is unchanged."""


def operator_reason(reason: Any) -> str:
    """The reason the operator typed, stripped: required, at most 300 characters;
    ``InvalidInput`` (the refusal table's ``invalid_input``) otherwise."""
    # The stepper's gate checks the reason (required, not blank, fits, no NUL), as it does
    # for every operator action (docs/durable-executions.md, "Data from outside").
    text = reason.strip() if isinstance(reason, str) else reason
    stepper.admit(stepper.OperatorRequest(reason=text, max_length=REASON_MAX_LENGTH))
    return text


def fire_now(
    timer_id: int,
    *,
    reason: str,
    caller_context: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> str:
    """Fire a pending timer now, through the normal fire path; returns the fire's outcome
    (``fired``, ``discarded``, ``snoozed``: ``timers.settling``)."""
    outbox: list[int] = []

    def act(execution: Execution | None, timer: Timer, when: datetime) -> str:
        # The operator's fire is delivered however late: their decision replaces the
        # chart's ds:expires (timers.expiry).
        Timer.objects.using(stepper.database()).filter(pk=timer.pk).update(
            due=when, expires_at=None
        )
        timer.due, timer.expires_at = when, None
        timer.claim_token = None  # this fire holds no claim (a firer's claim loses: no fence)
        return _fire_with(execution, timer, when, outbox, {})

    try:
        outcome = _operate(Action.FIRE_NOW, timer_id, reason, caller_context, now, act)
    except (NotActionable, InvalidInput, Timer.DoesNotExist):
        raise
    except Exception as exc:  # the delivery's own failure: everything was rolled back
        raise FireFailed(f"timer {timer_id}: fire now failed, nothing changed: {exc}") from exc
    if outbox:
        stepper.deliver(outbox)
    return outcome


def cancel(
    timer_id: int,
    *,
    reason: str,
    caller_context: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> str:
    """Cancel a pending timer; returns ``cancelled``."""

    def act(execution: Execution | None, timer: Timer, when: datetime) -> str:
        said = f"cancelled by an operator: {reason.strip()}"[:REASON_MAX_LENGTH]
        Timer.objects.using(stepper.database()).filter(pk=timer.pk).update(
            status=TimerStatus.CANCELLED,
            reason=said,
            cancelled_by={"operator": True, "reason": reason.strip(), "context": caller_context},
            settled=when,
            claimed_until=None,
            fire_deadline=None,
        )
        observing.timer_event(TelemetryEvent.TIMER_CANCELLED, timer, now=when, reason=said)
        return "cancelled"

    return _operate(Action.CANCEL, timer_id, reason, caller_context, now, act)


def reschedule(
    timer_id: int,
    due: datetime,
    *,
    reason: str,
    caller_context: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> str:
    """Make a pending timer due at ``due`` (an aware datetime); returns ``rescheduled``."""
    _aware(due)

    def act(execution: Execution | None, timer: Timer, when: datetime) -> str:
        Timer.objects.using(stepper.database()).filter(pk=timer.pk).update(
            due=due,
            expires_at=None,  # the operator's due replaces the chart's ds:expires
            claimed_until=None,
            claim_token=None,
            fire_deadline=None,
            reason=f"rescheduled by an operator: {reason.strip()}"[:REASON_MAX_LENGTH],
        )
        return "rescheduled"

    return _operate(
        Action.RESCHEDULE, timer_id, reason, caller_context, now, act, due=due.isoformat()
    )


def _operate(
    action: Action,
    timer_id: int,
    reason: str,
    caller_context: dict[str, Any] | None,
    now: datetime | None,
    act: Callable[[Execution | None, Timer, datetime], str],
    **recorded: Any,
) -> str:
    """Lock the timer's execution, read the timer again under the lock, refuse it unless it is
    pending, ``act``, record the operator's entry: one transaction."""

    def actionable(timer: Timer) -> None:
        if timer.status != TimerStatus.PENDING:
            raise NotActionable(
                f"timer {timer_id} is {timer.status}: only a pending timer can be {_DONE[action]}"
            )

    return _locked_action(
        Timer, "timer", action, timer_id, reason, caller_context, now, actionable, act, recorded
    )


def _locked_action(
    model: type[Any],
    what: str,
    action: Action,
    pk: int,
    reason: str,
    caller_context: dict[str, Any] | None,
    now: datetime | None,
    actionable: Callable[[Any], None],
    act: Callable[[Execution | None, Any, datetime], str],
    recorded: dict[str, Any],
) -> str:
    reason = operator_reason(reason)
    database = stepper.database()
    when = now or timer_settings.now()
    rows = model.objects.using(database)
    execution_id = rows.filter(pk=pk).values_list("execution_id", flat=True).first()
    if execution_id is None:
        raise model.DoesNotExist(_gone(what, pk))
    with transaction.atomic(using=database, durable=True):
        execution = _lock_execution(execution_id)
        row = rows.filter(pk=pk).first()
        if row is None:
            raise model.DoesNotExist(_gone(what, pk))
        actionable(row)
        outcome = act(execution, row, when)
        if execution is not None:
            stepper.record_operation(
                execution,
                action=f"{action.value}" if model is Timer else f"route_timer_{action.value}",
                row={what.replace(" ", "_"): row.pk, "send_id": row.send_id, "outcome": outcome,
                     **recorded},
                reason=reason,
                now=when,
                caller_context=caller_context,
            )  # fmt: skip
    return outcome


def _gone(what: str, pk: int) -> str:
    if what == "timer":
        return f"timer {pk} does not exist"
    return (
        f"{what} {pk} is not waiting: it was fired, cancelled or discarded (its fate is in "
        "the route deliveries), or never existed"
    )


# Route timers (timers.routequeue: delayed route sends). A row is there while it waits and
# leaves when it is fired, cancelled or discarded, so "not waiting" is "not found".


def fire_route_now(
    route_timer_id: int,
    *,
    reason: str,
    caller_context: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> str:
    """Fire a waiting route timer now, through the route fire path (liveness, the row's
    deletion and its key claimed in the ledger in one write, then the route's delivery
    after the commit); returns ``fired``, ``discarded`` or ``snoozed``."""
    from timers import routequeue  # (loaded only when the routes app is installed)

    claimed: list[Any] = []

    def act(execution: Execution | None, row: RouteTimer, when: datetime) -> str:
        outcome, taken = routequeue.fire_now_locked(row, when)
        claimed.extend(taken)
        return outcome

    outcome = _locked_action(
        RouteTimer, "route timer", Action.FIRE_NOW, route_timer_id, reason, caller_context,
        now, _waiting, act, {},
    )  # fmt: skip
    routequeue.perform_claimed(claimed)
    return outcome


def cancel_route(
    route_timer_id: int,
    *,
    reason: str,
    caller_context: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> str:
    """Cancel a waiting route timer: the row deleted, its key ``cancelled`` in the route
    deliveries with the operator's reason; returns ``cancelled``."""
    from timers import routequeue

    def act(execution: Execution | None, row: RouteTimer, when: datetime) -> str:
        said = f"cancelled by an operator: {reason.strip()}"[:REASON_MAX_LENGTH]
        routequeue.cancel_locked(row, when, said)
        return "cancelled"

    return _locked_action(
        RouteTimer, "route timer", Action.CANCEL, route_timer_id, reason, caller_context, now,
        _waiting, act, {},
    )  # fmt: skip


def reschedule_route(
    route_timer_id: int,
    due: datetime,
    *,
    reason: str,
    caller_context: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> str:
    """Make a waiting route timer due at ``due``; its key (the route's idempotency key) is
    kept; returns ``rescheduled``."""
    _aware(due)

    def act(execution: Execution | None, row: RouteTimer, when: datetime) -> str:
        RouteTimer.objects.using(stepper.database()).filter(pk=row.pk).update(
            due=due,
            claimed_until=None,
            reason=f"rescheduled by an operator: {reason.strip()}"[:REASON_MAX_LENGTH],
        )
        return "rescheduled"

    return _locked_action(
        RouteTimer, "route timer", Action.RESCHEDULE, route_timer_id, reason, caller_context,
        now, _waiting, act, {"due": due.isoformat()},
    )  # fmt: skip


def _waiting(row: RouteTimer) -> None:
    """A route timer row that is there is waiting: every action may act on it."""


def _aware(due: Any) -> None:
    if not isinstance(due, datetime) or due.tzinfo is None:
        raise InvalidInput.at("due", "must be a date and time with a time zone")


_DONE = {
    Action.FIRE_NOW: "fired now",
    Action.CANCEL: "cancelled",
    Action.RESCHEDULE: "rescheduled",
}
