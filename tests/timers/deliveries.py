"""Timer deliveries the tests register in ``STATECHARTS["TIMER_DELIVERIES"]`` by dotted path
(tests/timers/test_timer_worker.py). Imported by the tests as ``tests.timers.deliveries``, the
name the setting uses, so both see the same module (and the same ``calls``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from timers.delivery import Fire, RetryPolicy, Snooze, StepperDelivery

# What the recording deliveries saw, in order: (delivery, timer id, id of the fire's outbox
# list: timers fired in one transaction share it).
calls: list[tuple[str, int, int]] = []

# Run by RecordingDelivery before it delivers (a test looks at the database mid-batch).
probes: list[Callable[[Fire], None]] = []

# What AnswerDelivery answers (after performing the default delivery, when ``perform``).
answer: dict[str, Any] = {"value": None, "perform": False}


class RecordingDelivery(StepperDelivery):
    """The default delivery, recording each fire."""

    def deliver(self, fire: Fire) -> None:
        calls.append(("recording", fire.timer.pk, id(fire.outbox)))
        for probe in probes:
            probe(fire)
        super().deliver(fire)


class AnswerDelivery(StepperDelivery):
    """Answers ``answer["value"]``; performs the default delivery first when
    ``answer["perform"]`` (to show that an invalid answer rolls the delivery back)."""

    def deliver(self, fire: Fire) -> Any:  # deliberately untyped: it returns bad answers
        calls.append(("answer", fire.timer.pk, id(fire.outbox)))
        if answer["perform"]:
            super().deliver(fire)
        return answer["value"]


class NotADelivery:
    """A class without ``deliver``: refused by the system check, snoozed at fire time."""


def not_a_class(fire: Fire) -> Snooze | None:
    return None


# What PolicyDelivery raises on each fire (an exception instance), or None to deliver.
raises: dict[str, BaseException | None] = {"value": None}


class PolicyDelivery(StepperDelivery):
    """The default delivery with a retry policy of its own: raises ``raises["value"]``."""

    retry_policy = RetryPolicy(
        max_attempts=4,
        initial_seconds=2,
        coefficient=3,
        maximum_seconds=10,
        non_retryable=(PermissionError,),
    )

    def deliver(self, fire: Fire) -> None:
        if raises["value"] is not None:
            raise raises["value"]
        super().deliver(fire)
