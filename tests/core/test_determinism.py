"""Determinism: the same chart and inputs give the same states and effects, and a state
reloaded from its JSON form (``State.from_dict(state.to_dict())``) has the same future as the
state the interpreter is still holding (the durable "restore from snapshot" path)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from statecharts.core import Chart, Event, Interpreter, State, Step, load_chart

NS = "http://www.w3.org/2005/07/scxml"

CHART = f"""<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript" name="det" initial="main">
  <datamodel>
    <data id="trail" expr="[]"/>
    <data id="sid" expr="null"/>
    <data id="items" expr="[3, 1, 2]"/>
    <data id="total" expr="0"/>
    <data id="text" expr="'h\\u00e9llo \\u2028 w\\u00f6rld \\u0001'"/>
    <data id="num" expr="0.1 + 0.2"/>
    <data id="big" expr="1e21"/>
  </datamodel>
  <script>
    function f(x) {{ return x + 1; }}
    var u;
    var n = NaN;
    var cyc = {{}}; cyc.self = cyc;
    var shared = {{k: 1}}; var pair = {{a: shared, b: shared}};
  </script>
  <parallel id="main">
    <state id="r1" initial="r1a">
      <state id="r1a">
        <onentry>
          <foreach array="items" item="it" index="i">
            <assign location="total" expr="total + it * (i + 1)"/>
          </foreach>
          <send event="tick" delay="1s" idlocation="sid"/>
        </onentry>
        <transition event="tick" target="r1b">
          <raise event="ticked"/>
          <script>trail.push('tick:' + _event.name + ':' + pair.a.k++);</script>
        </transition>
      </state>
      <state id="r1b">
        <transition event="again" target="r1a">
          <cancel sendidexpr="sid"/>
          <assign location="items" expr="items.concat([items.length])"/>
        </transition>
      </state>
    </state>
    <state id="r2" initial="r2a">
      <state id="r2a">
        <transition event="ticked" target="r2b"><log label="f" expr="f(total)"/></transition>
      </state>
      <state id="r2b">
        <onentry>
          <send event="later" delay="2s" id="fixed"><param name="n" expr="total"/></send>
        </onentry>
        <transition event="later" target="r2a">
          <assign location="trail"
                  expr="trail.concat([_event.data.n, typeof u, cyc.self === cyc])"/>
          <send event="soon" delay="10ms"/>
        </transition>
      </state>
    </state>
    <transition event="soon" cond="Number.isNaN(n)">
      <log label="soon" expr="trail.length"/>
    </transition>
    <transition event="error.*"><log label="error" expr="_event.name"/></transition>
  </parallel>
</scxml>"""

INPUTS = ["tick", "noise", "later", "soon", "again", "tick", "again", "tick", "later", "soon"]

History = list[tuple[dict[str, Any], list[dict[str, Any]]]]


def record(step: Step) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    return step.state.to_dict(), [e.to_dict() for e in step.effects]


def event_for(name: str, pending: dict[str, dict[str, Any]]) -> Event:
    """The event a driver would deliver: a pending delayed send's event, or a bare one."""
    if name in pending:
        return Event.from_dict(pending.pop(name))
    return Event(name)


def note_delayed(step: Step, pending: dict[str, dict[str, Any]]) -> None:
    for effect in step.effects:
        if effect.kind == "send_delayed":
            pending[effect.data["event"]["name"]] = effect.data["event"]


def run_all(interpreter: Interpreter, inputs: list[str]) -> History:
    pending: dict[str, dict[str, Any]] = {}
    step = interpreter.initialize("det-1")
    history = [record(step)]
    note_delayed(step, pending)
    for name in inputs:
        step = interpreter.handle_event(step.state, event_for(name, pending))
        note_delayed(step, pending)
        history.append(record(step))
    return history


def reload(state: State) -> State:
    return State.from_dict(json.loads(json.dumps(state.to_dict())))


# Ways to get an interpreter for a reloaded state.
def brand_new(chart: Chart, _original: Interpreter) -> Interpreter:
    return Interpreter(chart)


def used_elsewhere(chart: Chart, _original: Interpreter) -> Interpreter:
    interpreter = Interpreter(chart)
    interpreter.initialize("some-other-session")
    return interpreter


def same_interpreter(_chart: Chart, original: Interpreter) -> Interpreter:
    return original


RESTORERS: dict[str, Callable[[Chart, Interpreter], Interpreter]] = {
    "new interpreter": brand_new,
    "interpreter used for another session": used_elsewhere,
    "same interpreter, reloaded state": same_interpreter,
}


@pytest.fixture(scope="module")
def chart() -> Chart:
    return load_chart(CHART)


def test_two_fresh_interpreters_agree_exactly(chart: Chart) -> None:
    first = run_all(Interpreter(chart), INPUTS)
    second = run_all(Interpreter(chart), INPUTS)
    assert first == second
    # The run really exercised what it claims to.
    kinds = {effect["kind"] for _, effects in first for effect in effects}
    assert {"send_delayed", "cancel", "log", "datamodel_change"} <= kinds
    assert all(state["running"] for state, _ in first)
    final_state = first[-1][0]
    ticks = [e["send_id"] for _, effects in first for e in effects
             if e["kind"] == "send_delayed" and e["event"]["name"] == "tick"]
    assert len(ticks) == 3
    assert final_state["datamodel"]["sid"] == ticks[-1]  # idlocation holds the latest
    assert not any(e["kind"] == "log" and e["label"] == "error"
                   for _, effects in first for e in effects)


def test_a_reloaded_state_equals_the_original(chart: Chart) -> None:
    history = run_all(Interpreter(chart), INPUTS)
    for state_dict, _ in history:
        state = State.from_dict(json.loads(json.dumps(state_dict)))
        assert state.to_dict() == state_dict


@pytest.mark.parametrize("restorer", list(RESTORERS))
@pytest.mark.parametrize("cut", [0, 3, 6])
def test_restored_state_has_the_same_future(chart: Chart, restorer: str, cut: int) -> None:
    original = Interpreter(chart)
    expected = run_all(original, INPUTS)

    # Replay up to the cut with one interpreter, then continue from a reloaded state.
    interpreter = Interpreter(chart)
    pending: dict[str, dict[str, Any]] = {}
    step = interpreter.initialize("det-1")
    note_delayed(step, pending)
    for name in INPUTS[:cut]:
        step = interpreter.handle_event(step.state, event_for(name, pending))
        note_delayed(step, pending)
    restored = RESTORERS[restorer](chart, interpreter)
    state = reload(step.state)
    future = []
    for name in INPUTS[cut:]:
        step = restored.handle_event(state, event_for(name, pending))
        note_delayed(step, pending)
        future.append(record(step))
        state = reload(step.state)
    assert future == expected[cut + 1:]


def test_null_datamodel_chart_restores_into_a_new_interpreter() -> None:
    chart = load_chart(f"""<scxml xmlns="{NS}" version="1.0" initial="a">
  <state id="a"><transition event="go" target="b"><raise event="r"/></transition></state>
  <state id="b"><transition event="r" cond="In('b')" target="c"/></state>
  <state id="c"><onentry><send event="t" delay="5s"/></onentry></state>
</scxml>""")
    live = Interpreter(chart)
    first = live.initialize("n")
    expected = live.handle_event(first.state, Event("go"))
    restored = Interpreter(chart).handle_event(reload(first.state), Event("go"))
    assert record(restored) == record(expected)
    assert chart.states[restored.state.configuration[-1]].id == "c"


# ---- values that JSON cannot hold ----------------------------------------------------------

VALUES = f"""<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript" initial="s">
  <script>
    function f(x) {{ return x + 1; }}
    var u = undefined;
    var n = NaN;
    var inf = -Infinity;
    var a = {{}}; a.self = a;
    var shared = {{k: 1}}; var holder = {{p: shared, q: shared}};
    var list = [shared, 1, undefined, NaN];
    var d = new Date(5);
    var re = /a+b/gi;
    var m = new Map([["k", {{deep: [1, 2]}}]]);
    var st = new Set([1, "two"]);
    var big = 12345678901234567890n;
  </script>
  <state id="s">
    <transition event="check">
      <log label="f(1)" expr="f(1)"/>
      <log label="undefined" expr="typeof u === 'undefined' &amp;&amp; 'u' in globalThis"/>
      <log label="NaN" expr="Number.isNaN(n)"/>
      <log label="-Infinity" expr="inf === -Infinity"/>
      <log label="cycle" expr="a.self === a"/>
      <log label="shared" expr="holder.p === holder.q &amp;&amp; holder.p === shared"/>
      <log label="shared in array" expr="list[0] === shared &amp;&amp; list.length === 4"/>
      <log label="array holes" expr="list[2] === undefined &amp;&amp; Number.isNaN(list[3])"/>
      <log label="date" expr="d instanceof Date &amp;&amp; d.getTime() === 5"/>
      <log label="regexp"
           expr="re instanceof RegExp &amp;&amp; re.test('xaab') &amp;&amp; re.flags === 'gi'"/>
      <log label="map" expr="m instanceof Map &amp;&amp; m.get('k').deep[1] === 2"/>
      <log label="set" expr="st instanceof Set &amp;&amp; st.has('two') &amp;&amp; st.size === 2"/>
      <log label="bigint" expr="typeof big === 'bigint' &amp;&amp; big === 12345678901234567890n"/>
      <script>shared.k = 99;</script>
      <log label="mutation through one path" expr="holder.q.k === 99 &amp;&amp; list[0].k === 99"/>
    </transition>
    <transition event="error.execution">
      <log label="error" expr="_event.data.message"/>
    </transition>
  </state>
</scxml>"""

ALL_TRUE = ["undefined", "NaN", "-Infinity", "cycle", "shared", "shared in array",
            "array holes", "date", "regexp", "map", "set", "bigint",
            "mutation through one path"]


def logs(step: Step) -> dict[str | None, Any]:
    return {e.data["label"]: e.data["value"] for e in step.effects if e.kind == "log"}


def check_after_restore(source: str, restorer: str) -> tuple[Step, Step]:
    chart = load_chart(source)
    live = Interpreter(chart)
    start = live.initialize("values")
    restored_interpreter = RESTORERS[restorer](chart, live)
    restored = restored_interpreter.handle_event(reload(start.state), Event("check"))
    # The reference: the same event on the live, never-serialised state.
    reference = Interpreter(chart)
    expected = reference.handle_event(reference.initialize("values").state, Event("check"))
    return expected, restored


def test_tagged_encoding_of_non_json_values() -> None:
    state = Interpreter(load_chart(VALUES)).initialize("values").state
    dm = state.datamodel
    assert dm["f"] == {"$sc": "function", "source": "function f(x) { return x + 1; }"}
    assert dm["u"] == {"$sc": "undefined"}
    assert dm["n"] == {"$sc": "number", "v": "NaN"}
    assert dm["inf"] == {"$sc": "number", "v": "-Infinity"}
    assert dm["a"] == {"self": {"$sc": "ref", "path": ["a"]}}
    assert dm["holder"] == {"p": {"$sc": "ref", "path": ["shared"]},
                            "q": {"$sc": "ref", "path": ["shared"]}}
    assert dm["list"] == [{"$sc": "ref", "path": ["shared"]}, 1, {"$sc": "undefined"},
                          {"$sc": "number", "v": "NaN"}]
    assert dm["d"] == {"$sc": "date", "v": 5}
    assert dm["re"] == {"$sc": "regexp", "source": "a+b", "flags": "gi"}
    assert dm["m"] == {"$sc": "map", "v": [["k", {"deep": [1, 2]}]]}
    assert dm["st"] == {"$sc": "set", "v": [1, "two"]}
    assert dm["big"] == {"$sc": "bigint", "v": "12345678901234567890"}
    json.dumps(state.to_dict(), allow_nan=False)  # strict JSON, no NaN literals


@pytest.mark.parametrize("restorer", list(RESTORERS))
def test_non_json_values_survive_a_round_trip(restorer: str) -> None:
    expected, restored = check_after_restore(VALUES, restorer)
    assert logs(expected) == {"f(1)": 2, **dict.fromkeys(ALL_TRUE, True)}
    assert logs(restored) == logs(expected)
    assert record(restored) == record(expected)


EDGE = f"""<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript" initial="s">
  <script>{{script}}</script>
  <state id="s">
    <transition event="check"><log label="value" expr="{{expr}}"/></transition>
    <transition event="error.execution"><log label="error" expr="_event.data.message"/></transition>
  </state>
</scxml>"""

# (script, expression, value on the live engine, value after a restore): always the same
# now that the live engine holds what its snapshot restores (docs/embedding.md, "Datamodel
# values that are not JSON").
EDGES: dict[str, tuple[str, str, Any, Any]] = {
    "shared object inside a Set": (
        "var o = {k: 1}; var s = new Set([o]);", "s.has(o)", True, True),
    "shared object as a Map key": (
        "var o = {k: 1}; var m = new Map([[o, 'v']]);", "m.get(o)", "v", "v"),
    "cycle through a Map value": (
        "var m = new Map(); m.set('me', m);", "m.get('me') === m", True, True),
    "shared object inside an array and an object": (
        "var o = {k: 1}; var a = [o]; var b = {x: o};", "a[0] === b.x && a[0] === o",
        True, True),
    "negative zero keeps its sign": (
        "var z = -0;", "1 / z", float("-inf"), float("-inf")),
    "top-level let and const stay inside their script, live as after a restore": (
        "let counter = 5; const K = 2; var kept = 1;",
        "typeof counter + ' ' + typeof K + ' ' + typeof kept",
        "undefined undefined number", "undefined undefined number"),
}


@pytest.mark.parametrize("case", list(EDGES))
def test_edge_values_after_restore(case: str) -> None:
    # Restored into the same interpreter: this isolates the encoding from the question of
    # which interpreter object does the restoring (covered above).
    script, expr, live_value, restored_value = EDGES[case]
    source = EDGE.replace("{script}", script).replace("{expr}", expr.replace("&", "&amp;"))
    expected, restored = check_after_restore(source, "same interpreter, reloaded state")
    assert logs(expected) == {"value": live_value}
    assert logs(restored) == {"value": restored_value}
