"""Chart code cannot break the ECMAScript engine's own machinery, and nothing it does raises
a Python exception out of the interpreter: the machinery is out of its reach, the realm is
locked down, what it throws becomes error.execution, values leave the engine exactly, and a
datamodel the engine cannot restore is refused as a damaged position, not an engine error."""

# ruff: noqa: E501 (JavaScript and SCXML snippets read best one statement per line)
from __future__ import annotations

import json
import time
from typing import Any

import pytest

from statecharts.core import Event, Interpreter, State, Step, load_chart
from statecharts.core.datamodel import Limits
from statecharts.core.datamodel.base import MAX_VALUE_DEPTH
from statecharts.core.datamodel.ecmascript import EcmascriptDatamodel
from statecharts.core.model import Data, Expr
from statecharts.core.position import DamagedDatamodelError, PositionError, decode, encode

NS = "http://www.w3.org/2005/07/scxml"
LIMITS = Limits(time_ms=100, memory_bytes=32 * 1024 * 1024)


def chart(script: str, *probes: str, on_go: str = "") -> str:
    logs = "".join(
        f'<log label="{i}" expr="{p.replace("&", "&amp;").replace("<", "&lt;").replace(chr(34), "&quot;")}"/>'
        for i, p in enumerate(probes)
    )
    return f"""<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript" initial="s">
  <datamodel><data id="x" expr="1"/></datamodel>
  <script><![CDATA[{script}]]></script>
  <state id="s">
    <transition event="go">{on_go}{logs}</transition>
    <transition event="error.execution"><log label="error" expr="_event.data.message"/></transition>
  </state>
</scxml>"""


def logs(step: Step) -> list[tuple[Any, Any]]:
    return [(e.data["label"], e.data["value"]) for e in step.effects if e.kind == "log"]


def reloaded(state: State) -> State:
    return State.from_dict(json.loads(json.dumps(state.to_dict())))


def run(source: str, *events: Event, limits: Limits = LIMITS) -> tuple[list[Step], list[Step]]:
    """The same events through a live engine and through one restored before every step."""
    loaded = load_chart(source)
    live, steps_live = Interpreter(loaded, limits=limits), []
    step = live.initialize("s")
    steps_live.append(step)
    state = step.state
    restored, stored = [step], reloaded(step.state)
    for event in events:
        step = live.handle_event(state, event)
        steps_live.append(step)
        state = step.state
        again = Interpreter(loaded, limits=limits).handle_event(stored, event)
        restored.append(again)
        stored = reloaded(again.state)
    for a, b in zip(steps_live, restored, strict=True):
        assert json.dumps([e.to_dict() for e in b.effects]) == json.dumps(
            [e.to_dict() for e in a.effects]
        )
    return steps_live, restored


# ---- the machinery is out of reach --------------------------------------------------------


def test_overriding_the_builtins_the_engine_uses_changes_nothing_it_does() -> None:
    script = """
        Array.prototype.join = function () { return 'hijacked'; };
        JSON.stringify = function () { return '{'; };
        JSON.parse = function () { return {}; };
        Object.keys = function () { return ['evil']; };
        Map.prototype.forEach = function () { throw new Error('no'); };
        String.prototype.indexOf = function () { return -1; };
        var data = {list: [1, 2], when: new Date(0), m: new Map([[1, 'one']])};
    """
    steps, _ = run(chart(script, "data", "[1, 2].join('-')", "typeof JSON.stringify"),
                   Event("go"))
    assert logs(steps[0]) == []
    assert logs(steps[1]) == [
        ("0", {"list": [1, 2], "when": 0, "m": {"$sc": "map", "v": [[1, "one"]]}}),
        ("1", "1-2"),
        ("2", "function"),
    ]
    assert steps[1].state.datamodel["data"]["m"] == {"$sc": "map", "v": [[1, "one"]]}


def test_the_engine_machinery_is_not_reachable_from_chart_code() -> None:
    steps, _ = run(chart(
        "var names = Object.getOwnPropertyNames(globalThis).filter(function (n) {"
        " return n.indexOf('_') === 0; });",
        "typeof __sc", "names",
    ), Event("go"))
    assert logs(steps[1]) == [
        ("0", "undefined"),
        ("1", ["_sessionid", "_name", "_ioprocessors", "_event", "_x"]),
    ]


@pytest.mark.parametrize(
    "attempt",
    [
        "Object.defineProperty(globalThis, '_event', {get: function () { return {name: 'fake'}; }});",
        "_event = {name: 'fake'};",
        "globalThis.__sc.setEvent('fake');",
        "Object.getOwnPropertyDescriptor(globalThis, '_event').get.call(null).name = 'fake';",
    ],
)
def test_the_event_cannot_be_spoofed(attempt: str) -> None:
    source = chart("", "_event.name", on_go=f"<script><![CDATA[{attempt}]]></script>")
    steps, _ = run(source, Event("go"))
    assert ("0", "go") in logs(steps[1]) or logs(steps[1])[-1][0] == "error"
    assert ("0", "fake") not in logs(steps[1])


def test_the_global_object_only_takes_plain_variables() -> None:
    attempts = {
        "getter": "Object.defineProperty(globalThis, 'a', {get: function () { return 1; }})",
        "read-only": "Object.defineProperty(globalThis, 'b', {value: 1})",
        "defineProperties": "Object.defineProperties(globalThis, {c: {value: 1}})",
        "__defineGetter__": "globalThis.__defineGetter__('d', function () { return 1; })",
        "freeze": "Object.freeze(globalThis)",
        "seal": "Object.seal(globalThis)",
        "preventExtensions": "Object.preventExtensions(globalThis)",
        "setPrototypeOf": "Object.setPrototypeOf(globalThis, null)",
        "proto accessor": "globalThis.__proto__ = {}",
    }
    script = "var outcomes = {};\n" + "\n".join(
        f"try {{ {code}; outcomes[{json.dumps(name)}] = 'done'; }} "
        f"catch (e) {{ outcomes[{json.dumps(name)}] = e.name; }}"
        for name, code in attempts.items()
    ) + "\nObject.defineProperty(globalThis, 'plain', {value: 7, writable: true, enumerable: true," \
        " configurable: true});"
    steps, _ = run(chart(script, "outcomes", "plain", "Reflect.defineProperty(globalThis, 'e', {value: 1})"),
                   Event("go"))
    assert logs(steps[1]) == [
        ("0", dict.fromkeys(attempts, "TypeError")),
        ("1", 7),
        ("2", False),
    ]


def test_builtins_are_frozen_and_builtin_globals_read_only() -> None:
    """Every object a chart can reach from the global object through properties and
    prototypes is frozen, and every built-in global is read-only. Built-in methods are the
    documented exception (functions without a prototype object, see docs/embedding.md): they
    are not frozen one by one, and the walk does not go through them."""
    walk = """
      var unfrozen = [];
      (function () {
        var seen = new Set(), stack = [];
        Reflect.ownKeys(globalThis).forEach(function (k) {
          if (k === 'x' || k === 'unfrozen') return;  // the chart's own variables
          var d = Object.getOwnPropertyDescriptor(globalThis, k);
          if (d.writable || d.configurable) unfrozen.push('global ' + String(k));
          stack.push([String(k), d.value], [String(k) + ' getter', d.get]);
        });
        var instances = [[][Symbol.iterator](), new Map()[Symbol.iterator](), (function* () {})(),
                         (async function* () {})(), [].values().map(function (v) { return v; })];
        instances.forEach(function (it, i) {
          stack.push(['instance ' + i, Object.getPrototypeOf(Object.getPrototypeOf(it))]);
        });
        while (stack.length) {
          var item = stack.pop(), path = item[0], o = item[1];
          if (o === null || (typeof o !== 'object' && typeof o !== 'function') || o === globalThis
              || seen.has(o)) continue;
          seen.add(o);
          var method = typeof o === 'function' && !Object.getOwnPropertyDescriptor(o, 'prototype');
          if (method) continue;
          if (!Object.isFrozen(o)) unfrozen.push(path);
          stack.push([path + '.__proto__', Object.getPrototypeOf(o)]);
          Reflect.ownKeys(o).forEach(function (k) {
            var d = Object.getOwnPropertyDescriptor(o, k);
            stack.push([path + '.' + String(k), d.value], [path + '.' + String(k) + ' get', d.get],
                       [path + '.' + String(k) + ' set', d.set]);
          });
        }
      })();
    """
    steps, _ = run(chart(walk, "unfrozen"), Event("go"))
    assert logs(steps[1]) == [("0", [])]


def test_assigning_over_an_inherited_builtin_property_defines_it_on_the_object() -> None:
    script = """
        function MyError(m) { this.message = m; this.name = 'MyError'; }
        MyError.prototype = Object.create(Error.prototype);
        MyError.prototype.constructor = MyError;
        var o = {}; o.toString = function () { return 'mine'; }; o.constructor = 'c';
        var copy = {}; ['constructor', 'valueOf', 'hasOwnProperty'].forEach(function (k) { copy[k] = k; });
        var e = new MyError('bad');
        var described = [String(e), e.name, e.message, String(o), o.constructor, copy.valueOf];
    """
    steps, _ = run(chart(script, "described", "({}).toString()"), Event("go"))
    assert logs(steps[1]) == [
        ("0", ["MyError: bad", "MyError", "bad", "mine", "c", "valueOf"]),
        ("1", "[object Object]"),
    ]


def test_a_throw_whose_conversion_never_returns_is_error_execution_within_the_limit() -> None:
    source = chart("", "(function () { throw {toString: function () { while (true) {} }}; })()")
    began = time.perf_counter()
    steps, _ = run(source, Event("go"))
    assert time.perf_counter() - began < 10  # it used to hang for ever
    assert logs(steps[1]) == [
        ("error", "expression '(function () { throw {toString: function () { while (true) {} "
                  "}}; })()': a value that is not an Error was thrown"),
    ]


def test_an_expression_that_closes_its_wrapper_is_refused_without_running() -> None:
    escape = "0); }), (globalThis.ran = 'yes'), (function () { return (0"
    source = chart("", escape, "typeof ran")
    steps, _ = run(source, Event("go"))
    assert logs(steps[1]) == [
        ("error", f"expression {escape!r}: not a single expression"),
    ]
    steps, _ = run(chart("", "typeof ran"), Event("go"))
    assert logs(steps[1]) == [("0", "undefined")]


# ---- values leave the engine exactly ----------------------------------------------------------


def test_nul_characters_survive_leaving_the_sandbox() -> None:
    source = chart("var s = 'a\\u0000b';", "s", "s.length", "_event.data.t + '!'",
                   on_go='<assign location="x" expr="\'c\\u0000d\'"/>')
    steps, _ = run(source, Event("go", data={"t": "e\x00f"}))
    assert logs(steps[1]) == [("0", "a\x00b"), ("1", 3), ("2", "e\x00f!")]
    assert steps[1].state.datamodel == {"x": "c\x00d", "s": "a\x00b"}


def test_lone_surrogates_leave_as_replacement_characters_live_and_restored() -> None:
    source = chart("var s = 'x\\ud800y';", "s", "s.length", "'\\udc00'")
    steps, restored = run(source, Event("go"), Event("go"))
    assert logs(steps[1]) == [("0", "x\ufffdy"), ("1", 3), ("2", "\ufffd")]
    assert logs(restored[2]) == logs(steps[2]) == logs(steps[1])
    encode(steps[2].state, load_chart(source))  # the position encodes (UTF-8)


def test_a_huge_xml_data_body_is_error_execution_not_an_engine_error() -> None:
    body = "".join(f"<i n='{k}'>{k}</i>" for k in range(50_000))
    source = f"""<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript" initial="s">
  <datamodel><data id="big">{body}</data></datamodel>
  <state id="s"><transition event="error.execution" target="t">
    <log label="error" expr="_event.data.message"/></transition></state>
  <state id="t"/>
</scxml>"""
    step = Interpreter(load_chart(source), limits=LIMITS).initialize("s")
    [(_label, message)] = logs(step)
    assert message.startswith("<data id='big'>: ") and "memory cap" in message
    assert step.state.running


def test_a_value_nesting_past_the_bound_rolls_the_step_back() -> None:
    """A value left in the datamodel nesting past the bound cannot be snapshotted. That is a
    step over a budget (the snapshot's), not a chart error: the step is rolled back with one
    ``budget_exhausted`` effect naming it, so a durable host halts the execution (its last
    committed configuration and timers kept) instead of ending it as failed. (It used to
    stop the session with outcome "datamodel_error", a terminal failure.) Here it is the
    start that cannot be kept: nothing of it remains."""
    source = chart(f"var deep = []; for (var i = 0; i < {MAX_VALUE_DEPTH + 5}; i++) deep = [deep];"
                   " var fine = 1;", "[deep]", "fine")
    steps = Interpreter(load_chart(source), limits=LIMITS).initialize("s")
    assert not steps.state.running and steps.state.outcome == "budget_exhausted"
    [exhausted] = [e.data for e in steps.effects]
    assert exhausted["budget"] == "snapshot_value_depth"
    assert exhausted["limit"] == MAX_VALUE_DEPTH and "nests more than" in exhausted["detail"]


def test_a_deep_value_read_in_an_expression_is_error_execution() -> None:
    source = chart("", f"(function () {{ var d = []; for (var i = 0; i < {MAX_VALUE_DEPTH + 5};"
                   " i++) d = [d]; return d; })()", "x")
    steps, _ = run(source, Event("go"))
    assert logs(steps[1])[0][0] == "error" and "nests more than" in logs(steps[1])[0][1]


# ---- the live engine holds what a restore gives ------------------------------------------------


def test_a_private_method_stored_in_a_variable_does_not_poison_later_steps() -> None:
    script = "class A { #m() { return 1; } static get() { return new A().#m; } } var m = A.get();"
    steps, restored = run(chart(script, "typeof m", "x"), Event("go"), Event("go"))
    assert steps[0].state.datamodel["m"] == {"$sc": "undefined"}
    assert logs(steps[2]) == logs(restored[2]) == [("0", "undefined"), ("1", 1)]


def test_implicit_calls_of_stored_functions_are_kept_in_the_state() -> None:
    script = "var counter = 0; var o = {valueOf: function () { counter += 1; return 1; }};"
    steps, restored = run(chart(script, "o + 1"), Event("go"), Event("go"))
    assert [s.state.datamodel["counter"] for s in steps] == [0, 1, 2]
    assert [s.state.datamodel["counter"] for s in restored] == [0, 1, 2]


def test_the_event_of_an_ended_step_is_not_seen_by_the_next() -> None:
    source = f"""<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript" initial="s">
  <state id="s">
    <transition event="go" target="t"/>
  </state>
  <state id="t">
    <onexit><log label="seen" expr="typeof _event === 'object' ? _event.name : 'no event'"/></onexit>
  </state>
</scxml>"""
    loaded = load_chart(source)
    live = Interpreter(loaded)
    state = live.handle_event(live.initialize("s").state, Event("go")).state
    assert logs(live.cancel(state)) == [("seen", "no event")]
    assert logs(Interpreter(loaded).cancel(reloaded(state))) == [("seen", "no event")]


def test_numbers_that_python_writes_differently_report_no_change_after_a_restore() -> None:
    """A host re-encodes the snapshot (Python writes 1e-05 where JavaScript writes 0.00001);
    a step that changes nothing reports no datamodel change, live or restored."""
    loaded = load_chart(chart("var small = [0.00001, 1e-7, 5e-324, 1e21, 1.5e300];",
                              "(function () { return small.length; })()"))
    live = Interpreter(loaded)
    state = live.initialize("s").state
    stored = decode(encode(state, loaded), chart=loaded).state
    assert stored.datamodel_json != state.datamodel_json  # the texts differ, the values do not
    steps = [live.handle_event(state, Event("go")),
             Interpreter(loaded).handle_event(stored, Event("go"))]
    assert [[e.kind for e in step.effects] for step in steps] == [["log"], ["log"]]


def test_negative_zero_assigned_is_kept_live_and_restored() -> None:
    steps, restored = run(chart("", "1 / x", on_go='<assign location="x" expr="-0"/>'),
                          Event("go"), Event("go"))
    assert steps[1].state.datamodel["x"] == {"$sc": "number", "v": "-0"}
    assert logs(steps[2]) == logs(restored[2]) == [("0", float("-inf"))]


# ---- a datamodel that cannot be restored is a damaged position -------------------------------


@pytest.mark.parametrize(
    "value",
    [
        {"$sc": "function", "source": "not javascript ("},
        {"$sc": "function", "source": "#m() { return 1; }"},
        {"$sc": "function", "source": 5},
        {"$sc": "no-such-tag"},
        {"$sc": "bigint", "v": "12x"},
        {"$sc": "ref", "path": ["nowhere"]},
        {"$sc": "map", "v": [[1]]},
        {"$sc": "xml", "v": "<a/>", "tree": {"children": 3}},
    ],
)
def test_a_datamodel_the_engine_cannot_restore_is_refused_as_damaged(value: Any) -> None:
    source = chart("", "x")
    loaded = load_chart(source)
    state = Interpreter(loaded).initialize("s").state
    raw = json.loads(encode(state, loaded))
    raw["state"]["datamodel"]["x"] = value
    damaged = decode(json.dumps(raw).encode(), chart=loaded).state
    interpreter = Interpreter(loaded)
    with pytest.raises(DamagedDatamodelError) as caught:
        interpreter.handle_event(damaged, Event("go"))
    assert isinstance(caught.value, PositionError)
    assert "cannot be restored" in str(caught.value)
    # Refused, not broken: the interpreter steps other states as before.
    assert logs(interpreter.handle_event(state, Event("go"))) == [("0", 1)]


def test_restoring_runs_no_chart_code() -> None:
    loaded = load_chart(chart("", "typeof ran"))
    state = Interpreter(loaded).initialize("s").state
    raw = json.loads(encode(state, loaded))
    raw["state"]["datamodel"]["f"] = {
        "$sc": "function", "source": "class { static { globalThis.ran = 1; } }"
    }
    damaged = decode(json.dumps(raw).encode(), chart=loaded).state
    with pytest.raises(DamagedDatamodelError):
        Interpreter(loaded).handle_event(damaged, Event("go"))


# ---- the per-step time budget's seam -----------------------------------------------------------


def test_the_evaluation_time_limit_can_be_lowered_for_the_rest_of_a_step() -> None:
    datamodel = EcmascriptDatamodel(Limits(time_ms=2000))
    datamodel.bind_system("s", None, {}, lambda _id: False, list)
    datamodel.declare(Data("n", Expr(0, "0", 1, 1)), bind=True)
    loop = Expr(1, "(function () { while (true) {} })()", 1, 1)
    datamodel.set_evaluation_time_limit(20)
    began = time.perf_counter()
    with pytest.raises(Exception, match="exceeded the 20 ms time limit"):
        datamodel.evaluate(loop)
    assert time.perf_counter() - began < 1.5
    datamodel.set_evaluation_time_limit(10_000)  # never above the per-evaluation limit
    assert datamodel._time_limit_ms == 2000


def test_near_the_step_deadline_one_evaluation_may_only_use_what_is_left() -> None:
    """The interpreter lowers the per-evaluation limit to what is left of the step's time
    budget (the host's clock, injected here): a guard that never returns is cut at the 20 ms
    left, not at the datamodel's own 2 s, and the next evaluation gets its full limit again."""
    from statecharts.core.budget import StepBudgets
    from statecharts.core.host import Host

    ns = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
    source = f"""<scxml {ns} initial="s">
      <datamodel><data id="why" expr="''"/></datamodel>
      <state id="s">
        <transition event="go" cond="(function () {{ while (true) {{}} }})()" target="never"/>
        <transition event="error.execution"><assign location="why" expr="_event.data.message"/>
        </transition>
      </state>
      <state id="never"/>
    </scxml>"""
    interpreter = Interpreter(
        load_chart(source), limits=Limits(time_ms=2000), budgets=StepBudgets(time_ms=5000)
    )
    state = interpreter.initialize("s").state  # no host clock: no time budget
    readings = iter([0.0])  # the step starts at 0.0; every later check sees 4.98 (20 ms left)
    step = interpreter.handle_event(
        state, Event("go"), host=Host(clock=lambda: next(readings, 4.98))
    )
    why = json.loads(step.state.datamodel_json)["why"]
    assert "exceeded the 20 ms time limit" in why, why
    # A new step: its own 5 s budget, and the evaluation its full limit again.
    interpreter.handle_event(step.state, Event("noop"), host=Host(clock=lambda: 9.0))
    assert interpreter.dm._time_limit_ms == 2000


@pytest.mark.parametrize("wrap", ["[d]", "{a: d}", "{'$sc': d}", "new Map([[1, d]])"])
def test_a_value_as_deep_as_the_bound_allows_is_written_and_read_back(wrap: str) -> None:
    """The snapshot writes only what a restore reads: the deepest value it writes (the bound
    counts JSON levels: a tag object or a Map entry takes more than one) decodes as a
    position and restores."""
    last = None
    for levels in range(1, MAX_VALUE_DEPTH + 2):
        source = chart(f"var d = 0; for (var i = 0; i < {levels}; i++) d = {wrap};", "typeof d")
        step = Interpreter(load_chart(source), limits=LIMITS).initialize("s")
        if not step.state.running:
            [exhausted] = [e.data for e in step.effects if e.kind == "budget_exhausted"]
            assert f"nests more than {MAX_VALUE_DEPTH} levels" in exhausted["detail"]
            break
        last = (load_chart(source), step.state)
    assert last is not None
    loaded, state = last
    stored = decode(encode(state, loaded), chart=loaded).state
    again = Interpreter(loaded, limits=LIMITS).handle_event(stored, Event("go"))
    assert logs(again) == [("0", "object")]
    assert again.state.datamodel_json == state.datamodel_json
