"""The accelerator (statecharts.core.accelerator) changes how fast, never what: every W3C
document, and the benchmark charts, produce the same effects with it off and on; the step
budgets hold with it off.

The durable side (tests/drivers/test_instruction_parity.py, tests/conformance) can be run
with it off for the whole process: ``STATECHARTS_ACCELERATOR=off pytest ...``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conformance.runner import MAX_VIRTUAL_MS, load_cases
from statecharts.core import Event, Interpreter, load_chart
from statecharts.core import accelerator as accelerator_module
from statecharts.core.budget import StepBudgets
from statecharts.core.interpreter import Step
from statecharts.drivers.memory import MemoryDriver, MemorySession

BENCHMARK_CHARTS = Path(__file__).resolve().parents[2] / "benchmarks" / "charts"

Effects = list[tuple[str, Any, ...]]


class RecordingDriver(MemoryDriver):
    """Every effect of every interpreter call, per session, in order."""

    def __init__(self) -> None:
        super().__init__(tracing=True)  # (the traces hold the configurations and guards)
        self.effects: dict[str, Effects] = {}

    def _apply(self, session: MemorySession, step: Step) -> None:
        self.effects.setdefault(session.session_id, []).extend(
            (str(e.kind), repr(e.data), e.macrostep, e.microstep, e.round) for e in step.effects
        )
        super()._apply(session, step)


def run_document(path: Path, accelerated: bool, monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.setattr(accelerator_module, "ENABLED", accelerated)
    driver = RecordingDriver()
    session = driver.start(driver.load_file(path), session_id="w3c")
    assert all(
        s.interpreter.accelerator.enabled is accelerated for s in driver.sessions.values()
    )
    while not session.done:
        due = driver.next_due_ms()
        if due is None or due > MAX_VIRTUAL_MS:
            break
        driver.advance(due - driver.now_ms)
    return {"effects": driver.effects, "final": session.final, "outcome": session.outcome}


@pytest.mark.conformance
def test_every_w3c_document_has_the_same_effects_with_the_accelerator_off(
    w3c_suite: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cases, _ = load_cases(w3c_suite)
    assert len(cases) >= 181
    differences = []
    passed = 0
    for case in cases:
        on = run_document(case.path, True, monkeypatch)
        off = run_document(case.path, False, monkeypatch)
        passed += on["final"] == "pass"
        if on != off:
            differences.append(case.test_id)
    assert differences == []
    assert passed >= 160  # (the documents ran: the mandatory ones pass)


@pytest.mark.parametrize(
    ("chart", "names"),
    [
        ("nested_parallel.scxml", ["go", "next", "split", "tick", "tock", "reset"]),
        ("datamodel_ecmascript.scxml", ["produce", "tick", "done", "tick", "audit", "stats"]),
    ],
)
def test_the_benchmark_charts_step_the_same_with_the_accelerator_off(
    chart: str, names: list[str]
) -> None:
    compiled = load_chart((BENCHMARK_CHARTS / chart).read_text())
    runs = []
    for accelerated in (True, False):
        interpreter = Interpreter(compiled, tracing=True, accelerated=accelerated)
        assert interpreter.accelerator.enabled is accelerated
        step = interpreter.initialize("s")
        seen = [(step.state.to_dict(), repr(step.effects))]
        for i in range(60):
            step = interpreter.handle_event(step.state, Event(names[i % len(names)]))
            seen.append((step.state.to_dict(), repr(step.effects)))
        runs.append(seen)
    assert runs[0] == runs[1]
    assert len({repr(state) for state, _ in runs[0]}) > 3  # (the chart moved)


RUNAWAY = """<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="null"
    initial="a"><state id="a"><onentry><raise event="again"/></onentry>
    <transition event="again" target="a"/></state></scxml>"""


@pytest.mark.parametrize("accelerated", [True, False])
def test_the_step_budgets_hold_with_the_accelerator_off_or_on(accelerated: bool) -> None:
    interpreter = Interpreter(
        load_chart(RUNAWAY), budgets=StepBudgets(rounds=50), accelerated=accelerated
    )
    step = interpreter.initialize("s")
    assert [e.kind for e in step.effects] == ["budget_exhausted"]
    assert step.effects[0].data["budget"] == "rounds"


def test_the_environment_turns_the_accelerator_off(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = load_chart(RUNAWAY)
    monkeypatch.setattr(accelerator_module, "ENABLED", False)
    assert Interpreter(compiled).accelerator.enabled is False
    assert Interpreter(compiled, accelerated=True).accelerator.enabled is True
    monkeypatch.setattr(accelerator_module, "ENABLED", True)
    assert Interpreter(compiled).accelerator.enabled is True
