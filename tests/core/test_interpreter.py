"""Focused interpreter and memory-driver behaviours that the W3C suite does not pin down."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from statecharts.core import Chart, Event, Interpreter, NotRunningError, Step, load_chart
from statecharts.core.budget import StepBudgets
from statecharts.core.delays import parse_delay
from statecharts.core.host import Host
from statecharts.drivers.memory import MemoryDriver

NS = "http://www.w3.org/2005/07/scxml"


def effects(step: Step, kind: str | None = None) -> list[dict[str, Any]]:
    return [e.to_dict() for e in step.effects if kind is None or e.kind == kind]


def kinds(step: Step) -> list[str]:
    return [e.kind for e in step.effects]


def active(chart: Chart, step: Step) -> set[str]:
    return {chart.states[i].id for i in step.state.configuration if i != 0}


# ---- not running -------------------------------------------------------------------------

FINISHES = f"""<scxml xmlns="{NS}" version="1.0" initial="a">
  <state id="a"><transition event="go" target="end"/></state>
  <final id="end"/>
</scxml>"""


def test_handle_event_on_a_finished_state_raises_not_running() -> None:
    chart = load_chart(FINISHES)
    interpreter = Interpreter(chart)
    step = interpreter.handle_event(interpreter.initialize("s").state, Event("go"))
    assert not step.state.running
    assert step.state.outcome == "final"
    assert effects(step, "done") == [{
        "kind": "done", "macrostep": 2, "microstep": 1, "round": 0,
        "final": "end", "donedata": None, "donedata_error": False, "reason": "final",
    }]
    for call in (
        lambda: interpreter.handle_event(step.state, Event("go")),
        lambda: interpreter.deliver_internal(step.state, Event("go")),
        lambda: interpreter.cancel(step.state),
        lambda: Interpreter(chart).handle_event(step.state, Event("go")),
    ):
        with pytest.raises(NotRunningError, match="session s is no longer running"):
            call()


def test_chart_that_finishes_at_once_is_not_running_after_initialize() -> None:
    chart = load_chart(f'<scxml xmlns="{NS}" version="1.0"><final id="f"/></scxml>')
    step = Interpreter(chart).initialize("s")
    assert not step.state.running
    assert kinds(step) == ["done", "datamodel_init"]  # (the baseline: taken at the end)
    with pytest.raises(NotRunningError):
        Interpreter(chart).handle_event(step.state, Event("x"))


# ---- cancel --------------------------------------------------------------------------------

CANCELLABLE = f"""<scxml xmlns="{NS}" version="1.0" initial="p">
  <parallel id="p">
    <onexit><log label="exit p"/></onexit>
    <state id="a"><onexit><log label="exit a"/></onexit></state>
    <state id="b" initial="b1">
      <onexit><log label="exit b"/></onexit>
      <state id="b1"><onexit><log label="exit b1"/></onexit></state>
    </state>
  </parallel>
</scxml>"""


def test_cancel_runs_onexit_handlers_then_emits_done_cancelled() -> None:
    interpreter = Interpreter(load_chart(CANCELLABLE))
    step = interpreter.cancel(interpreter.initialize("s").state)
    assert [(e["label"], e["value"]) for e in effects(step, "log")] == [
        ("exit b1", None), ("exit b", None), ("exit a", None), ("exit p", None),
    ]
    assert kinds(step) == ["log", "log", "log", "log", "done"]
    done = effects(step, "done")[0]
    assert (done["reason"], done["final"], done["donedata"]) == ("cancelled", None, None)
    assert not step.state.running
    assert step.state.outcome == "cancelled"
    assert step.state.configuration == ()


def test_cancel_with_a_custom_reason() -> None:
    interpreter = Interpreter(load_chart(CANCELLABLE))
    step = interpreter.cancel(interpreter.initialize("s").state, reason="timeout")
    assert effects(step, "done")[0]["reason"] == "timeout"
    assert step.state.outcome == "timeout"


def test_memory_session_cancel() -> None:
    driver = MemoryDriver()
    session = driver.start(CANCELLABLE)
    session.cancel()
    assert [label for label, _ in session.logs] == ["exit b1", "exit b", "exit a", "exit p"]
    assert (session.done, session.outcome, session.running) == (True, "cancelled", False)
    with pytest.raises(NotRunningError):
        session.send("anything")


# ---- step budgets ---------------------------------------------------------------------------

LOOP = f"""<scxml xmlns="{NS}" version="1.0" initial="a">
  <state id="a"><transition target="b"/></state>
  <state id="b"><transition target="a"/></state>
</scxml>"""


def test_round_budget_stops_an_eventless_loop() -> None:
    step = Interpreter(load_chart(LOOP), round_budget=50).initialize("s")
    assert effects(step) == [{
        "kind": "budget_exhausted", "macrostep": 1, "microstep": 50, "round": 51,
        "budget": "rounds", "limit": 50, "used": 51,
    }]
    # A start that runs away has no earlier state to keep: it is stopped.
    assert not step.state.running
    assert step.state.outcome == "budget_exhausted"
    assert step.state.internal_queue == ()


RAISE_LOOP = f"""<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript" initial="a">
  <datamodel><data id="n" expr="0"/></datamodel>
  <state id="a">
    <onexit><log label="exit" expr="n"/></onexit>
    <transition event="go"><assign location="n" expr="n + 1"/><raise event="again"/></transition>
    <transition event="again"><raise event="again"/></transition>
    <transition event="fine" target="b"/>
  </state>
  <state id="b"/>
</scxml>"""


def test_a_step_over_budget_is_rolled_back_and_the_session_stays_cancellable() -> None:
    chart = load_chart(RAISE_LOOP)
    interpreter = Interpreter(chart, round_budget=50)
    first = interpreter.initialize("s")
    step = interpreter.handle_event(first.state, Event("go"))
    assert kinds(step) == ["budget_exhausted"]  # the step's own effects are all dropped
    assert effects(step)[0]["budget"] == "rounds" and effects(step)[0]["used"] == 51
    assert step.state is first.state  # nothing of the step is kept: n is still 0
    assert step.state.running and step.state.datamodel == {"n": 0}
    # The same interpreter carries on from that state exactly as a fresh one would.
    after = interpreter.handle_event(step.state, Event("fine"))
    fresh = Interpreter(chart).handle_event(first.state, Event("fine"))
    assert after.state.to_dict() == fresh.state.to_dict()
    cancelled = interpreter.cancel(step.state)
    assert [e.data["value"] for e in cancelled.effects if e.kind == "log"] == [0]


def test_round_budget_is_per_macrostep() -> None:
    # 30 rounds per event: under a budget of 50 however many events arrive.
    chart = load_chart(f"""<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript" initial="a">
  <datamodel><data id="n" expr="0"/></datamodel>
  <state id="a">
    <transition event="go"><assign location="n" expr="0"/><raise event="again"/></transition>
    <transition event="again" cond="n &lt; 29">
      <assign location="n" expr="n + 1"/><raise event="again"/>
    </transition>
  </state>
</scxml>""")
    interpreter = Interpreter(chart, round_budget=50)
    step = interpreter.initialize("s")
    for _ in range(3):
        step = interpreter.handle_event(step.state, Event("go"))
        assert step.state.running
        assert "budget_exhausted" not in kinds(step)


def test_memory_driver_halts_a_session_over_budget_and_can_cancel_it() -> None:
    driver = MemoryDriver(round_budget=50)
    session = driver.start(RAISE_LOOP)
    session.send("go")
    assert (session.running, session.done, session.outcome) == (False, False, "budget_exhausted")
    assert session.halted == {"budget": "rounds", "limit": 50, "used": 51}
    assert session.datamodel == {"n": 0}
    with pytest.raises(NotRunningError):
        session.send("fine")
    session.cancel()
    assert (session.done, session.outcome) == (True, "cancelled")
    assert session.logs == [("exit", 0)]


FOREACH_NEST = f"""<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript" initial="a">
  <datamodel><data id="xs" expr="[1,2,3,4,5,6,7,8,9,10]"/><data id="n" expr="0"/></datamodel>
  <state id="a">
    <transition event="go">
      <foreach array="xs" item="i"><foreach array="xs" item="j"><foreach array="xs" item="k">
        <assign location="n" expr="n + 1"/>
      </foreach></foreach></foreach>
    </transition>
  </state>
</scxml>"""


@pytest.mark.parametrize(
    ("budgets", "chart", "event", "budget"),
    [
        (StepBudgets(foreach_iterations=500), FOREACH_NEST, "go", "foreach_iterations"),
        (StepBudgets(effects=20), SPAM := f"""<scxml xmlns="{NS}" version="1.0"
            datamodel="ecmascript" initial="a">
          <datamodel><data id="xs" expr="[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21]"/>
          </datamodel>
          <state id="a"><transition event="go">
            <foreach array="xs" item="i"><log label="x" expr="i"/></foreach>
          </transition></state></scxml>""", "go", "effects"),
        (StepBudgets(log_bytes=30), SPAM, "go", "log_bytes"),
    ],
    ids=["foreach", "effects", "log bytes"],
)
def test_every_step_budget_rolls_the_step_back(
    budgets: StepBudgets, chart: str, event: str, budget: str
) -> None:
    compiled = load_chart(chart)
    interpreter = Interpreter(compiled, budgets=budgets)
    first = interpreter.initialize("s")
    step = interpreter.handle_event(first.state, Event(event))
    assert [(e["kind"], e["budget"], e["limit"]) for e in effects(step)] == [
        ("budget_exhausted", budget, getattr(budgets, budget))
    ]
    assert effects(step)[0]["used"] > getattr(budgets, budget)
    assert step.state is first.state
    # Under the default budgets the same step is fine.
    assert "budget_exhausted" not in kinds(Interpreter(compiled).handle_event(first.state,
                                                                               Event(event)))


def test_the_output_budget_stops_at_the_effect_that_passes_it() -> None:
    """A hundred sends of 3 KB each against a 10 KB output budget: the step is rolled back at
    the fourth send, before the fifth's value is built (counted as each effect is emitted,
    not after the step has built all 300 KB)."""
    chart = load_chart(f"""<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript" initial="a">
      <datamodel><data id="xs" expr="Array.from({{length: 100}}, (_, i) => i)"/>
        <data id="built" expr="0"/></datamodel>
      <state id="a"><transition event="go">
        <foreach array="xs" item="i">
          <assign location="built" expr="built + 1"/>
          <send event="out" target="#_parent"><content expr="'y'.repeat(3000)"/></send>
        </foreach>
      </transition></state></scxml>""")
    interpreter = Interpreter(chart, budgets=StepBudgets(output_bytes=10_000))
    first = interpreter.initialize("s", parent_session_id="p")
    step = interpreter.handle_event(first.state, Event("go"))
    [exhausted] = effects(step)
    assert (exhausted["kind"], exhausted["budget"], exhausted["limit"]) == (
        "budget_exhausted", "output_bytes", 10_000
    )
    assert 10_000 < exhausted["used"] < 13_000  # the fourth send's bytes, not the 100th's
    assert step.state is first.state
    # The same step under a budget it fits in sends all hundred.
    whole = Interpreter(chart, budgets=StepBudgets(output_bytes=400_000)).handle_event(
        first.state, Event("go")
    )
    assert kinds(whole).count("send") == 100


def test_the_time_budget_stops_at_the_first_check_after_the_deadline() -> None:
    """An injected step clock: each reading advances 0.1 s, so a 1 s budget trips on the
    reading after the tenth; the chart's eventless loop never settles on its own."""
    readings: list[float] = []

    def clock() -> float:
        readings.append(len(readings) * 0.1)
        return readings[-1]

    loop = load_chart(f"""<scxml xmlns="{NS}" version="1.0" initial="a">
      <state id="a"><transition event="go" target="b"/></state>
      <state id="b"><transition target="c"/></state>
      <state id="c"><transition target="b"/></state>
    </scxml>""")
    interpreter = Interpreter(loop, budgets=StepBudgets(time_ms=1_000))
    first = interpreter.initialize("s", host=Host(clock=clock))
    readings.clear()
    step = interpreter.handle_event(first.state, Event("go"), host=Host(clock=clock))
    assert effects(step)[0]["budget"] == "time_ms"
    assert len(readings) == 12  # the deadline read, ten in time, the one past it
    assert step.state is first.state
    # Without a clock there is no time budget (the rounds budget still bounds the loop).
    no_clock = Interpreter(loop, budgets=StepBudgets(time_ms=1_000)).handle_event(
        first.state, Event("go")
    )
    assert effects(no_clock)[0]["budget"] == "rounds"


PING_LOOP = f"""<scxml xmlns="{NS}" version="1.0" initial="a">
  <state id="a">
    <transition event="go"><raise event="ping"/></transition>
    <transition event="ping"><raise event="ping"/></transition>
    <transition event="settle"/>
  </state>
</scxml>"""


def test_the_time_budget_is_read_before_each_internal_events_guards() -> None:
    """Without eventless transitions, each round that dequeues an internal event reads the
    clock before that event's guards, so an internal-event loop that never settles is cut by
    the time budget; the round that only finds the queue empty runs no guard and reads no
    clock (a step that settles at once reads it three times: its start, before its event and
    before its snapshot)."""
    readings: list[float] = []

    def clock() -> float:
        readings.append(len(readings) * 0.1)
        return readings[-1]

    chart = load_chart(PING_LOOP)
    interpreter = Interpreter(chart, budgets=StepBudgets(time_ms=1_000))
    first = interpreter.initialize("s", host=Host(clock=clock))
    readings.clear()
    settled = interpreter.handle_event(first.state, Event("settle"), host=Host(clock=clock))
    assert "budget_exhausted" not in kinds(settled)
    assert len(readings) == 3
    readings.clear()
    step = interpreter.handle_event(settled.state, Event("go"), host=Host(clock=clock))
    assert effects(step)[0]["budget"] == "time_ms"
    assert len(readings) == 12  # the deadline read, ten in time, the one past it
    assert step.state is settled.state
    # Without a clock the rounds budget still bounds the same loop.
    no_clock = Interpreter(chart, budgets=StepBudgets(rounds=50, time_ms=1_000))
    step = no_clock.handle_event(no_clock.initialize("s").state, Event("go"))
    assert step.effects[0].data == {"budget": "rounds", "limit": 50, "used": 51}


def test_external_events_without_data_are_shared_per_name_and_bounded() -> None:
    """The driver's per-event path builds one (immutable) event per name without data; the
    names come from outside, so what is kept is bounded."""
    from statecharts.core import events

    assert events.external_event("a.b") is events.external_event("a.b")
    assert events.external_event("a.b") == Event("a.b")
    assert events.external_event("a.b").parts == ("a", "b")
    with_data = events.external_event("a.b", {"x": 1})
    assert with_data is not events.external_event("a.b", {"x": 1})
    assert with_data.data == {"x": 1}
    for i in range(3 * events._EXTERNAL_BY_NAME_SIZE):
        events.external_event(f"name.{i}")
    assert len(events._EXTERNAL_BY_NAME) <= events._EXTERNAL_BY_NAME_SIZE


# ---- delayed sends and cancel ------------------------------------------------------------

SENDS = f"""<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript" initial="a">
  <datamodel><data id="where" expr="null"/></datamodel>
  <state id="a">
    <onentry>
      <send event="later" delay="3d"/>
      <send id="mine" event="soon" delay="1.5s"/>
      <send event="other" delayexpr="'250ms'" idlocation="where"/>
      <send event="now"/>
    </onentry>
    <transition event="stop"><cancel sendid="mine"/><cancel sendidexpr="where"/></transition>
  </state>
</scxml>"""


def test_send_delayed_effects_carry_everything_a_timer_needs() -> None:
    step = Interpreter(load_chart(SENDS)).initialize("s")
    delayed = effects(step, "send_delayed")
    origin = {"origin": "#_scxml_s", "origintype": "http://www.w3.org/TR/scxml/#SCXMLEventProcessor",
              "type": "external", "data": None, "invokeid": None}
    assert [
        {k: v for k, v in e.items() if k not in ("macrostep", "microstep", "round")}
        for e in delayed
    ] == [
        {"kind": "send_delayed", "target": {"kind": "self", "session_id": "s"},
         "event": {"name": "later", "sendid": None, **origin},
         "send_id": "send_1", "send_ordinal": 1, "payload": None, "delay_ms": 259_200_000,
         "ordinal": 1,
         "content_index": 2,
         "owner": "onentry:a:0", "id_from_author": False},
        {"kind": "send_delayed", "target": {"kind": "self", "session_id": "s"},
         "event": {"name": "soon", "sendid": "mine", **origin},
         "send_id": "mine", "send_ordinal": 2, "payload": None, "delay_ms": 1500, "ordinal": 2,
         "content_index": 3,
         "owner": "onentry:a:0", "id_from_author": True},
        {"kind": "send_delayed", "target": {"kind": "self", "session_id": "s"},
         "event": {"name": "other", "sendid": "send_3", **origin},
         "send_id": "send_3", "send_ordinal": 3, "payload": None,
         "delay_ms": 250, "ordinal": 3, "content_index": 4,
         "owner": "onentry:a:0", "id_from_author": False},
    ]
    # The immediate send takes the next send number but no ordinal.
    assert [(e["send_id"], e["event"]["name"]) for e in effects(step, "send")] == [
        ("send_4", "now")
    ]
    assert step.state.datamodel == {"where": "send_3"}
    assert step.state.counters.send == 4
    assert step.state.counters.ordinal == 3


def test_cancel_effects_advance_the_ordinal() -> None:
    interpreter = Interpreter(load_chart(SENDS))
    first = interpreter.initialize("s")
    step = interpreter.handle_event(first.state, Event("stop"))
    assert [(e["send_id"], e["ordinal"]) for e in effects(step, "cancel")] == [
        ("mine", 4), ("send_3", 5)
    ]
    assert step.state.counters.ordinal == 5
    # A later delayed send continues from there.
    again = interpreter.handle_event(step.state, Event("stop"))
    assert [e["ordinal"] for e in effects(again, "cancel")] == [6, 7]


def test_send_ids_continue_across_macrosteps() -> None:
    chart = load_chart(f"""<scxml xmlns="{NS}" version="1.0" initial="a">
  <state id="a">
    <onentry><send event="t" delay="1s"/></onentry>
    <transition event="go" target="a"/>
  </state>
</scxml>""")
    interpreter = Interpreter(chart)
    step = interpreter.initialize("s")
    ids = [e["send_id"] for e in effects(step, "send_delayed")]
    for _ in range(2):
        step = interpreter.handle_event(step.state, Event("go"))
        ids += [e["send_id"] for e in effects(step, "send_delayed")]
    assert ids == ["send_1", "send_2", "send_3"]


def test_send_delayed_owner_names_the_block() -> None:
    chart = load_chart(f"""<scxml xmlns="{NS}" version="1.0" initial="a">
  <state id="a">
    <onexit><send event="x" delay="1s"/></onexit>
    <transition event="go" target="b"><send event="y" delay="2s"/></transition>
  </state>
  <state id="b"/>
</scxml>""")
    interpreter = Interpreter(chart)
    step = interpreter.handle_event(interpreter.initialize("s").state, Event("go"))
    assert [(e["owner"], e["delay_ms"]) for e in effects(step, "send_delayed")] == [
        ("onexit:a:0", 1000), ("transition:0", 2000)
    ]


@pytest.mark.parametrize(("text", "ms"), [
    ("3d", 259_200_000), ("2h", 7_200_000), ("5m", 300_000), ("5min", 300_000),
    ("1.5s", 1500), (".5s", 500), ("500ms", 500), ("0s", 0), (" 2s ", 2000),
])
def test_delays(text: str, ms: int) -> None:
    assert parse_delay(text) == ms


@pytest.mark.parametrize("text", ["", "5", "s", "-1s", "1e3ms", "1w", "1.2.3s", "5MS"])
def test_malformed_delays(text: str) -> None:
    assert parse_delay(text) is None


def test_malformed_delayexpr_becomes_error_execution() -> None:
    chart = load_chart(f"""<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript" initial="a">
  <state id="a">
    <onentry><send event="t" delayexpr="'soon'"/></onentry>
    <transition event="error.execution" target="failed"/>
  </state>
  <state id="failed"/>
</scxml>""")
    step = Interpreter(chart).initialize("s")
    assert "send_delayed" not in kinds(step)
    assert active(chart, step) == {"failed"}


# ---- tracing -------------------------------------------------------------------------------

TRACED = f"""<scxml xmlns="{NS}" version="1.0" initial="a">
  <state id="a">
    <transition event="go" target="b"><raise event="inner"/></transition>
  </state>
  <state id="b"><transition event="inner" target="c"/></state>
  <state id="c"/>
</scxml>"""


def test_tracing_on_emits_trace_effects() -> None:
    interpreter = Interpreter(load_chart(TRACED), tracing=True)
    first = interpreter.initialize("s")
    # (datamodel_init is not a trace effect: it is emitted with tracing off too)
    assert kinds(first) == ["trace.entry_set", "datamodel_init", "trace.macrostep_stable"]
    assert effects(first)[0]["states"] == ["a"]
    step = interpreter.handle_event(first.state, Event("go"))
    assert kinds(step) == [
        "trace.event_dequeued", "trace.transitions_selected", "trace.exit_set",
        "trace.internal_event_raised", "trace.entry_set", "trace.microstep_completed",
        "trace.event_dequeued", "trace.transitions_selected", "trace.exit_set",
        "trace.entry_set", "trace.microstep_completed",
        "trace.macrostep_stable",
    ]
    traced = effects(step)
    assert traced[0]["event"]["name"] == "go"
    assert traced[1]["transitions"] == [
        {"index": 0, "source": "a", "event": "go", "targets": ["b"]}
    ]
    assert (traced[2]["states"], traced[4]["states"]) == (["a"], ["b"])
    assert traced[3]["event"]["name"] == "inner"
    assert traced[5]["configuration"] == ["b"]
    assert traced[6]["event"]["name"] == "inner"
    assert traced[6]["event"]["type"] == "internal"
    assert traced[-1]["configuration"] == ["c"]


def test_tracing_off_emits_no_trace_effects() -> None:
    interpreter = Interpreter(load_chart(TRACED))
    first = interpreter.initialize("s")
    step = interpreter.handle_event(first.state, Event("go"))
    assert kinds(first) == ["datamodel_init"]
    assert kinds(step) == []
    assert step.state.running


def test_tracing_does_not_change_the_state() -> None:
    chart = load_chart(TRACED)
    plain_run = Interpreter(chart)
    traced_run = Interpreter(chart, tracing=True)
    a = plain_run.handle_event(plain_run.initialize("s").state, Event("go"))
    b = traced_run.handle_event(traced_run.initialize("s").state, Event("go"))
    assert a.state.to_dict() == b.state.to_dict()


# ---- the memory driver's virtual clock ---------------------------------------------------

TIMERS = f"""<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript" initial="s">
  <state id="s">
    <onentry>
      <send event="late" delay="2s"/>
      <send event="early" delay="500ms"/>
      <send event="tie1" delay="1s"/>
      <send event="tie2" delay="1s"/>
      <send event="gone" delay="1500ms" id="g"/>
    </onentry>
    <transition event="kill"><cancel sendid="g"/></transition>
    <transition event="early">
      <send event="chained" delay="100ms"/><log label="got" expr="_event.name"/>
    </transition>
    <transition event="*"><log label="got" expr="_event.name"/></transition>
  </state>
</scxml>"""


def test_memory_driver_fires_delayed_events_in_due_order() -> None:
    driver = MemoryDriver()
    session = driver.start(TIMERS)
    assert driver.next_due_ms() == 500
    assert [(t["due_ms"], t["event"]["name"]) for t in driver.pending_timers()] == [
        (500, "early"), (1000, "tie1"), (1000, "tie2"), (1500, "gone"), (2000, "late"),
    ]
    session.send("kill")
    assert [t["event"]["name"] for t in driver.pending_timers(session)] == [
        "early", "tie1", "tie2", "late",
    ]
    driver.advance(499)
    assert (driver.now_ms, session.logs, driver.next_due_ms()) == (499, [], 500)
    driver.advance(1)
    assert session.logs == [("got", "early")]
    # A send made while firing is timed from the firing moment (500 + 100).
    assert driver.next_due_ms() == 600
    driver.advance(10_000)
    assert [value for _, value in session.logs] == [
        "early", "chained", "tie1", "tie2", "late",
    ]
    assert driver.now_ms == 10_500
    assert driver.next_due_ms() is None
    assert driver.pending_timers() == []


def test_pending_timers_carry_the_send_delayed_data() -> None:
    driver = MemoryDriver(clock_ms=1_000)
    session = driver.start(TIMERS, session_id="timers")
    timer = driver.pending_timers(session)[0]
    assert timer["due_ms"] == 1_500
    assert timer["session_id"] == "timers"
    assert (timer["send_id"], timer["delay_ms"], timer["ordinal"]) == ("send_2", 500, 2)
    assert driver.pending_timers(driver.start(CANCELLABLE)) == []


def test_delayed_events_of_a_finished_session_are_discarded() -> None:
    driver = MemoryDriver()
    session = driver.start(f"""<scxml xmlns="{NS}" version="1.0" initial="a">
  <state id="a">
    <onentry><send event="tick" delay="1s"/></onentry>
    <transition event="stop" target="end"/>
    <transition event="tick" target="ticked"/>
  </state>
  <state id="ticked"/>
  <final id="end"/>
</scxml>""")
    session.send("stop")
    assert session.done and session.final == "end"
    driver.advance(5_000)
    assert session.final == "end"
    assert driver.next_due_ms() is None


def test_a_finished_sessions_delayed_sends_are_dropped() -> None:
    from statecharts.drivers.memory import MemoryDriver

    driver = MemoryDriver()
    session = driver.start(
        '<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0">'
        '<state id="a"><onentry><send event="later" delay="5s"/></onentry>'
        '<transition event="stop" target="end"/></state><final id="end"/></scxml>'
    )
    assert driver.next_due_ms() == 5000
    session.send("stop")
    assert session.done
    assert driver.pending_timers() == []
    assert driver.next_due_ms() is None


def test_load_file_names_the_file_in_errors(tmp_path) -> None:
    from statecharts.core import ChartError
    from statecharts.drivers.memory import MemoryDriver

    bad = tmp_path / "bad.scxml"
    bad.write_text('<scxml xmlns="http://www.w3.org/2005/07/scxml">\n'
                   '<state id="a"><transition target="zz"/></state></scxml>')
    try:
        MemoryDriver().load_file(bad)
    except ChartError as exc:
        assert f"{bad}: 2:15: transition target 'zz' does not exist" in str(exc)
    else:
        raise AssertionError("the chart was accepted")


# ---- one round at a time (a step debugger) ----------------------------------------------------

ROUNDS = f"""<scxml xmlns="{NS}" version="1.0" initial="b">
  <state id="b"><transition event="next" target="c"/></state>
  <state id="c"><transition target="d"/></state>
  <state id="d"/>
</scxml>"""


def test_microstep_once_takes_one_round_at_a_time() -> None:
    chart = load_chart(ROUNDS)
    interpreter = Interpreter(chart)
    started = interpreter.initialize("s").state
    # (a state a debugger holds mid-macrostep: an internal event still queued)
    pending = dataclasses.replace(started, internal_queue=(Event("next").to_dict(),))
    first, progressed = interpreter.microstep_once(pending)
    assert progressed and active(chart, first) == {"c"}  # the event only, not c's eventless
    assert first.state.internal_queue == ()
    second, progressed = interpreter.microstep_once(first.state)
    assert progressed and active(chart, second) == {"d"}
    third, progressed = interpreter.microstep_once(second.state)
    assert not progressed and active(chart, third) == {"d"}
