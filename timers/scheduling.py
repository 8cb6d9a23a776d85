"""The effect handlers the timers app registers: ``send_delayed`` and ``cancel``.

Both run inside the step's transaction, with the execution row locked by the stepper.
"""

from __future__ import annotations

from datetime import timedelta

from statecharts.core.effects import Effect
from statecharts.handlers import EffectContext
from statecharts.models import Execution
from timers.models import Timer, TimerStatus


def schedule(context: EffectContext, effect: Effect) -> None:
    """Write the timer row. The same (execution, ordinal) twice is a no-op, forever."""
    data = effect.data
    Timer.objects.bulk_create(
        [
            Timer(
                execution=context.execution,
                send_id=data["send_id"],
                ordinal=data["ordinal"],
                event=data["event"],
                target=data["target"],
                due=context.now + timedelta(milliseconds=data["delay_ms"]),
                macrostep=effect.macrostep,
                microstep=effect.microstep,
                round=effect.round,
                content_index=data.get("content_index"),
                owner=data.get("owner") or "",
                context=context.caller_context,
                created=context.now,
            )
        ],
        ignore_conflicts=True,
    )


def cancel(context: EffectContext, effect: Effect) -> None:
    """Cancel every pending timer of this execution under the send id (spec 6.3).

    A cancel that matches nothing is a no-op; other executions' timers are never touched.
    """
    Timer.objects.filter(
        execution=context.execution, send_id=effect.data["send_id"], status=TimerStatus.PENDING
    ).update(
        status=TimerStatus.CANCELLED,
        reason=f"cancelled by <cancel> in step {context.seq}",
        settled=context.now,
        claimed_until=None,
    )


def discard_when_finished(sender: object, execution: Execution, **kwargs: object) -> None:
    """``execution_finished`` receiver: the pending timers of an execution that has just
    completed, failed or been cancelled are marked discarded in that same step, so lists of
    pending timers stay true. (Firing re-checks liveness anyway: this is not the guarantee.)"""
    Timer.objects.filter(execution=execution, status=TimerStatus.PENDING).update(
        status=TimerStatus.DISCARDED,
        reason=f"execution {execution.status} before the timer was due",
        settled=execution.ended or execution.updated,
        claimed_until=None,
    )
