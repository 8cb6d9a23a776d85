"""The two drivers plan the same instructions: they differ only in how they perform them.

Every W3C document the durable runner runs (``conformance.durable``) is run twice: in memory
(``MemoryDriver``, as ``conformance.runner`` does) and durably (rows, the outbox, timer rows
fired on a fake clock). For each execution, the instruction streams (kind, target kind, event
name, and what a schedule/cancel/log carries) must be identical, and every durable step must
be a run of consecutive interpreter calls of the memory driver (the memory driver steps once
per event; a durable step also drains the self-sends its input caused).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings

from conformance.durable import GAP, FakeClock, select
from conformance.durable import run_case as run_durably
from conformance.runner import MAX_VIRTUAL_MS, Case, find_suite
from statecharts.core.interpreter import Step
from statecharts.core.plan import Instruction
from statecharts.drivers.memory import MemoryDriver, MemorySession
from statecharts.models import Execution
from statecharts.signals import step_finished

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.conformance


def described(instruction: Instruction) -> tuple[Any, ...]:
    """What must be the same in both drivers (session ids differ between them)."""
    data = instruction.data
    return (
        instruction.kind.value,
        instruction.target.kind.value if instruction.target is not None else None,
        instruction.event.name if instruction.event is not None else None,
        data.get("send_id"),
        data.get("delay_ms"),
        data.get("label"),
        repr(data.get("value")),
    )


class RecordingDriver(MemoryDriver):
    """Records, per session in creation order, each interpreter call's instructions."""

    def __init__(self) -> None:
        super().__init__(on_instruction=self._record)
        self.calls: dict[str, list[list[tuple[Any, ...]]]] = defaultdict(list)
        self.order: list[str] = []

    def _apply(self, session: MemorySession, step: Step) -> None:
        if session.session_id not in self.calls:
            self.order.append(session.session_id)
        self.calls[session.session_id].append([])  # a new call begins
        super()._apply(session, step)

    def _record(self, session: MemorySession, instruction: Instruction) -> None:
        self.calls[session.session_id][-1].append(described(instruction))

    def streams(self) -> list[list[list[tuple[Any, ...]]]]:
        return [self.calls[session_id] for session_id in self.order]


def run_in_memory(case: Case) -> list[list[list[tuple[Any, ...]]]]:
    driver = RecordingDriver()
    session = driver.start(driver.load_file(case.path))
    while not session.done:
        due = driver.next_due_ms()
        if due is None or due > MAX_VIRTUAL_MS:
            break
        driver.advance(due - driver.now_ms)
    return driver.streams()


def flat(calls: list[list[tuple[Any, ...]]]) -> list[tuple[Any, ...]]:
    return [instruction for call in calls for instruction in call]


def is_grouping_of(steps: list[list[tuple[Any, ...]]], calls: list[list[tuple[Any, ...]]]) -> bool:
    """Whether each step is the concatenation of consecutive calls (empty calls aside)."""
    remaining = [call for call in calls if call]
    for step in steps:
        taken: list[tuple[Any, ...]] = []
        while remaining and len(taken) < len(step):
            taken.extend(remaining.pop(0))
        if taken != step:
            return False
    return not remaining


@pytest.mark.django_db(transaction=True)
def test_both_drivers_plan_the_same_instructions_for_every_document_run_durably() -> None:
    suite = find_suite(str(ROOT.parent / "shared" / "w3c"))
    selection = select(suite)
    assert len(selection.cases) >= 68  # the durable runner's whole subset
    steps: dict[str, list[list[tuple[Any, ...]]]] = defaultdict(list)
    order: list[str] = []

    def record(sender: Any, execution: Execution, instructions: Any, **kwargs: Any) -> None:
        if execution.session_id not in steps:
            order.append(execution.session_id)
        steps[execution.session_id].append([described(i) for i in instructions])

    configured: dict[str, Any] = dict(getattr(settings, "STATECHARTS", {}) or {})
    clock = FakeClock()
    differences: list[str] = []
    kinds: set[str] = set()
    step_finished.connect(record, dispatch_uid="parity-test")
    try:
        with override_settings(STATECHARTS={**configured, "CLOCK": clock}):
            for case, _category in selection.cases:
                steps.clear()
                order.clear()
                run_durably(case, clock)
                clock.advance_to(clock() + GAP)
                durable = [steps[session_id] for session_id in order]
                memory = run_in_memory(case)
                kinds.update(i[0] for s in durable for i in flat(s))
                if [flat(s) for s in durable] != [flat(c) for c in memory]:
                    differences.append(f"{case.test_id}: the instruction streams differ")
                elif not all(map(is_grouping_of, durable, memory)):
                    differences.append(f"{case.test_id}: a durable step is not whole calls")
    finally:
        step_finished.disconnect(dispatch_uid="parity-test")
    assert differences == []
    # (the streams were not empty: every kind these documents use was compared)
    assert kinds >= {"deliver_self", "schedule", "cancel_timers", "log", "finish", "observe"}


def test_the_comparison_would_see_a_difference() -> None:
    a = [[("deliver_self", "self", "x", None, None, None, "None")]]
    b = [[("deliver_session", "session", "x", None, None, None, "None")]]
    assert flat(a) != flat(b)
    assert is_grouping_of([[*a[0], *a[0]]], [a[0], a[0]])
    assert not is_grouping_of([a[0]], [[*a[0], *a[0]]])
