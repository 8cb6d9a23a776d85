"""The position blob (statecharts/core/position.py): what a durable host stores per execution.

Three things are checked: a blob reads back as exactly the state that was written (and is
small, deterministic, self-describing JSON); every kind of bad blob is refused with its own
typed error; and, as a property over random inputs on several charts, saving and loading
after every step gives exactly the same future as never saving at all.
"""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import event as note_statistic
from hypothesis import strategies as st

from statecharts.core import Chart, Event, Interpreter, State, Step, load_chart
from statecharts.core.plan import InstructionKind, delivery
from statecharts.core.position import (
    FORMAT,
    VERSION,
    ChartIdentity,
    ChartMismatchError,
    NotAPositionError,
    NotQuiescentError,
    NotRunningPositionError,
    Position,
    PositionError,
    UnsupportedVersionError,
    decode,
    encode,
)

NS = "http://www.w3.org/2005/07/scxml"

# ---- charts ---------------------------------------------------------------------------------

# A typical small business chart: a few ecmascript fields, guards, assigns, a delayed reminder.
ORDER = f"""<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript" name="order"
        initial="cart">
  <datamodel>
    <data id="items" expr="[]"/>
    <data id="total" expr="0"/>
    <data id="customer" expr="null"/>
    <data id="reminder" expr="null"/>
  </datamodel>
  <state id="cart">
    <onentry><send event="remind" delay="1h" idlocation="reminder"/></onentry>
    <transition event="add">
      <assign location="items" expr="items.concat([_event.data])"/>
      <assign location="total" expr="total + 1"/>
    </transition>
    <transition event="checkout" cond="items.length &gt; 0" target="paying">
      <assign location="customer" expr="'someone@example.org'"/>
      <cancel sendidexpr="reminder"/>
    </transition>
  </state>
  <state id="paying">
    <transition event="paid" target="shipped"/>
    <transition event="failed" target="cart"/>
  </state>
  <final id="shipped"/>
</scxml>"""

# Null datamodel: compound states, In() guards, <raise>, a nested final (done.state.*) and a
# top-level final.
NULL_CHART = f"""<scxml xmlns="{NS}" version="1.0" name="lamp" initial="off">
  <state id="off">
    <transition event="on" target="on"/>
    <transition event="quit" target="gone"/>
  </state>
  <state id="on" initial="dim">
    <state id="dim">
      <transition event="up" target="bright"><raise event="glow"/></transition>
      <transition event="down" cond="In('on')" target="off"/>
    </state>
    <state id="bright">
      <transition event="glow" cond="In('dim')" target="dim"/>
      <transition event="up" target="max"/>
      <transition event="down" target="dim"/>
    </state>
    <final id="max"/>
    <transition event="done.state.on" target="off"/>
    <transition event="off" target="off"/>
  </state>
  <final id="gone"/>
</scxml>"""

# Ecmascript: counters, assign, if/elseif/else, cond guards on the event data, raised internal
# events, eventless transitions, logs, the event data kept in the datamodel.
COUNTER_CHART = f"""<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript" name="counter"
        initial="main">
  <datamodel>
    <data id="n" expr="0"/>
    <data id="hits" expr="{{even: 0, odd: 0}}"/>
    <data id="last" expr="null"/>
    <data id="log" expr="[]"/>
  </datamodel>
  <state id="main" initial="idle">
  <state id="idle">
    <transition event="inc">
      <assign location="n" expr="n + 1"/>
      <assign location="last" expr="_event.data"/>
      <if cond="n % 2 === 0">
        <assign location="hits.even" expr="hits.even + 1"/>
        <raise event="evened"/>
      <elseif cond="n % 3 === 0"/>
        <raise event="tripled"/>
      <else/>
        <assign location="hits.odd" expr="hits.odd + 1"/>
      </if>
    </transition>
    <transition event="dec" cond="n &gt; 0">
      <assign location="n" expr="n - 1"/>
    </transition>
    <transition event="set" cond="typeof _event.data === 'number'">
      <assign location="n" expr="_event.data"/>
    </transition>
    <transition event="evened" cond="n &gt;= 4" target="busy">
      <log label="busy at" expr="n"/>
    </transition>
    <transition event="tripled">
      <script>log.push('tripled:' + n);</script>
    </transition>
    <transition event="stop" target="done"/>
  </state>
  <state id="busy">
    <onentry><raise event="entered"/></onentry>
    <transition event="entered"><script>log.push('entered');</script></transition>
    <transition event="inc" cond="n &gt;= 8" target="done"/>
    <transition event="inc"><assign location="n" expr="n + 2"/></transition>
    <transition event="reset" target="idle"><assign location="n" expr="0"/></transition>
    <transition cond="log.length &gt; 5" target="idle">
      <assign location="log" expr="[]"/>
    </transition>
  </state>
  <transition event="error.*"><script>log.push('error');</script></transition>
  </state>
  <final id="done"><donedata><param name="n" expr="n"/></donedata></final>
</scxml>"""

# Parallel regions with deep and shallow history, left and re-entered through the history.
HISTORY_CHART = f"""<scxml xmlns="{NS}" version="1.0" name="history" initial="work">
  <parallel id="work">
    <history id="work_h" type="deep"><transition target="left"/></history>
    <state id="left" initial="l1">
      <history id="left_h" type="shallow"><transition target="l1"/></history>
      <state id="l1"><transition event="a" target="l2"/></state>
      <state id="l2" initial="l2a">
        <state id="l2a"><transition event="b" target="l2b"/></state>
        <state id="l2b"><transition event="b" target="l2a"/></state>
        <transition event="a" target="l1"/>
      </state>
    </state>
    <state id="right" initial="r1">
      <history id="right_h" type="deep"><transition target="r1"/></history>
      <state id="r1"><transition event="c" target="r2"/></state>
      <state id="r2" initial="r2a">
        <state id="r2a"><transition event="d" target="r2b"/></state>
        <state id="r2b"><transition event="d" target="r2a"/></state>
        <transition event="c" target="r1"/>
      </state>
    </state>
    <transition event="pause" target="paused"/>
    <transition event="releft" target="left_h"/>
    <transition event="reright" target="right_h"/>
  </parallel>
  <state id="paused">
    <transition event="resume" target="work_h"/>
    <transition event="restart" target="work"/>
    <transition event="quit" target="end"/>
  </state>
  <final id="end"/>
</scxml>"""

# Delayed sends to self (and to #_internal), <cancel> by id and by expression, immediate
# sends: send ids, ordinals and the send counter advance on the way.
SEND_CHART = f"""<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript" name="timers"
        initial="waiting">
  <datamodel>
    <data id="sid" expr="null"/>
    <data id="ticks" expr="0"/>
    <data id="seen" expr="[]"/>
  </datamodel>
  <state id="waiting">
    <onentry>
      <send event="tick" delay="1s" idlocation="sid"/>
      <send event="timeout" delay="30s" id="deadline"/>
    </onentry>
    <transition event="tick">
      <assign location="ticks" expr="ticks + 1"/>
      <send event="tick" delayexpr="(ticks * 100) + 'ms'" idlocation="sid">
        <param name="k" expr="ticks"/>
      </send>
    </transition>
    <transition event="snooze">
      <cancel sendidexpr="sid"/>
      <send event="tick" delay="5s" idlocation="sid"/>
    </transition>
    <transition event="ping">
      <send event="pong"><content expr="ticks"/></send>
      <send event="inner" delay="10ms" target="#_internal"/>
    </transition>
    <transition event="inner"><script>seen.push('inner');</script></transition>
    <transition event="pong"><script>seen.push(_event.data);</script></transition>
    <transition event="hurry" target="working"><cancel sendid="deadline"/></transition>
    <transition event="timeout" target="late"/>
  </state>
  <state id="working">
    <onentry><send event="finish" delay="2s"/></onentry>
    <transition event="finish" cond="ticks &gt; 1" target="ok"/>
    <transition event="finish" target="waiting"/>
    <transition event="tick"><assign location="ticks" expr="ticks + 10"/></transition>
  </state>
  <final id="ok"/>
  <final id="late"/>
</scxml>"""

# chart source -> event names it reacts to (plus a name no chart knows).
CHARTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "null datamodel": (NULL_CHART, ("on", "off", "up", "down", "glow", "quit")),
    "ecmascript counters": (
        COUNTER_CHART, ("inc", "dec", "set", "evened", "tripled", "reset", "stop")),
    "parallel with history": (
        HISTORY_CHART, ("a", "b", "c", "d", "pause", "resume", "restart", "releft", "reright",
                        "quit")),
    "delayed sends and cancel": (
        SEND_CHART, ("tick", "snooze", "ping", "pong", "hurry", "finish", "timeout")),
    "order": (ORDER, ("add", "checkout", "paid", "failed", "remind")),
}
JUNK = "no.such.event"

_compiled: dict[str, Chart] = {}


def compiled(key: str) -> Chart:
    if key not in _compiled:
        _compiled[key] = load_chart(CHARTS[key][0])
    return _compiled[key]


def effects_of(step: Step) -> list[dict[str, Any]]:
    return [e.to_dict() for e in step.effects]


def reload(state: State, chart: Chart) -> State:
    return decode(encode(state, chart), chart=chart).state


def order_state() -> tuple[Chart, State]:
    """An order chart part-way through: a cart with two items and a pending reminder."""
    chart = compiled("order")
    interpreter = Interpreter(chart)
    step = interpreter.initialize("order-1")
    step = interpreter.handle_event(step.state, Event("add", data={"sku": "A-1", "qty": 2}))
    step = interpreter.handle_event(step.state, Event("add", data={"sku": "B-7", "qty": 1}))
    return chart, step.state


# ---- round trip -----------------------------------------------------------------------------


def test_round_trip_gives_the_same_state_and_identity() -> None:
    chart, state = order_state()
    identity = ChartIdentity(chart.source_hash, "order", "3")
    blob = encode(state, identity)
    assert isinstance(blob, bytes)

    position = decode(blob, chart=chart)
    assert isinstance(position, Position)
    assert position.state.to_dict() == state.to_dict()
    assert position.state == state
    assert position.chart == identity
    assert (position.chart.sha256, position.chart.name, position.chart.version) == (
        chart.source_hash, "order", "3")


def test_blob_is_self_describing_utf8_json() -> None:
    chart, state = order_state()
    payload = json.loads(encode(state, chart).decode("utf-8"))
    assert payload["format"] == FORMAT == "scxml-position"
    assert payload["version"] == VERSION == 3
    # Given a Chart rather than an identity, only the hash is recorded.
    assert payload["chart"] == {"sha256": chart.source_hash, "name": None, "version": None}
    # State.to_dict() without the fields that hold their default.
    written = payload["state"]
    assert written == {k: v for k, v in state.to_dict().items() if k in written}
    assert set(state.to_dict()) - set(written) == {
        "internal_queue", "history", "invocations", "parent_session_id", "invokeid", "outcome"}
    assert written["datamodel"]["total"] == 2


def test_version_3_leaves_defaults_out_and_writes_what_a_step_changes_last() -> None:
    """The fields a step changes come last (datamodel, configuration, counters: a database
    that logs an update as the bytes after what it shares with the old row logs only those);
    fields holding their default are not written, and read back as their default."""
    chart, state = order_state()
    blob = encode(state, chart)
    written = json.loads(blob)["state"]
    assert list(written)[-3:] == ["datamodel", "configuration", "counters"]
    assert "internal_queue" not in written and "invocations" not in written
    assert decode(blob, chart=chart).state == state
    assert len(blob) < len(encode(state, chart, version=2))
    # A field that does not hold its default is written, and read back.
    remembering = state.evolve(history={0: (1,)}, outcome="final", parent_session_id="p",
                               invokeid="i", io_processors={"basichttp": "http://x"})
    written = json.loads(encode(remembering, chart))["state"]
    assert (written["history"], written["outcome"], written["parent_session_id"],
            written["invokeid"], written["io_processors"]) == (
        {"0": [1]}, "final", "p", "i", {"basichttp": "http://x"})
    assert decode(encode(remembering, chart)).state == remembering
    # What has no default is still required: a version-3 blob without it is refused.
    for required in ("configuration", "counters", "datamodel", "bound", "running"):
        with pytest.raises(NotAPositionError, match=required):
            decode(blob_of(with_state(json.loads(blob), **{required: None})))


# A blob as releases before format version 3 wrote it (the many_executions benchmark's chart,
# after two steps), byte for byte.
VERSION_2_BLOB = (
    b'{"format":"scxml-position","version":2,"chart":{"sha256":"98c1bd50fb4dec601edd3d046fc7ef0'
    b'88bbf731db2e6f9f6c84dac0ec1d0f191","name":"bench_many","version":"1"},"state":{"session_'
    b'id":"e1abb9d8008e438c9881a913078386ea","name":"bench_many","configuration":[3],"internal_'
    b'queue":[],"history":{},"datamodel":{"count":1,"limit":1000000000},"invocations":[],"runni'
    b'ng":true,"bound":[0,1,2,3],"counters":[0,0,0,3,2,0,0],"parent_session_id":null,"invokeid"'
    b':null,"outcome":null}}'
)


def test_a_version_2_blob_decodes_and_encodes_back_to_the_same_bytes() -> None:
    """Rows written before version 3 still read, and ``encode(..., version=2)`` gives back
    their exact bytes (replay checks the history those releases recorded by its hash)."""
    sha256 = "98c1bd50fb4dec601edd3d046fc7ef088bbf731db2e6f9f6c84dac0ec1d0f191"
    position = decode(VERSION_2_BLOB, chart=sha256)
    state = position.state
    assert (state.session_id, state.configuration, state.datamodel, state.counters.macrostep) == (
        "e1abb9d8008e438c9881a913078386ea", (3,), {"count": 1, "limit": 1000000000}, 3)
    assert (state.history, state.invocations, state.internal_queue, state.running) == (
        {}, (), (), True)
    assert encode(state, position.chart, version=2) == VERSION_2_BLOB
    assert decode(encode(state, position.chart)).state == state
    with pytest.raises(UnsupportedVersionError):
        encode(state, position.chart, version=1)


def test_non_ascii_data_survives_and_stays_utf8() -> None:
    chart = compiled("ecmascript counters")
    interpreter = Interpreter(chart)
    state = interpreter.initialize("u").state
    state = interpreter.handle_event(state, Event("inc", data="h\u00e9llo \u2028 \U0001f600")).state
    blob = encode(state, chart)
    assert "h\u00e9llo \u2028 \U0001f600".encode() in blob  # written as UTF-8, not \u escapes
    assert decode(blob, chart=chart).state.datamodel["last"] == "h\u00e9llo \u2028 \U0001f600"
    # str and memoryview are accepted as well as bytes.
    assert decode(blob.decode(), chart=chart).state == state
    assert decode(memoryview(blob), chart=chart.source_hash).state == state


def test_encoding_is_deterministic() -> None:
    chart, state = order_state()
    _, same_run_again = order_state()
    blob = encode(state, chart)
    assert encode(state, chart) == blob
    assert encode(same_run_again, chart) == blob
    # A decoded state encodes back to the very same bytes.
    assert encode(decode(blob).state, chart) == blob


def test_a_typical_blob_is_small() -> None:
    chart, state = order_state()
    blob = encode(state, ChartIdentity(chart.source_hash, "order", "3"))
    assert 200 < len(blob) < 1024  # about 500 bytes today


# ---- refusals -------------------------------------------------------------------------------


def valid_payload() -> dict[str, Any]:
    chart, state = order_state()
    payload: dict[str, Any] = json.loads(encode(state, chart))
    return payload


def blob_of(payload: object) -> bytes:
    return json.dumps(payload).encode()


def without(payload: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in payload.items() if k != key}


def with_state(payload: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**payload, "state": {**payload["state"], **changes}}


def malformed_blobs() -> dict[str, bytes]:
    good = valid_payload()
    return {
        "garbage bytes": b"\x80\x81\xfe\xff not json at all",
        "empty": b"",
        "truncated blob": blob_of(good)[:-10],
        "JSON list": blob_of([FORMAT, 1]),
        "JSON without the marker": blob_of(without(good, "format")),
        "JSON with another marker": blob_of({**good, "format": "something-else"}),
        "a bare state dict": blob_of(good["state"]),
        "missing state": blob_of(without(good, "state")),
        "missing chart": blob_of(without(good, "chart")),
        "chart is not an object": blob_of({**good, "chart": "abc"}),
        "state is a list": blob_of({**good, "state": [1, 2, 3]}),
        "state missing configuration": blob_of(
            {**good, "state": without(good["state"], "configuration")}),
        "configuration is a number": blob_of(with_state(good, configuration=5)),
        "history keys not ints": blob_of(with_state(good, history={"x": [1]})),
        "invocation of the wrong arity": blob_of(with_state(good, invocations=[[1]])),
        "too many counters": blob_of(with_state(good, counters=list(range(20)))),
    }


def test_the_unaltered_payload_decodes() -> None:
    """The control for the refusals below: they refuse an alteration, not the base blob."""
    chart, state = order_state()
    assert decode(blob_of(valid_payload()), chart=chart, require_running=True).state == state


@pytest.mark.parametrize("case", list(malformed_blobs()))
def test_not_a_position_is_refused(case: str) -> None:
    with pytest.raises(NotAPositionError):
        decode(malformed_blobs()[case])


# Wrong-typed state fields that State.from_dict turns into a State without complaint. The
# module promises NotAPositionError for "a malformed state"; today these decode, and the
# interpreter then fails on them (TypeError) or carries the bad value on.
WRONG_TYPED_STATES: dict[str, dict[str, Any]] = {
    "counters is a string": {"counters": "many"},
    "counters are strings": {"counters": ["1", "2", "3", "4", "5", "6"]},
    "configuration is a string": {"configuration": "ab"},
    "bound holds strings": {"bound": ["x", "y"]},
    "running is a string": {"running": "yes"},
    "session_id is a number": {"session_id": 5},
    "datamodel is a list": {"datamodel": [1, 2]},
    "counters too short": {"counters": [1]},
    "history key not a state index": {"history": {"x": [1]}},
    "invocation malformed": {"invocations": [["id", "state", 0, False]]},
}


@pytest.mark.parametrize("case", list(WRONG_TYPED_STATES))
def test_a_state_with_wrong_types_is_refused(case: str) -> None:
    blob = blob_of(with_state(valid_payload(), **WRONG_TYPED_STATES[case]))
    with pytest.raises(NotAPositionError):
        decode(blob)


def test_a_state_index_outside_the_chart_is_refused_when_the_chart_is_given() -> None:
    order, _state = order_state()
    blob = blob_of(with_state(valid_payload(), configuration=[999]))
    decode(blob)  # without the chart there is nothing to check the index against
    with pytest.raises(NotAPositionError, match="out of range"):
        decode(blob, chart=order)


def test_a_version_1_blob_decodes_with_the_counters_version_2_added_at_zero() -> None:
    """Blobs written before version 2 (six counters, four fields per invocation) still decode:
    the invocation counter and each invocation's ordinal start at zero, every other field
    is read exactly as written."""
    chart = compiled("ecmascript counters")
    state = Interpreter(chart).initialize("old").state
    current = json.loads(encode(state, chart, version=2))  # (every field written)
    old = {**current, "version": 1,
           "state": {**current["state"], "counters": current["state"]["counters"][:6],
                     "invocations": [["inv", 1, 0, False]]}}
    position = decode(blob_of(old))
    assert position.state.counters == state.counters  # the seventh was zero, and stays so
    assert position.state.counters.invocation == 0
    assert [(i.invokeid, i.ordinal) for i in position.state.invocations] == [("inv", 0)]
    assert position.state.configuration == state.configuration
    # A version-2 blob with a version-1 shape is refused, not guessed at.
    with pytest.raises(NotAPositionError, match="counters"):
        decode(blob_of({**old, "version": 2}))


@pytest.mark.parametrize(
    "version", [4, 99, 0, -1, "1", 1.0, True, None],
    ids=["future", "far future", "zero", "negative", "string", "float", "boolean", "null"],
)
def test_unsupported_version_is_refused(version: object) -> None:
    payload = {**valid_payload(), "version": version}
    with pytest.raises(UnsupportedVersionError) as caught:
        decode(blob_of(payload))
    assert caught.value.version == version
    assert type(caught.value.version) is type(version)


def test_missing_version_is_refused() -> None:
    with pytest.raises(UnsupportedVersionError):
        decode(blob_of(without(valid_payload(), "version")))


def test_a_blob_for_another_chart_is_refused() -> None:
    order, state = order_state()
    other = compiled("null datamodel")
    blob = encode(state, order)
    with pytest.raises(ChartMismatchError) as caught:
        decode(blob, chart=other)
    assert caught.value.expected == other.source_hash
    assert caught.value.found == order.source_hash
    with pytest.raises(ChartMismatchError):
        decode(blob, chart=other.source_hash)
    # A different source of the "same" chart (one character changed) is another chart too.
    edited = load_chart(CHARTS["order"][0].replace('delay="1h"', 'delay="2h"'))
    assert edited.source_hash != order.source_hash
    with pytest.raises(ChartMismatchError):
        decode(blob, chart=edited)
    # Without a chart to check against, the blob reads (the host may look the chart up).
    assert decode(blob).chart.sha256 == order.source_hash
    assert decode(blob, chart=order).state == state


def test_a_state_caught_mid_macrostep_is_refused() -> None:
    chart, state = order_state()
    pending = state.evolve(internal_queue=(Event("glow", "internal").to_dict(),))
    assert not pending.quiescent
    # encode refuses it...
    with pytest.raises(NotQuiescentError):
        encode(pending, chart)
    # ...and so does decode, for a blob someone else wrote.
    payload = with_state(json.loads(encode(state, chart)),
                         internal_queue=[Event("glow", "internal").to_dict()])
    with pytest.raises(NotQuiescentError):
        decode(blob_of(payload), chart=chart)


def test_a_stopped_state_is_refused_only_when_it_must_run() -> None:
    chart = compiled("null datamodel")
    interpreter = Interpreter(chart)
    state = interpreter.handle_event(interpreter.initialize("lamp").state, Event("quit")).state
    assert not state.running
    assert state.outcome == "final"
    blob = encode(state, chart)
    with pytest.raises(NotRunningPositionError):
        decode(blob, chart=chart, require_running=True)
    assert decode(blob, chart=chart).state == state

    # A cancelled execution is not running either.
    cancelled = interpreter.cancel(interpreter.initialize("lamp-2").state).state
    assert cancelled.outcome == "cancelled"
    with pytest.raises(NotRunningPositionError):
        decode(encode(cancelled, chart), chart=chart, require_running=True)

    # And a running one passes the check.
    running = interpreter.initialize("lamp-3").state
    assert decode(encode(running, chart), chart=chart, require_running=True).state == running


UNPICKLED: list[str] = []


def _record_unpickling(tag: str) -> None:
    UNPICKLED.append(tag)


class _Boom:
    """Unpickling this calls _record_unpickling(): decode must never do that."""

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (_record_unpickling, ("unpickled",))


def test_pickle_payloads_are_refused_without_running_anything() -> None:
    _, state = order_state()
    for payload in (pickle.dumps(state), pickle.dumps(_Boom()), pickle.dumps(_Boom(), protocol=0),
                    pickle.dumps({"format": FORMAT, "version": 1}, protocol=0)):
        with pytest.raises(NotAPositionError):
            decode(payload)
    assert UNPICKLED == []
    # The payload is live: pickle itself would have run it.
    pickle.loads(pickle.dumps(_Boom()))
    assert UNPICKLED == ["unpickled"]
    UNPICKLED.clear()


def test_every_refusal_is_a_position_error() -> None:
    for error in (NotAPositionError, UnsupportedVersionError, ChartMismatchError,
                  NotQuiescentError, NotRunningPositionError):
        assert issubclass(error, PositionError)
    # Distinct reasons, so a host can tell them apart.
    assert len({NotAPositionError, UnsupportedVersionError, ChartMismatchError,
                NotQuiescentError, NotRunningPositionError}) == 5


# ---- property: saving after every step changes nothing -------------------------------------

json_scalars = st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=6)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                max_size=3),
    max_leaves=6,
)


@dataclass
class Run:
    """One execution driven by a host: A keeps states in memory, B saves/loads every step."""

    chart: Chart
    memory: Interpreter
    durable: Interpreter
    a: State
    b: State
    pending: list[dict[str, Any]] = field(default_factory=list)  # delayed sends not yet due

    def note(self, step: Step) -> None:
        for effect in step.effects:
            if effect.kind == "send_delayed":
                self.pending.append(effect.data)
            elif effect.kind == "cancel":
                self.pending = [p for p in self.pending
                                if p["send_id"] != effect.data["send_id"]]


def check_same(step_a: Step, step_b: Step) -> None:
    assert step_b.state.to_dict() == step_a.state.to_dict()
    assert effects_of(step_b) == effects_of(step_a)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=st.sampled_from(list(CHARTS)), data=st.data())
def test_saving_after_every_step_gives_the_same_future(key: str, data: st.DataObject) -> None:
    chart = compiled(key)
    names = CHARTS[key][1] + (JUNK,)
    memory, durable = Interpreter(chart), Interpreter(chart)
    first_a = memory.initialize("prop-1")
    first_b = durable.initialize("prop-1")
    check_same(first_a, first_b)
    run = Run(chart, memory, durable, first_a.state, reload(first_b.state, chart))
    run.note(first_a)

    length = data.draw(st.integers(1, 25), label="length")
    # Cancelling ends the run, so it happens at most once, at a step drawn up front.
    cancel_at = data.draw(st.none() | st.integers(0, length - 1), label="cancel at")
    for index in range(length):
        action = "cancel" if index == cancel_at else data.draw(
            st.sampled_from(["event", "event", "deliver"]), label="action")
        if action == "deliver" and not run.pending:
            action = "event"
        if action == "cancel":
            step_a = run.memory.cancel(run.a)
            step_b = run.durable.cancel(run.b)
        elif action == "deliver":
            due = run.pending.pop(data.draw(st.integers(0, len(run.pending) - 1), label="due"))
            event = Event.from_dict(due["event"])
            if delivery(due["target"], event).kind is InstructionKind.DELIVER_INTERNAL:
                step_a = run.memory.deliver_internal(run.a, event)
                step_b = run.durable.deliver_internal(run.b, event)
            else:
                step_a = run.memory.handle_event(run.a, event)
                step_b = run.durable.handle_event(run.b, event)
        else:
            event = Event(data.draw(st.sampled_from(names), label="name"),
                          data=data.draw(json_values, label="data"))
            step_a = run.memory.handle_event(run.a, event)
            step_b = run.durable.handle_event(run.b, event)
        check_same(step_a, step_b)
        run.note(step_a)
        run.a = step_a.state
        run.b = reload(step_b.state, chart)
        assert run.b.to_dict() == run.a.to_dict()
        note_statistic(f"action: {action}")
        if not run.a.running:
            note_statistic(f"stopped: {run.a.outcome}")
            break


def test_the_property_drives_the_charts_somewhere() -> None:
    """Guard against a vacuous property: scripted runs reach what the random ones aim at."""
    scripts: dict[str, list[str]] = {
        "null datamodel": ["on", "up", "down", "up", "up", "quit"],
        "ecmascript counters": ["inc", "inc", "inc", "inc", "inc", "inc", "inc"],
        "parallel with history": ["a", "b", "c", "d", "pause", "resume", "releft", "pause", "quit"],
        "delayed sends and cancel": ["ping", "snooze", "hurry", "tick", "tick", "finish"],
    }
    for key, names in scripts.items():
        chart = compiled(key)
        memory, durable = Interpreter(chart), Interpreter(chart)
        a, b = memory.initialize("s"), durable.initialize("s")
        kinds = {e.kind for e in a.effects}
        configurations = {a.state.configuration}
        for name in names:
            a = memory.handle_event(a.state, Event(name))
            b = durable.handle_event(reload(b.state, chart), Event(name))
            check_same(a, b)
            kinds |= {e.kind for e in a.effects}
            configurations.add(a.state.configuration)
            if key == "parallel with history" and name == "resume":
                # Deep history through the reloaded blob restored both regions' leaves.
                active = {chart.states[i].id for i in b.state.configuration}
                assert {"l2b", "r2b"} <= active
        assert len(configurations) >= 3, key
        if key == "delayed sends and cancel":
            assert {"send_delayed", "cancel", "send"} <= kinds
            assert a.state.counters.ordinal >= 4
        if key == "parallel with history":
            assert a.state.history  # history was recorded and carried through the blob
        if key in ("null datamodel", "parallel with history"):
            assert not a.state.running and a.state.outcome == "final"
        if key == "ecmascript counters":
            assert a.state.datamodel["n"] >= 8
