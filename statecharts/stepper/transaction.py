"""One step: every input to an execution is one database transaction.

The loop, for each input::

    with transaction.atomic(durable=True):
        lock the execution row (select_for_update)
        what does its status do with the input (statecharts.statuses)? apply it; refuse it
            (recorded); discard it (recorded: it has finished); a cancel is applied, with or
            without running chart code
        load the position blob (re-checking the chart identity)
        advance (statecharts.drivers.durable: the input, then self-sends, to quiescence),
            with the host's registered-types snapshot and reachability answers
        over a budget? roll the step back: keep the position, mark it halted, record why
        perform every instruction (statecharts.stepper.performing)
        persist the new position and append one history row (with the snapshot and answers)
    after commit (statecharts.stepper.delivery): deliver the outbox rows this step wrote

A crash anywhere before the commit leaves the previous committed state; a crash after it
leaves outbox rows that the sweeper (``statecharts.stepper.delivery.deliver_pending``)
delivers. **Each step writes only rows of its own execution** (its row, its history, its
outbox, rows owned by it such as its timers): anything that crosses to another execution
goes through the outbox and is applied in that execution's own step.

The statements of a step (the lock, the execution's UPDATE, the history INSERT) are compiled
once per process (``statecharts.stepper.sql``): the same SQL and the same field conversions as
the ORM calls they replace, without the ORM's per-call compiling. So a step does not send
Django's ``pre_save``/``post_save`` for the execution or its history rows (``start``'s INSERT
of the execution still does); receive ``statecharts.signals`` instead. Inside
``batched_writes`` (a batch of steps in one transaction: a chunk of timer fires) the
execution's UPDATE and the history INSERT of each step are held on PostgreSQL and sent with
the batch's others in one statement, before anything else runs in the transaction
(``statecharts.stepper.postgres.WriteBehind``); the entry has its id at once.

The step is split by concern, one module each: ``starting`` (a start: the execution's INSERT
and its first step), ``stepping`` (one input to an execution: ``feed_step``, ``step_locked``,
``perform_delivery``), ``cancelling`` (a cancel, with or without running chart code),
``applying`` (advance, the budgets, persist: the step proper; and the thread's position
cache), ``recording`` (the fields a step writes, and an input recorded as not applied:
discarded, refused, unsteppable). This module holds what they share: the phases a test can
stop a process at (``fault_hook``), ``StepResult``, and the locks (``lock``, ``lock_many``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from statecharts.core.effects import Effect
from statecharts.core.plan import Instruction
from statecharts.exceptions import BusinessKeyInUse
from statecharts.models import Execution, HistoryEntry
from statecharts.models.history import Disposition
from statecharts.stepper import observing, sql
from statecharts.stepper.performing import NoPerformer

# The history entry's reason for an event no transition took (applied: SCXML consumes it), and
# the start of a strict send's refusal of one (statecharts.exceptions.EventUnhandled).
UNHANDLED = "unhandled: no transition selected the event"

# Tests install a callable here to stop a real process at a phase of the step ("locked",
# "advanced", "before_commit", "committed") and kill it there. It is never set otherwise.
fault_hook: Callable[[str], None] | None = None


def phase(name: str) -> None:
    if fault_hook is not None:
        fault_hook(name)


@dataclass(frozen=True, slots=True)
class StepResult:
    execution: Execution
    entry: HistoryEntry
    effects: tuple[Effect, ...]
    # One instruction per effect, in order (the planner's): what the step asked for.
    instructions: tuple[Instruction, ...] = ()
    # True when the input repeated an earlier one's idempotency key: nothing was applied, and
    # ``entry`` is the earlier input's history entry (what it did then).
    repeated: bool = False

    @property
    def disposition(self) -> str:
        return self.entry.disposition

    @property
    def applied(self) -> bool:
        return self.entry.disposition == Disposition.APPLIED

    @property
    def handled(self) -> bool:
        """False when no transition was selected for the input's event: it was consumed
        (applied) or, strictly sent, refused (docs/durable-executions.md)."""
        entry = self.entry
        return not (entry.input.get("kind") == "event" and entry.reason.startswith(UNHANDLED))


def lock(pk: int) -> Execution:
    """Lock an execution row for the rest of the transaction (its chart is loaded too)."""
    if not observing.listening():
        return sql.lock_execution(pk)
    waited = time.perf_counter()
    execution = sql.lock_execution(pk)
    observing.lock_waited(time.perf_counter() - waited)
    return execution


def lock_many(pks: set[int]) -> dict[int, Execution]:
    """Lock several executions in ascending id order (the one order every batch follows)."""
    if not observing.listening():
        return sql.lock_executions(pks)
    waited = time.perf_counter()
    executions = sql.lock_executions(pks)
    observing.lock_waited(time.perf_counter() - waited)
    return executions


__all__ = [
    "UNHANDLED",
    "BusinessKeyInUse",
    "NoPerformer",
    "StepResult",
    "fault_hook",
    "lock",
    "lock_many",
    "phase",
]
