"""statecharts.core.availability: the events that would enable a transition now."""

from __future__ import annotations

from statecharts.core import Event, Interpreter, load_chart
from statecharts.core.availability import Availability, GuardKind, available_events

NS = "http://www.w3.org/2005/07/scxml"

ORDER = f"""<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript" initial="open">
  <datamodel>
    <data id="paid" expr="0"/><data id="total" expr="100"/><data id="log" expr="0"/>
  </datamodel>
  <state id="open" initial="cart">
    <transition event="cancel" target="cancelled"/>
    <transition event="error.*" target="cancelled"/>
    <state id="cart">
      <transition event="checkout" cond="total &gt; 0" target="paying"/>
      <transition event="discount" cond="total &gt; 1000" target="cart"/>
      <transition event="note" cond="_event.data.text != ''"/>
      <transition event="touch" cond="(log = log + 1) &gt; 0"/>
      <transition event="cancel" cond="total &gt; 50" target="cart"/>
    </state>
    <state id="paying">
      <transition event="pay" cond="paid &gt;= total" target="done"/>
      <transition event="pay.partial" target="paying"/>
    </state>
  </state>
  <final id="done"/>
  <final id="cancelled"/>
</scxml>"""


def start(source: str) -> tuple[object, Interpreter, object]:
    chart = load_chart(source)
    interpreter = Interpreter(chart)
    return chart, interpreter, interpreter.initialize("s1").state


def by_name(events: tuple) -> dict:
    return {event.name: event for event in events}


def test_events_of_the_active_states_and_their_ancestors_in_document_order() -> None:
    chart, _, state = start(ORDER)
    events = available_events(chart, state)
    assert [e.name for e in events] == [
        "cancel", "error", "checkout", "discount", "note", "touch",
    ]  # (pay only in paying; document order of the first transition)


def test_guards_are_evaluated_when_side_effect_free_else_conditional() -> None:
    chart, _, state = start(ORDER)
    events = by_name(available_events(chart, state))
    assert events["checkout"].availability is Availability.ENABLED
    assert events["checkout"].transitions[0].guard is GuardKind.EVALUATED
    assert events["discount"].availability is Availability.DISABLED
    assert events["discount"].transitions[0].reason == "the guard is false now"
    note = events["note"]
    assert note.availability is Availability.CONDITIONAL
    assert note.transitions[0].guard is GuardKind.READS_EVENT
    touch = events["touch"]
    assert touch.availability is Availability.CONDITIONAL
    assert touch.transitions[0].guard is GuardKind.SIDE_EFFECTS


def test_a_state_takes_its_own_transition_first_the_ancestors_after() -> None:
    chart, _, state = start(ORDER)
    cancel = by_name(available_events(chart, state))["cancel"]
    # cart's guarded cancel holds (total 100 > 50): selection stops there, the ancestor's
    # unguarded one is not looked at.
    assert [t.source for t in cancel.transitions] == ["cart"]
    assert cancel.transitions[0].targets == ("cart",)


def test_a_false_guard_falls_through_to_the_ancestor() -> None:
    chart, _, state = start(ORDER.replace('total &gt; 50', 'total &gt; 500'))
    cancel = by_name(available_events(chart, state))["cancel"]
    assert [(t.source, t.availability) for t in cancel.transitions] == [
        ("cart", Availability.DISABLED),
        ("open", Availability.ENABLED),
    ]
    assert cancel.availability is Availability.ENABLED


def test_reserved_roots_and_families_are_marked() -> None:
    chart, _, state = start(ORDER)
    events = by_name(available_events(chart, state))
    assert events["error"].reserved and events["error"].family
    assert not events["checkout"].reserved and not events["checkout"].family


def test_the_stored_datamodel_is_never_changed() -> None:
    chart, interpreter, state = start(ORDER)
    before = state.datamodel_json
    for _ in range(3):
        available_events(chart, state)
    assert state.datamodel_json == before
    # The session still steps from that state as if nothing had been asked.
    after = interpreter.handle_event(state, Event("touch")).state
    assert after.datamodel["log"] == 1


def test_guards_see_the_current_datamodel_and_a_prefix_matches_names_under_it() -> None:
    chart, interpreter, state = start(ORDER)
    state = interpreter.handle_event(state, Event("checkout")).state
    events = by_name(available_events(chart, state))
    assert events["pay"].availability is Availability.DISABLED  # paid 0 < total 100
    # "pay.partial" is its own name; "pay" would not select it (a descriptor matches names
    # under it, not above it).
    assert [t.event for t in events["pay"].transitions] == ["pay"]
    assert events["pay.partial"].availability is Availability.ENABLED
    paid = state.evolve(datamodel_json=state.datamodel_json.replace('"paid":0', '"paid":100'))
    assert by_name(available_events(chart, paid))["pay"].availability is Availability.ENABLED


def test_the_wildcard_is_one_entry_that_accepts_any_name() -> None:
    chart, _, state = start(
        f'<scxml xmlns="{NS}" version="1.0" initial="a"><state id="a">'
        '<transition event="*" target="b"/></state><state id="b"/></scxml>'
    )
    (event,) = available_events(chart, state)
    assert event.name == "*" and event.any_name and event.enabled


def test_null_datamodel_in_guards_are_evaluated() -> None:
    chart, _, state = start(
        f'<scxml xmlns="{NS}" version="1.0" initial="p"><parallel id="p">'
        '<state id="x" initial="x1"><state id="x1"><transition event="go" cond="In(\'y2\')" '
        'target="x2"/></state><state id="x2"/></state>'
        '<state id="y" initial="y1"><state id="y1"><transition event="step" target="y2"/>'
        "</state><state id=\"y2\"/></state></parallel></scxml>"
    )
    events = by_name(available_events(chart, state))
    assert events["go"].availability is Availability.DISABLED
    assert events["step"].availability is Availability.ENABLED


def test_a_guard_that_fails_is_conditional_and_calls_are_not_evaluated() -> None:
    chart, _, state = start(
        f'<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript" initial="a"><state id="a">'
        '<transition event="broken" cond="nosuch.field" target="b"/>'
        '<transition event="slow" cond="(function () { while (true) {} })()" target="b"/>'
        '<transition event="loop" cond="[1,2,3].every(x =&gt; x &gt; 0)" target="b"/>'
        '</state><state id="b"/></scxml>'
    )
    events = by_name(available_events(chart, state))
    assert events["broken"].availability is Availability.CONDITIONAL
    assert events["broken"].transitions[0].guard is GuardKind.FAILED
    # A call is not side-effect free by its text: not evaluated at all.
    assert events["slow"].transitions[0].guard is GuardKind.SIDE_EFFECTS
    assert events["loop"].transitions[0].guard is GuardKind.SIDE_EFFECTS


def test_a_finished_session_can_do_nothing() -> None:
    chart, interpreter, state = start(ORDER)
    state = interpreter.handle_event(state, Event("error.x")).state
    assert not state.running
    assert available_events(chart, state) == ()


HOOKED = f"""<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript" initial="a">
  <datamodel><data id="count" expr="0"/></datamodel>
  <script>var x = {{valueOf: function () {{ count = count + 1; return 5; }}}};</script>
  <state id="a">
    <transition event="big" cond="x &gt; 1" target="b"/>
    <transition event="here" cond="In('a')"/>
    <transition event="there" cond="In('b')"/>
  </state>
  <state id="b"/>
</scxml>"""


def test_a_guard_with_a_hidden_side_effect_runs_on_the_throwaway_copy_only() -> None:
    # "x > 1" looks side-effect free, but x's valueOf (a function in the datamodel) counts.
    chart, interpreter, state = start(HOOKED)
    events = by_name(available_events(chart, state))
    assert events["big"].availability is Availability.ENABLED
    assert state.datamodel["count"] == 0
    for _ in range(3):
        available_events(chart, state)
    # Stepping from the same state: the count is the step's own evaluation, once.
    stepped = interpreter.handle_event(state, Event("big")).state
    assert stepped.datamodel["count"] == 1


def test_ecmascript_in_guards_see_the_configuration() -> None:
    chart, _, state = start(HOOKED)
    events = by_name(available_events(chart, state))
    assert events["here"].availability is Availability.ENABLED
    assert events["there"].availability is Availability.DISABLED
