"""The performers the timers app registers: ``schedule`` and ``cancel_timers``.

Both run inside the step's transaction, with the execution row locked by the stepper (the
lock order: the execution, then its timer rows).
"""

from __future__ import annotations

from datetime import timedelta

from django.apps import apps

from statecharts.core.plan import Instruction
from statecharts.models import Execution
from statecharts.stepper import StepContext, database
from timers.conf import timer_settings
from timers.models import Timer, TimerStatus


def schedule(context: StepContext, instruction: Instruction) -> None:
    """Write the timer row. The same (execution, ordinal) twice is a no-op, forever.

    The row keeps the target and event as the planner read them; when it fires, the planner
    makes its delivery of them again (``statecharts.core.plan.delivery``). It also keeps what
    firing it needs to know later, whatever the settings are by then: the delivery's name
    (``TIMER_DELIVERY``), the per-fire timeout (``TIMER_FIRE_TIMEOUT_SECONDS``) and the
    history seq of this step (``scheduled_in``: the fired step's cause points back to it)."""
    effect = instruction.effect
    assert effect is not None and instruction.target is not None
    data = effect.data
    Timer.objects.using(database()).bulk_create(
        [
            Timer(
                execution=context.execution,
                send_id=data["send_id"],
                ordinal=data["ordinal"],
                event=data["event"],
                target=instruction.target.to_dict(),
                due=context.now + timedelta(milliseconds=data["delay_ms"]),
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


def cancel(context: StepContext, instruction: Instruction) -> None:
    """Cancel every pending timer of this execution under the send id (spec 6.3).

    A cancel that matches nothing is a no-op; other executions' timers are never touched.
    """
    Timer.objects.using(database()).filter(
        execution=context.execution,
        send_id=instruction.data["send_id"],
        status=TimerStatus.PENDING,
    ).update(
        status=TimerStatus.CANCELLED,
        reason=f"cancelled by <cancel> in step {context.seq}",
        settled=context.now,
        claimed_until=None,
    )
    if apps.is_installed("routes"):  # and the delayed route sends under it (the same key)
        from timers.routequeue import cancel_for_step

        cancel_for_step(context, instruction)


def discard_when_finished(sender: object, execution: Execution, **kwargs: object) -> None:
    """``execution_finished`` receiver: the pending timers of an execution that has just
    completed, failed or been cancelled are marked discarded in that same step, so lists of
    pending timers stay true. (Firing re-checks liveness anyway: this is not the guarantee.)"""
    Timer.objects.using(database()).filter(
        execution=execution, status=TimerStatus.PENDING
    ).update(
        status=TimerStatus.DISCARDED,
        reason=f"execution {execution.status} before the timer was due",
        settled=execution.ended or execution.updated,
        claimed_until=None,
    )
