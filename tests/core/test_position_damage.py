"""Damaged positions are refused with a typed PositionError before anything runs: every
index the interpreter would look up is checked against the chart, nesting and size are
bounded without recursion, and a datamodel snapshot the engine cannot restore is refused
when a step would rebuild it (not as an engine error, and not again and again)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from statecharts.core import Event, Interpreter, State, load_chart
from statecharts.core.datamodel.base import MAX_VALUE_DEPTH
from statecharts.core.position import (
    MAX_POSITION_DEPTH,
    DamagedDatamodelError,
    NotAPositionError,
    PositionError,
    decode,
    encode,
)

NS = "http://www.w3.org/2005/07/scxml"

CHART = load_chart(f"""<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript" initial="outer">
  <datamodel><data id="n" expr="0"/></datamodel>
  <state id="outer" initial="a">
    <history id="h" type="deep"><transition target="a"/></history>
    <state id="a">
      <invoke id="child"><content><scxml xmlns="{NS}" version="1.0"><state id="x"/></scxml>
      </content></invoke>
      <transition event="go" target="b"/>
    </state>
    <state id="b"><transition event="back" target="a"/></state>
    <transition event="out" target="away"/>
  </state>
  <state id="away"><transition event="in" target="h"/></state>
</scxml>""")


def started() -> State:
    interpreter = Interpreter(CHART)
    step = interpreter.initialize("s")
    step = interpreter.handle_event(step.state, Event("go"))
    step = interpreter.handle_event(step.state, Event("out"))  # history remembers b
    return step.state


def payload() -> dict[str, Any]:
    result: dict[str, Any] = json.loads(encode(started(), CHART))
    return result


def with_state(**changes: Any) -> bytes:
    raw = payload()
    raw["state"].update(changes)
    return json.dumps(raw).encode()


def test_the_unaltered_blob_decodes_and_remembers_a_history() -> None:
    state = decode(encode(started(), CHART), chart=CHART).state
    assert state.history == {CHART.ids["h"]: (CHART.ids["b"],)}


@pytest.mark.parametrize(
    ("case", "changes", "reason"),
    [
        ("history value out of range", {"history": {"2": [999]}}, "remembers a state index"),
        ("history key out of range", {"history": {"999": [4]}}, "not a history state"),
        ("history key not a history state", {"history": {"3": [4]}}, "not a history state"),
        ("bound out of range", {"bound": [0, 999]}, "out of range"),
        ("invoke out of range", {"invocations": [["child", 3, 7, False, 1]]}, "out of range"),
        (
            "invocation in the wrong state",
            {"invocations": [["child", 4, 0, False, 1]]},
            "not in the state of its <invoke>",
        ),
    ],
)
def test_an_index_the_chart_does_not_have_is_refused(
    case: str, changes: dict[str, Any], reason: str
) -> None:
    blob = with_state(**changes)
    decode(blob)  # without the chart there is nothing to check the indexes against
    with pytest.raises(NotAPositionError, match=reason):
        decode(blob, chart=CHART)


@pytest.mark.parametrize(
    "event",
    [
        {"name": 5},
        {"name": "e", "type": "sideways"},
        {"name": "e", "sendid": 7},
        {"name": "e", "invokeid": ["x"]},
        "e",
    ],
    ids=["name not text", "unknown type", "sendid not text", "invokeid not text", "not a dict"],
)
def test_a_malformed_queued_event_is_refused(event: object) -> None:
    with pytest.raises(NotAPositionError, match="internal_queue"):
        decode(with_state(internal_queue=[event]))


def test_a_hundred_thousand_levels_deep_blob_is_refused_quickly_without_recursion() -> None:
    deep = b'{"format":"scxml-position","version":1,"state":' + b"[" * 100_000 + b"]" * 100_000
    started_at = time.perf_counter()
    with pytest.raises(NotAPositionError, match=f"nested more than {MAX_POSITION_DEPTH}"):
        decode(deep + b"}")
    assert time.perf_counter() - started_at < 5  # a bound, not a benchmark


def nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth - 1):
        value = [value]
    return value


def test_a_datamodel_as_deep_as_a_snapshot_may_be_decodes() -> None:
    raw = payload()
    raw["state"]["datamodel"]["n"] = nested(MAX_VALUE_DEPTH)
    state = decode(json.dumps(raw).encode(), chart=CHART).state
    assert json.loads(state.datamodel_json)["n"] == nested(MAX_VALUE_DEPTH)


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    raw = payload()
    raw["state"]["datamodel"]["n"] = "[{" * 10_000 + '\\"]' + "}]" * 10_000
    assert decode(json.dumps(raw).encode(), chart=CHART).state.datamodel["n"].startswith("[{")


def test_a_blob_over_the_size_bound_is_refused_before_parsing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    blob = encode(started(), CHART)
    monkeypatch.setattr("statecharts.core.position.MAX_POSITION_BYTES", len(blob) - 1)
    with pytest.raises(NotAPositionError, match="bytes, more than"):
        decode(blob)


def test_a_text_blob_that_is_not_unicode_is_refused() -> None:
    text = encode(started(), CHART).decode().replace('"s"', '"\udc80"', 1)
    with pytest.raises(NotAPositionError):
        decode(text)


def test_a_damaged_datamodel_is_a_position_error() -> None:
    assert issubclass(DamagedDatamodelError, PositionError)
