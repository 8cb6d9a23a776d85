"""Step budgets: everything one step may use, so a runaway chart is bounded as a whole.

A chart can loop (an eventless transition whose guard never settles), iterate without end
(nested ``<foreach>``), or produce more than any host should store in one step (thousands of
effects, megabytes of ``<log>``). Each evaluation of an expression is already bounded by the
datamodel's own limits; these budgets bound the **step**:

========================  ======================================================  ===========
budget                    counts                                                  default
========================  ======================================================  ===========
``rounds``                rounds of the inner macrostep loop, per macrostep       10,000
``foreach_iterations``    ``<foreach>`` iterations, nested ones included           100,000
``effects``               effects emitted (each send, cancel, log, ...)            10,000
``log_bytes``             bytes of ``<log>`` labels and values                     1,000,000
``output_bytes``          bytes the effects carry as UTF-8 JSON (a send's event    2,000,000
                          data, an ``<invoke>``'s params, donedata, a log, an
                          error's message), counted as each effect is emitted
``time_ms``               wall-clock milliseconds for the whole step (only with   none
                          a host clock: ``Host.clock``)
``snapshot_*``            the datamodel snapshot that ends the step could not be   the
                          taken: ``snapshot_memory_bytes``,                        datamodel's
                          ``snapshot_value_depth``, ``snapshot_time_ms``           limits
========================  ======================================================  ===========

The output is counted as each effect is emitted, so a step that would carry too much stops
at the effect that passes the budget, before the next one is built (a loop of sends of a
large value never holds more than the budget and one value). A host that runs one step as
several calls (a durable step drains its self-sends one call each) passes what the earlier
calls carried (``Host.output_bytes_spent``; each :class:`~statecharts.core.interpreter.Step`
reports the running total), so the budget bounds the step as a whole.

The time budget is checked before each round's guards, before each ``<foreach>`` iteration,
before every evaluation of chart code (the datamodel's evaluation guard: ``<data>`` at start
and when bound late, scripts, assignments, guards, send attributes ...), every
``_WORK_PER_CHECK`` units of the interpreter's own work in a microstep (a wide
``<parallel>``'s conflict removal, exit and entry sets), and before the snapshot; a round
that runs no guard, the one that finds nothing left to do, reads no clock. The step stops at
the first check past the deadline. Near the deadline the datamodel's per-evaluation limit is
lowered to what is left, so one evaluation cannot outlast the step by its own limit (it is
cut short as ``error.execution`` and the next check finds the budget spent).

A snapshot the datamodel cannot take (a value past its memory cap or nesting bound) is not
chart code's failure: the step is over the snapshot's budget and rolled back like the others
(``detail`` in the effect's data says what the datamodel reported).

When one is exceeded the interpreter **rolls the step back**: the entry point returns the
state it was given, unchanged, and a single ``budget_exhausted`` effect naming the budget
(``{"budget", "limit", "used"}``). The core is still running and cancellable; a host
marks the session halted (the planner's ``halt``) and decides what comes next.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_ROUND_BUDGET = 10_000


@dataclass(frozen=True, slots=True)
class StepBudgets:
    rounds: int = DEFAULT_ROUND_BUDGET
    foreach_iterations: int = 100_000
    effects: int = 10_000
    log_bytes: int = 1_000_000
    output_bytes: int = 2_000_000
    time_ms: int | None = None


class BudgetExceeded(Exception):
    """Raised inside the interpreter when a step goes over a budget; never leaves it."""

    def __init__(self, budget: str, limit: int, used: int, detail: str | None = None) -> None:
        super().__init__(
            f"the step went over its {budget} budget ({detail or f'{used} > {limit}'})"
        )
        self.budget = budget
        self.limit = limit
        self.used = used
        self.detail = detail  # what happened, when "used" cannot say it (a snapshot's limits)

    def as_data(self) -> dict[str, object]:
        data: dict[str, object] = {"budget": self.budget, "limit": self.limit, "used": self.used}
        if self.detail is not None:
            data["detail"] = self.detail
        return data
