"""Expired timers: a delayed send later than its ``ds:expires`` allowed is not delivered.

A timer is delivered however late it fires (SCXML 6.2: a delayed send is dispatched when its
delay has passed; only a finished session discards it). A chart may opt out per chart or per
send with ``ds:expires`` (``statecharts.core.expiry``); the row then keeps ``expires_at``
(its first due plus the expiry, ``timers.scheduling``). A fire at or before that moment
delivers as usual; a fire after it (``expired``):

- takes the row ``pending -> expired`` with the same conditional, fenced UPDATE as a fire's
  take (``timers.settling._settle_ids``: only while still pending, due and held by the
  claim that read it), under the execution's lock (the lock order of every step: execution,
  then its timers), reason ``expired: N s late (ds:expires M s)``;
- and, in the same transaction, steps the execution that scheduled it with the platform
  event :data:`EXPIRED_EVENT` (``error.platform.timer.expired``, type ``platform``,
  ``_event.sendid`` the send's id; its data: ``sendid``, ``event`` (the name that was not
  delivered), ``due``, ``expires_at``, ``late_s``), recorded in the history with the timer as
  its cause, as a fired timer's step is. It is the chart that scheduled the send that hears
  it, whatever the send's target was. Nothing is delivered to that target: never silently
  dropped, never delivered late.

The row's delivery (``TIMER_DELIVERIES``) is not called for an expired row: expiry is the
chart's rule, decided before any delivery. A step refused (the execution halted, or needing
migration or repair) holds the row pending, snoozed, as for a fire; it expires when the
execution can take the event.
"""

from __future__ import annotations

from datetime import datetime

from statecharts import stepper
from statecharts.core.events import PLATFORM, Event
from statecharts.core.plan import Instruction, InstructionKind
from statecharts.core.targets import Target, TargetKind
from statecharts.core.telemetry import TelemetryEvent
from statecharts.models import Execution
from timers import observing
from timers.models import Timer, TimerStatus
from timers.settling import EXPIRED, SKIPPED, _settle_ids, _snooze

EXPIRED_EVENT = "error.platform.timer.expired"


def is_expired(timer: Timer, now: datetime) -> bool:
    """Whether a fire at ``now`` is later than the row's ``ds:expires`` allowed."""
    return timer.expires_at is not None and now > timer.expires_at


def expire(timer: Timer, execution: Execution, now: datetime, outbox: list[int]) -> str:
    """Record ``timer`` expired and tell its execution (the caller holds the execution's lock,
    in the fire's transaction); the outcome: ``expired``, ``skipped`` (no longer pending or
    no longer ours) or ``snoozed`` (the execution cannot take the event now)."""
    assert timer.expires_at is not None
    late = (now - timer.due).total_seconds()
    window = (timer.expires_at - timer.due).total_seconds()
    reason = f"expired: {late:g} s late (ds:expires {window:g} s)"
    if not _settle_ids([timer.pk], TimerStatus.EXPIRED, now, reason, timer.claim_token):
        return SKIPPED
    event_name = timer.event.get("name") if isinstance(timer.event, dict) else None
    event = Event(
        EXPIRED_EVENT,
        PLATFORM,
        {
            "sendid": timer.send_id,
            "event": event_name,
            "due": timer.due.isoformat(),
            "expires_at": timer.expires_at.isoformat(),
            "late_s": late,
        },
        sendid=timer.send_id,
    )
    target = Target(TargetKind.SELF, session_id=execution.session_id)
    tell = Instruction(InstructionKind.DELIVER_SELF, None, target, event)
    cause = {"timer": timer.pk, "ordinal": timer.ordinal, "scheduled_in": timer.scheduled_in}
    try:
        stepper.perform_delivery(execution, tell, now, outbox, timer.context, cause=cause)
    except stepper.StepRefused:
        # Refused and recorded (the status now holds the execution): held, as a fire is.
        held = f"execution {str(execution.status).replace('_', ' ')}: snoozed"
        return _snooze(timer, now, taken=True, reason=held)
    observing.timer_event(
        TelemetryEvent.TIMER_EXPIRED,
        timer,
        now=now,
        session_id=execution.session_id,
        reason=reason,
    )
    return EXPIRED
