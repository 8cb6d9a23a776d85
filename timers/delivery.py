"""Timer deliveries: what a fired timer does, chosen per row by a name registered in settings.

A timer row names its delivery (``Timer.delivery``, written from ``TIMER_DELIVERY`` when the
timer is scheduled). When it fires, the name is looked up in
``STATECHARTS["TIMER_DELIVERIES"]`` (name -> dotted path of a class); the row never holds a
path, so nothing a row says is ever imported. The default, ``StepperDelivery``, is the
planner's delivery of the stored target and event performed by the stepper.

A delivery is a class with a ``deliver(fire)`` method, instantiated once per process with no
arguments. ``deliver`` runs inside the fire's transaction, with the execution locked and the
timer row already taken (pending -> fired), and answers:

- ``None``: delivered; whatever it wrote commits with the timer marked fired;
- ``Snooze(seconds)``: not now: the timer stays pending, due ``seconds`` later, no attempt
  spent. Answer it *before* doing anything: what the delivery wrote commits with the snooze;
- ``Cancel(reason)`` or ``Discard(reason)`` (``timers.retry_policy``): never deliver this
  row: it ends ``cancelled`` or ``discarded`` now, the reason recorded, no attempt spent.
  Answer it before doing anything, like a snooze;
- a raise (or any other answer, ``Snooze(0)`` and ``Snooze(-1)`` included): the transaction
  rolls back and the attempt is spent (retried with backoff, failed after the last attempt:
  the class's ``retry_policy``, ``timers.retry_policy.RetryPolicy``, or the settings);
- ``stepper.StepRefused`` (the execution cannot take it now) and ``stepper.NoPerformer``
  (nothing in this deployment performs it) snooze the timer, no attempt spent.

A name that cannot be resolved *now* (not in the setting, or its class cannot be imported)
is a fact about this deployment, not about the row: the timer is snoozed without spending an
attempt (``DeliveryUnavailable``), so a rolling deploy never fails timers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from statecharts import stepper
from statecharts.conf import NamedClasses
from statecharts.core.plan import Instruction
from statecharts.models import Execution
from timers.models import Timer
from timers.retry_policy import Cancel, Discard, GiveUp, RetryPolicy, policy_of

__all__ = [
    "Cancel",
    "Delivery",
    "DeliveryUnavailable",
    "Discard",
    "Fire",
    "GiveUp",
    "RetryPolicy",
    "Snooze",
    "StepperDelivery",
    "policy_for",
    "resolve",
]


@dataclass(frozen=True, slots=True)
class Snooze:
    """A delivery's "not now, try again in ``seconds`` seconds" (a positive int)."""

    seconds: int
    reason: str = ""

    @property
    def valid(self) -> bool:
        return type(self.seconds) is int and self.seconds > 0


@dataclass(slots=True)
class Fire:
    """What a delivery is given: one timer being fired."""

    timer: Timer  # the row as claimed: what it delivers never changes after it is written
    execution: Execution  # locked for the rest of the transaction
    instruction: Instruction  # the planner's delivery of the row's target and event
    now: datetime  # the fire's injected clock
    # Outbox ids written in this transaction: delivered after the commit (append to it).
    outbox: list[int] = field(default_factory=list)

    @property
    def cause(self) -> dict[str, Any]:
        """What the step it causes records as its cause: this timer, its ordinal and the
        history seq of the step that scheduled it (never part of a key)."""
        timer = self.timer
        return {"timer": timer.pk, "ordinal": timer.ordinal, "scheduled_in": timer.scheduled_in}


class Delivery(Protocol):
    def deliver(self, fire: Fire) -> Snooze | GiveUp | None: ...


class StepperDelivery:
    """The default: the planner's delivery (``statecharts.core.plan.delivery``) performed by
    the stepper (``stepper.perform_delivery``), exactly as an immediate send to the same
    target would be: a step of this execution (``deliver_self``, ``deliver_internal``), an
    outbox row to another execution, or an app's performer (a child, a route). The step it
    causes records the timer as its cause."""

    def deliver(self, fire: Fire) -> None:
        stepper.perform_delivery(
            fire.execution,
            fire.instruction,
            fire.now,
            fire.outbox,
            fire.timer.context,
            cause=fire.cause,
        )


class DeliveryUnavailable(LookupError):
    """The row's delivery name cannot be resolved in this deployment now."""


_named: NamedClasses[Delivery] = NamedClasses(
    "TIMER_DELIVERIES", what="delivery", method="deliver", unavailable=DeliveryUnavailable
)


def resolve(name: str) -> Delivery:
    """The delivery registered under ``name`` (loaded once per name and path); raises
    ``DeliveryUnavailable`` when this deployment has no such name or cannot load it."""
    return _named.resolve(name)


def policy_for(name: str) -> RetryPolicy:
    """The retry policy of the delivery registered under ``name`` (``timers.retry_policy``);
    the settings' when this deployment cannot resolve it now."""
    try:
        return policy_of(resolve(name))
    except DeliveryUnavailable:
        return policy_of(None)
