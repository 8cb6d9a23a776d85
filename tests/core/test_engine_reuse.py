"""An ECMAScript engine serves one session after another (a thread keeps the engines its
finished or set-aside sessions leave, instead of building one per restore): nothing one
session does reaches the next. Property: whatever a first session runs (statements that
store values, change the realm or try to leave marks anywhere an engine could keep them),
a second session on the reused engine gives exactly the steps it gives on a new engine."""

# ruff: noqa: E501 (the JavaScript snippets below read best one statement per line)
from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statecharts.core import DatamodelError, Event, Interpreter, Step, load_chart
from statecharts.core.datamodel import ecmascript
from statecharts.core.datamodel.ecmascript import EcmascriptDatamodel
from tests.core.test_live_equals_restored import STATEMENTS

NS = "http://www.w3.org/2005/07/scxml"

# Where a session could try to leave something for the next one.
MARKS = [
    "Math.max.secret = 'left';",
    "JSON.secret = 'left';",
    "Object.getPrototypeOf(function* () {}).secret = 'left';",
    "Array.prototype[Symbol.unscopables].secret = true;",
    "In.secret = 'left';",
    "Object.getOwnPropertyDescriptor(globalThis, '_event').get.secret = 'left';",
    "_ioprocessors.secret = 'left';",
    "Error.stackTraceLimit = 1; Error.prepareStackTrace = function () { return 'left'; };",
    "globalThis[Symbol.for('secret')] = 'left'; Symbol.for('left-' + _sessionid);",
    "Promise.resolve().then(function () { globalThis.late = 'left'; });",
    "var keep = (function () { return arguments.callee; })(); keep.secret = 'left';",
    "secretVar = 'left'; var secretDeclared = 'left'; function secretFunction() { return 'left'; }",
    "Object.defineProperty(globalThis, 'plainSecret', {value: 'left', writable: true, enumerable: true, configurable: true});",
]

PROBES = [
    "Math.max.secret", "JSON.secret", "Object.getPrototypeOf(function* () {}).secret",
    "Array.prototype[Symbol.unscopables].secret", "In.secret",
    "Object.getOwnPropertyDescriptor(globalThis, '_event').get.secret",
    "JSON.stringify(_ioprocessors)", "[_sessionid, _name]", "Error.stackTraceLimit",
    "(function () { try { null.x; } catch (e) { return String(e.stack).indexOf('left'); } })()",
    "globalThis[Symbol.for('secret')]", "Object.getOwnPropertySymbols(globalThis).length",
    "typeof late", "[typeof secretVar, typeof secretDeclared, typeof secretFunction, typeof plainSecret]",
    "Object.keys(globalThis).sort()", "Object.getOwnPropertyNames(globalThis).length",
    "typeof counter", "({}).polluted", "typeof pt", "typeof m",
]


def first_chart(statements: list[str]) -> str:
    scripts = "".join(f"<script><![CDATA[{s}]]></script>" for s in statements)
    return f"""<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript" name="first" initial="a">
  <datamodel><data id="counter" expr="7"/></datamodel>
  <state id="a"><onentry>{scripts}</onentry>
    <transition event="again"><log label="p" expr="(function () {{ try {{ arguments.callee.secret = 1; }} catch (e) {{}} return 1; }})()"/>{scripts}</transition>
  </state>
</scxml>"""


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace('"', "&quot;")


SECOND = load_chart(
    f"""<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript" name="second" initial="b">
  <datamodel><data id="mine" expr="1"/></datamodel>
  <state id="b">
    <transition event="look">{"".join(f'<log label="{i}" expr="{escape(p)}"/>' for i, p in enumerate(PROBES))}</transition>
    <transition event="error.execution"><log label="error" expr="_event.data.message"/></transition>
  </state>
</scxml>"""
)


def record(step: Step) -> str:
    return json.dumps([step.state.to_dict(), [e.to_dict() for e in step.effects]])


def second_session() -> list[str]:
    interpreter = Interpreter(SECOND)
    first = interpreter.initialize("second-session")
    return [record(first), record(interpreter.handle_event(first.state, Event("look")))]


def no_spare_engines() -> None:
    getattr(ecmascript._spare_engines, "by_limits", {}).clear()


def run_first_session(statements: list[str]) -> None:
    interpreter = Interpreter(load_chart(first_chart(statements)))
    step = interpreter.initialize("first-session")
    step = interpreter.handle_event(step.state, Event("again", data={"x": "left"}))
    interpreter.cancel(step.state)  # the session ends: its engine goes back to the thread


def test_a_finished_sessions_engine_serves_the_next_session() -> None:
    no_spare_engines()
    run_first_session([])
    spares = ecmascript._spare_engines.by_limits
    [[engine]] = spares.values()
    datamodel = EcmascriptDatamodel()
    assert datamodel.context is engine.context  # reused, not built again


def test_nothing_a_session_leaves_reaches_the_next_one() -> None:
    no_spare_engines()
    expected = second_session()
    no_spare_engines()
    run_first_session(MARKS + STATEMENTS)
    assert second_session() == expected
    logs = [e["value"] for e in json.loads(expected[1])[1] if e["kind"] == "log"]
    assert logs[:6] == [None] * 6 and logs[7] == ["second-session", "second"]


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(MARKS + STATEMENTS), max_size=8))
def test_a_second_session_on_a_reused_engine_steps_as_on_a_new_one(statements: list[str]) -> None:
    no_spare_engines()
    expected = second_session()
    no_spare_engines()
    run_first_session(statements)
    assert second_session() == expected


def test_a_closed_datamodel_cannot_be_used_again() -> None:
    datamodel = EcmascriptDatamodel()
    datamodel.bind_system("s", None, {}, lambda _id: False, list)
    datamodel.close()
    with pytest.raises(DatamodelError, match="closed"):
        datamodel.run_script(SECOND.expressions[0])
    with pytest.raises(DatamodelError, match="closed"):
        datamodel.restore("{}")
