"""The performers the timers app registers: ``schedule`` and ``cancel_timers``.

Both run inside the step's transaction, with the execution row locked by the stepper (the
lock order: the execution, then its timer rows).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.apps import apps

from statecharts.core.plan import Instruction
from statecharts.core.telemetry import TelemetryEvent
from statecharts.models import Execution
from statecharts.policies import codecs
from statecharts.stepper import StepContext, database
from timers import observing
from timers.conf import timer_settings
from timers.models import Timer, TimerStatus


def schedule(context: StepContext, instruction: Instruction) -> None:
    """Write the timer row. The same (execution, ordinal) twice is a no-op, forever.

    The row keeps the target and event as the planner read them; when it fires, the planner
    makes its delivery of them again (``statecharts.core.plan.delivery``). It also keeps what
    firing it needs to know later, whatever the settings are by then: the delivery's name
    (``TIMER_DELIVERY``), the payload codec that wrote its event's data (``PAYLOAD_CODEC``,
    ``statecharts.policies.codecs``), the per-fire timeout (``TIMER_FIRE_TIMEOUT_SECONDS``), the
    history seq of this step (``scheduled_in``: the fired step's cause points back to it) and,
    when the send has a ``ds:expires``, the moment after which it is not delivered
    (``expires_at``: its due plus the expiry; ``timers.expiry``)."""
    effect = instruction.effect
    assert effect is not None and instruction.target is not None
    data = effect.data
    event, codec = codecs.encode_event(data["event"])
    due = context.now + timedelta(milliseconds=data["delay_ms"])
    expires_ms = data.get("expires_ms")  # ds:expires (statecharts.core.expiry), if any
    written = Timer.objects.using(database()).bulk_create(
        [
            Timer(
                execution=context.execution,
                send_id=data["send_id"],
                ordinal=data["ordinal"],
                event=event,
                codec=codec,
                target=instruction.target.to_dict(),
                due=due,
                expires_at=None if expires_ms is None else due + timedelta(milliseconds=expires_ms),
                macrostep=effect.macrostep,
                microstep=effect.microstep,
                round=effect.round,
                content_index=data.get("content_index"),
                owner=data.get("owner") or "",
                context=context.caller_context,
                scheduled_in=context.seq,
                delivery=timer_settings.TIMER_DELIVERY,
                fire_timeout_seconds=timer_settings.TIMER_FIRE_TIMEOUT_SECONDS,
                created=context.now,
            )
        ],
        ignore_conflicts=True,
    )
    if observing.listening():
        timer = written[0]
        if timer.pk is None:  # (ignore_conflicts leaves it unset: one query, only here)
            timer.pk = (
                Timer.objects.using(database())
                .filter(execution=context.execution, ordinal=timer.ordinal)
                .values_list("pk", flat=True)
                .first()
            )
        observing.timer_event(
            TelemetryEvent.TIMER_SCHEDULED,
            timer,
            session_id=context.execution.session_id,
            delay_ms=data["delay_ms"],
            scheduled_in=context.seq,
        )


def cancel(context: StepContext, instruction: Instruction) -> dict[str, Any]:
    """Cancel every pending timer of this execution under the send id (spec 6.3).

    A cancel that matches nothing is a no-op; other executions' timers are never touched.
    Each cancelled row keeps what cancelled it, as the design documents' ``Cancel`` effect
    carries it (``cancelled_by``): the step, the ``<cancel>``'s ordinal, content index and
    owner block, and that step's caller context; the row's own ``context`` (the scheduling
    step's) stays, so both ends of the timer's life are attributed.

    Returns what the step's history records with the ``cancel`` effect: the timers it
    cancelled, each with its ordinal, the step that scheduled it and its caller context (the
    design documents hand the context back at cancellation time, so the cancelling step links
    to the request that armed the timer).
    """
    data = instruction.data
    rows = Timer.objects.using(database()).filter(
        execution=context.execution,
        send_id=data["send_id"],
        status=TimerStatus.PENDING,
    )
    cancelled = [
        {"timer": pk, "ordinal": ordinal, "scheduled_in": seq, "context": caller}
        for pk, ordinal, seq, caller in rows.order_by("ordinal").values_list(
            "pk", "ordinal", "scheduled_in", "context"
        )
    ]
    rows.filter(pk__in=[c["timer"] for c in cancelled]).update(
        status=TimerStatus.CANCELLED,
        reason=f"cancelled by <cancel> in step {context.seq}",
        cancelled_by={
            "seq": context.seq,
            "ordinal": data.get("ordinal"),
            "content_index": data.get("content_index"),
            "owner": data.get("owner") or "",
            "context": context.caller_context,
        },
        settled=context.now,
        claimed_until=None,
    )
    observing.bulk_event(
        TelemetryEvent.TIMER_CANCELLED,
        context.execution,
        len(cancelled),
        send_id=data["send_id"],
        reason=f"cancelled by <cancel> in step {context.seq}",
    )
    done: dict[str, Any] = {"cancelled_timers": cancelled}
    if apps.is_installed("routes"):  # and the delayed route sends under it (the same key)
        from timers.routequeue import cancel_for_step

        routed = cancel_for_step(context, instruction)
        if routed:
            done["cancelled_route_sends"] = routed
    return done


def discard_when_finished(sender: object, execution: Execution, **kwargs: object) -> None:
    """``execution_finished`` receiver: the pending timers of an execution that has just
    completed, failed or been cancelled are marked discarded in that same step, so lists of
    pending timers stay true. (Firing re-checks liveness anyway: this is not the guarantee.)"""
    reason = f"execution {execution.status} before the timer was due"
    discarded = Timer.objects.using(database()).filter(
        execution=execution, status=TimerStatus.PENDING
    ).update(
        status=TimerStatus.DISCARDED,
        reason=reason,
        settled=execution.ended or execution.updated,
        claimed_until=None,
    )
    observing.bulk_event(TelemetryEvent.TIMER_DISCARDED, execution, discarded, reason=reason)
