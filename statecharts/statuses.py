"""The execution statuses, and what each one means, defined once.

The stepper, the timer firers, the admin and the API all read this table; docs/
durable-executions.md shows it. For each status:

- **inputs**: what happens to an event (or a delivery) fed to it: ``apply`` it, ``refuse`` it
  (recorded in the history as refused; the caller gets the refusal), or ``discard`` it
  (recorded as discarded: the execution has finished, spec 6.2);
- **timers**: what a timer of it does at fire time: ``deliver``, ``snooze`` (stays pending, due
  again later, no attempt spent: the status may change back), or ``discard`` (settled, never
  delivered);
- **cancel**: whether cancelling it runs chart code: ``run_onexit`` (the position decodes, so
  every active state's ``<onexit>`` runs, as the spec's cancel does), ``without_chart_code``
  (the stored data cannot be stepped: it is cancelled as data, its timers discarded), or
  ``finished`` (nothing to cancel; the request is recorded as discarded);
- **actions**: what an operator can do about it, and where they see it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from django.db import models


class ExecutionStatus(models.TextChoices):
    ACTIVE = "active", "active"
    COMPLETED = "completed", "completed"
    FAILED = "failed", "failed"
    CANCELLED = "cancelled", "cancelled"
    HALTED = "halted", "halted"
    NEEDS_MIGRATION = "needs_migration", "needs migration"
    NEEDS_REPAIR = "needs_repair", "needs repair"


class InputRule(StrEnum):
    APPLY = "apply"
    REFUSE = "refuse"
    DISCARD = "discard"


class TimerRule(StrEnum):
    DELIVER = "deliver"
    SNOOZE = "snooze"
    DISCARD = "discard"


class CancelRule(StrEnum):
    RUN_ONEXIT = "run_onexit"
    RUN_ONEXIT_IF_DECODABLE = "run_onexit_if_decodable"
    WITHOUT_CHART_CODE = "without_chart_code"
    FINISHED = "finished"


class OperatorAction(StrEnum):
    CANCEL = "cancel"
    # move it to a chart version it maps onto (statecharts.operations.chart_migration)
    MIGRATE = "migrate"
    RETRY = "retry"  # step it again once what was wrong is repaired


@dataclass(frozen=True, slots=True)
class StatusRules:
    status: ExecutionStatus
    meaning: str
    inputs: InputRule
    timers: TimerRule
    cancel: CancelRule
    actions: frozenset[OperatorAction]
    shown: str  # where an operator sees it

    @property
    def finished(self) -> bool:
        return self.inputs is InputRule.DISCARD


_SHOWN = "the admin's execution list and page, the API's execution detail, `statechart show`"

TABLE: dict[ExecutionStatus, StatusRules] = {
    rules.status: rules
    for rules in (
        StatusRules(
            ExecutionStatus.ACTIVE,
            "running",
            InputRule.APPLY,
            TimerRule.DELIVER,
            CancelRule.RUN_ONEXIT,
            frozenset({OperatorAction.CANCEL}),
            _SHOWN,
        ),
        StatusRules(
            ExecutionStatus.HALTED,
            "a step went over a budget (rounds, time, <foreach>, effects, log, delayed sends, "
            "position size) and was rolled back: the last committed configuration is kept. "
            "Inputs are refused (feeding them would re-run the runaway); failure_reason says "
            "which budget",
            InputRule.REFUSE,
            TimerRule.SNOOZE,
            CancelRule.RUN_ONEXIT,
            frozenset({OperatorAction.CANCEL, OperatorAction.MIGRATE}),
            _SHOWN,
        ),
        StatusRules(
            ExecutionStatus.NEEDS_MIGRATION,
            "its position does not belong to its chart's current source (a source edited in "
            "place, or damage)",
            InputRule.REFUSE,
            TimerRule.SNOOZE,
            CancelRule.RUN_ONEXIT_IF_DECODABLE,
            frozenset({OperatorAction.CANCEL, OperatorAction.MIGRATE}),
            _SHOWN,
        ),
        StatusRules(
            ExecutionStatus.NEEDS_REPAIR,
            "its stored data cannot be stepped (a position or datamodel that cannot be read "
            "back, or its chart's stored source that no longer compiles); failure_reason says "
            "why",
            InputRule.REFUSE,
            TimerRule.SNOOZE,
            CancelRule.WITHOUT_CHART_CODE,
            frozenset({OperatorAction.CANCEL, OperatorAction.RETRY}),
            _SHOWN,
        ),
        StatusRules(
            ExecutionStatus.COMPLETED,
            "reached a top-level <final>; donedata holds its <donedata>",
            InputRule.DISCARD,
            TimerRule.DISCARD,
            CancelRule.FINISHED,
            frozenset(),
            _SHOWN,
        ),
        StatusRules(
            ExecutionStatus.FAILED,
            "stopped for good: its datamodel could no longer be saved; failure_reason says why",
            InputRule.DISCARD,
            TimerRule.DISCARD,
            CancelRule.FINISHED,
            frozenset(),
            _SHOWN,
        ),
        StatusRules(
            ExecutionStatus.CANCELLED,
            "cancelled from outside",
            InputRule.DISCARD,
            TimerRule.DISCARD,
            CancelRule.FINISHED,
            frozenset(),
            _SHOWN,
        ),
    )
}

assert set(TABLE) == set(ExecutionStatus), "every status has its rules"


def rules(status: str) -> StatusRules:
    """The rules of ``status``; an unknown value (a damaged row) is treated as needing repair."""
    try:
        return TABLE[ExecutionStatus(status)]
    except ValueError:
        return TABLE[ExecutionStatus.NEEDS_REPAIR]


TERMINAL_STATUSES = frozenset(s for s, r in TABLE.items() if r.finished)
LIVE_STATUSES = frozenset(s for s, r in TABLE.items() if r.inputs is InputRule.APPLY)
