"""Errors the Django layer raises on purpose (the core's are in statecharts.core.errors)."""

from __future__ import annotations

from statecharts.core.errors import StatechartError


class StepRefused(StatechartError):
    """The stepper would not apply an input; nothing about the execution changed except the
    history row recording the refusal (and, for a chart mismatch, the status)."""


class NeedsMigration(StepRefused):
    """The execution's position does not belong to its chart's current source: a person has
    to migrate it. Its status is ``needs_migration`` and inputs are refused until then."""


class Halted(StepRefused):
    """The execution is halted: a step went over a budget and was rolled back. Inputs are
    refused until it is cancelled (or migrated); ``failure_reason`` says which budget."""


class NeedsRepair(StepRefused):
    """The execution's stored data cannot be stepped (a position or datamodel that cannot be
    read back). Inputs are refused until someone repairs it or cancels it."""


class StartRefused(StepRefused):
    """A start that could not produce a first configuration within the step budgets: nothing
    was written."""


class IdempotencyConflict(StepRefused):
    """An input arrived again with the idempotency key of an earlier one, but with different
    content: nothing was applied (a client bug, or a key reused for another request)."""
