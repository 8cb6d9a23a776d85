"""The step's time budget reaches every evaluation and the interpreter's own loops: a step
of many evaluations in one round, a datamodel initialised at start or bound late, a
microstep over a wide ``<parallel>``, and the snapshot that ends the step all read the step
clock, so a step stops at the first check after its deadline (statecharts.core.budget).
Every test injects the clock (each reading advances it); nothing sleeps."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from statecharts.core import Event, Interpreter, Step, load_chart
from statecharts.core.budget import StepBudgets
from statecharts.core.datamodel import Limits
from statecharts.core.datamodel.base import MAX_VALUE_DEPTH
from statecharts.core.host import Host

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'


def ticking(step_s: float) -> tuple[list[float], Callable[[], float]]:
    """A step clock that advances ``step_s`` per reading, and the readings it gave."""
    readings: list[float] = []

    def clock() -> float:
        readings.append(len(readings) * step_s)
        return readings[-1]

    return readings, clock


def budget_effects(step: Step) -> list[dict[str, Any]]:
    return [e.data for e in step.effects if e.kind == "budget_exhausted"]


def test_many_evaluations_in_one_round_stop_at_the_first_check_after_the_deadline() -> None:
    """Forty onentry scripts in the state one event enters: each evaluation reads the clock
    first, so a 1 s budget with a clock advancing 0.1 s per reading stops the step after
    about ten of them, not after forty evaluations."""
    blocks = "".join('<onentry><script>n = n + 1</script></onentry>' for _ in range(40))
    chart = load_chart(f"""<scxml {NS} initial="a">
      <datamodel><data id="n" expr="0"/></datamodel>
      <state id="a"><transition event="go" target="b"/></state>
      <state id="b">{blocks}</state></scxml>""")
    interpreter = Interpreter(chart, budgets=StepBudgets(time_ms=1_000))
    first = interpreter.initialize("s")
    readings, clock = ticking(0.1)
    step = interpreter.handle_event(first.state, Event("go"), host=Host(clock=clock))
    [exhausted] = budget_effects(step)
    assert exhausted["budget"] == "time_ms" and exhausted["limit"] == 1_000
    assert step.state is first.state  # rolled back: n is still 0, still in a
    assert len(readings) == 12  # the deadline read, ten in time, the one past it
    # Without a budget the same step runs every script.
    free = Interpreter(chart).handle_event(first.state, Event("go"))
    assert free.state.datamodel["n"] == 40


def test_data_initialised_at_start_is_bounded_by_the_step_clock() -> None:
    datas = "".join(f'<data id="d{i}" expr="{i}"/>' for i in range(40))
    chart = load_chart(f'<scxml {NS} initial="a"><datamodel>{datas}</datamodel>'
                       '<state id="a"/></scxml>')
    readings, clock = ticking(0.1)
    step = Interpreter(chart, budgets=StepBudgets(time_ms=1_000)).initialize(
        "s", host=Host(clock=clock)
    )
    assert [e["budget"] for e in budget_effects(step)] == ["time_ms"]
    assert not step.state.running and step.state.outcome == "budget_exhausted"
    assert len(readings) == 12


def test_data_bound_late_is_bounded_by_the_step_clock() -> None:
    states = "".join(
        f'<state id="s{i}"><datamodel><data id="d{i}" expr="{i}"/></datamodel></state>'
        for i in range(40)
    )
    chart = load_chart(f"""<scxml {NS} initial="a" binding="late">
      <state id="a"><transition event="go" target="p"/></state>
      <parallel id="p">{states}</parallel></scxml>""")
    interpreter = Interpreter(chart, budgets=StepBudgets(time_ms=1_000))
    first = interpreter.initialize("s")
    readings, clock = ticking(0.1)
    step = interpreter.handle_event(first.state, Event("go"), host=Host(clock=clock))
    assert [e["budget"] for e in budget_effects(step)] == ["time_ms"]
    assert step.state is first.state
    assert len(readings) == 12


def test_near_the_deadline_an_evaluation_is_capped_at_what_is_left() -> None:
    """An evaluation that would loop forever is cut at what is left of the step (well under
    the datamodel's own 60 s limit here), and the next check finds the budget spent."""
    import time

    loop = "(function(){while(true){}})()"
    chart = load_chart(f"""<scxml {NS} initial="a">
      <state id="a"><transition event="go" target="b"/></state>
      <state id="b"><onentry><script>{loop}</script></onentry></state></scxml>""")
    interpreter = Interpreter(
        chart, budgets=StepBudgets(time_ms=200), limits=Limits(time_ms=60_000)
    )
    first = interpreter.initialize("s")
    started = time.monotonic()
    step = interpreter.handle_event(first.state, Event("go"), host=Host(clock=time.monotonic))
    # (the one coarse real-time check: 200 ms budget, 60 s per-evaluation limit)
    assert time.monotonic() - started < 30
    assert [e["budget"] for e in budget_effects(step)] == ["time_ms"]
    assert step.state is first.state


def test_a_microstep_over_a_wide_parallel_reads_the_clock_while_it_works() -> None:
    """A thousand regions all taking a transition on one event: the microstep's own loops
    (conflict removal, exit and entry sets) run no chart code, yet they read the step clock
    every few thousand units of work, so the step is cut and rolled back."""
    regions = "".join(
        f'<state id="r{i}"><state id="r{i}a"><transition event="go" target="r{i}b"/></state>'
        f'<state id="r{i}b"/></state>'
        for i in range(1_000)
    )
    chart = load_chart(f'<scxml {NS} initial="p"><parallel id="p">{regions}</parallel></scxml>')
    interpreter = Interpreter(chart, budgets=StepBudgets(time_ms=1_000))
    first = interpreter.initialize("s")
    readings, clock = ticking(0.1)
    step = interpreter.handle_event(first.state, Event("go"), host=Host(clock=clock))
    assert [e["budget"] for e in budget_effects(step)] == ["time_ms"]
    assert step.state is first.state
    assert len(readings) == 12
    # A small chart's step reads the clock a fixed number of times, whatever its loops do.
    small = load_chart(f"""<scxml {NS} initial="p"><parallel id="p">
      <state id="x"><state id="xa"><transition event="go" target="xb"/></state>
        <state id="xb"/></state>
      <state id="y"><state id="ya"><transition event="go" target="yb"/></state>
        <state id="yb"/></state></parallel></scxml>""")
    interpreter = Interpreter(small, budgets=StepBudgets(time_ms=1_000))
    first = interpreter.initialize("s")
    readings, clock = ticking(0.1)
    step = interpreter.handle_event(first.state, Event("go"), host=Host(clock=clock))
    assert not budget_effects(step)
    assert len(readings) == 3  # its start, before the event's guards, before the snapshot


def test_the_snapshot_counts_against_the_step_clock() -> None:
    """The snapshot that ends a step is taken only if the step is within its deadline (and
    under what is left of it): a step whose last evaluation ends past the deadline is cut
    there, as a recorded budget stop, not applied."""
    chart = load_chart(f"""<scxml {NS} initial="a">
      <datamodel><data id="n" expr="0"/></datamodel>
      <state id="a"><transition event="go"><assign location="n" expr="n + 1"/></transition>
      </state></scxml>""")
    interpreter = Interpreter(chart, budgets=StepBudgets(time_ms=250))
    first = interpreter.initialize("s")
    # readings: the start (0), before the event's guards (0.1), before the assign (0.2),
    # before the snapshot (0.3: past the 0.25 s deadline)
    readings, clock = ticking(0.1)
    step = interpreter.handle_event(first.state, Event("go"), host=Host(clock=clock))
    assert [e["budget"] for e in budget_effects(step)] == ["time_ms"]
    assert step.state is first.state and len(readings) == 4


def test_a_datamodel_the_snapshot_cannot_take_rolls_the_step_back() -> None:
    """A value nesting past the bound left in the datamodel: the step is over a budget (the
    snapshot's), not a chart error, so it is rolled back and the session keeps running."""
    chart = load_chart(f"""<scxml {NS} initial="a">
      <datamodel><data id="deep" expr="0"/></datamodel>
      <state id="a"><transition event="go"><script>
        var d = []; for (var i = 0; i &lt; {MAX_VALUE_DEPTH + 5}; i++) d = [d]; deep = d;
      </script></transition></state></scxml>""")
    interpreter = Interpreter(chart)
    first = interpreter.initialize("s")
    step = interpreter.handle_event(first.state, Event("go"))
    [exhausted] = budget_effects(step)
    assert exhausted["budget"] == "snapshot_value_depth"
    assert exhausted["limit"] == MAX_VALUE_DEPTH and "nests more than" in exhausted["detail"]
    assert step.state is first.state and step.state.running
