"""Which events the outside may send a chart (statecharts.core.outside, issue 36): the names it
only sends itself are computed once per compiled chart; a chart may list them itself."""

from __future__ import annotations

import pytest

from statecharts.core import outside
from statecharts.core.compile import load_chart
from statecharts.core.errors import ChartError

HEAD = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
DS = 'xmlns:ds="urn:django-statecharts"'


def chart(body: str, attributes: str = "") -> str:
    return f'<scxml {HEAD} {attributes} initial="a">\n<state id="a">{body}</state>\n</scxml>'


def test_names_sent_only_to_itself_are_left_out() -> None:
    compiled = load_chart(chart("""
      <onentry>
        <send event="nudge.due" delay="1d"/>
        <raise event="raised"/>
        <send event="inside" target="#_internal"/>
        <send event="own" targetexpr="'#_scxml_' + _sessionid"/>
        <if cond="true"><foreach array="[1]" item="i"><raise event="nested"/></foreach></if>
      </onentry>
      <transition event="nudge.due raised inside own nested pay"/>"""))
    offered = outside.of(compiled)
    assert offered.self_only == {"nudge.due", "raised", "inside", "own", "nested"}
    assert not offered.may_send("nudge.due") and offered.may_send("pay")
    assert offered.may_send("nudge")  # (a descriptor above it: not the same name)


def test_a_name_also_sent_elsewhere_or_by_another_type_is_public() -> None:
    compiled = load_chart(chart("""
      <onentry>
        <raise event="both"/><send event="both" target="#_parent"/>
        <send event="typed" type="http://www.w3.org/TR/scxml/#BasicHTTPEventProcessor"
              target="http://example.com/"/>
        <send event="somewhere" targetexpr="'#_scxml_' + other"/>
        <raise event="typed"/><raise event="somewhere"/>
      </onentry>"""))
    assert outside.of(compiled).self_only == frozenset()


def test_an_eventexpr_anywhere_leaves_nothing_out() -> None:
    compiled = load_chart(chart("""
      <onentry><raise event="raised"/><send eventexpr="'x'"/></onentry>"""))
    assert outside.of(compiled).may_send("raised")


def test_the_chart_may_list_what_the_outside_sends() -> None:
    compiled = load_chart(
        chart('<onentry><raise event="order.raised"/></onentry>',
              f'{DS} ds:external-events="order approve.*"')
    )
    offered = outside.of(compiled)
    assert offered.may_send("order.paid") and offered.may_send("order.raised")
    assert offered.may_send("approve") and not offered.may_send("refund")
    everything = outside.of(load_chart(chart("", f'{DS} ds:external-events="*"')))
    assert everything.may_send("anything")


def test_the_list_is_checked_at_load_with_its_position() -> None:
    with pytest.raises(ChartError) as refused:
        load_chart(chart("", f'{DS} ds:external-events="ok a..b"'))
    assert [str(p) for p in refused.value.problems] == [
        "1:1: external-events: 'a..b' is not a valid event descriptor"
    ]
    warned = load_chart(chart("", f'{DS} ds:external-event="a"'))
    assert any("has no attribute 'external-event'" in str(w) for w in warned.warnings)
