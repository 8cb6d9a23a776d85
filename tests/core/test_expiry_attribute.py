"""``ds:expires`` in the core (statecharts.core.expiry): read and checked at load, carried on
the compiled ``<send>`` and on its delayed send's effect, and nothing else."""

from __future__ import annotations

import pytest

from statecharts.core import load_chart
from statecharts.core.errors import ChartError
from statecharts.core.expiry import expiry_problem, parse_expiry
from statecharts.core.interpreter import Interpreter
from statecharts.core.model import Send

NS = 'xmlns="http://www.w3.org/2005/07/scxml" xmlns:ds="urn:django-statecharts" version="1.0"'


def sends(source: str) -> list[Send]:
    chart = load_chart(source)
    return [
        action
        for state in chart.states
        for block in state.onentry
        for action in block.actions
        if isinstance(action, Send)
    ]


def test_a_send_has_its_own_expiry_or_the_charts_or_none() -> None:
    source = f"""<scxml {NS} ds:expires="10m"><state id="a"><onentry>
      <send event="chart" delay="1s"/>
      <send event="own" delay="1s" ds:expires="1.5s"/>
    </onentry></state></scxml>"""
    assert [(s.event, s.expires_ms) for s in sends(source)] == [
        ("chart", 600_000),
        ("own", 1_500),
    ]
    plain = f'<scxml {NS}><state id="a"><onentry><send event="e" delay="1s"/></onentry>'
    plain += "</state></scxml>"
    assert [s.expires_ms for s in sends(plain)] == [None]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("10m", None),
        ("1d", None),
        ("0s", "ds:expires: '0s' must be longer than 0 (leave it out: never expires)"),
        ("soon", "ds:expires: malformed time 'soon' (use e.g. 500ms, 2s, 1.5s, 5m, 3h, 3d)"),
        ("1 m", "ds:expires: '1 m' is not a time: a time has no spaces (write '1m')"),
        ("36501d", "ds:expires: time '36501d' is longer than the maximum of 36500d (100 years)"),
    ],
)
def test_the_value_is_a_time_longer_than_zero(text: str, problem: str | None) -> None:
    assert expiry_problem(text) == problem
    assert (parse_expiry(text) is None) == (problem is not None)


def test_a_bad_value_refuses_the_chart_with_its_line_and_column() -> None:
    with pytest.raises(ChartError) as on_chart:
        load_chart(f'<scxml {NS} ds:expires="-1s"><state id="a"/></scxml>')
    assert "1:1: ds:expires: malformed time '-1s'" in str(on_chart.value)
    with pytest.raises(ChartError) as on_send:
        load_chart(
            f'<scxml {NS}><state id="a"><onentry>\n'
            '  <send event="e" delay="1s" ds:expires="1 h"/></onentry></state></scxml>'
        )
    assert "2:3: ds:expires: '1 h' is not a time" in str(on_send.value)


def test_an_expiry_that_cannot_apply_or_a_misspelt_one_is_a_warning() -> None:
    chart = load_chart(
        f'<scxml {NS}><state id="a"><onentry>\n'
        '  <send event="now" ds:expires="1m"/>\n'
        '  <send event="later" delay="1s" ds:expire="1m"/></onentry></state></scxml>'
    )
    assert [(p.line, p.column, p.severity, p.message) for p in chart.warnings] == [
        (2, 3, "warning", "ds:expires on a <send> without delay or delayexpr is never used"),
        (
            3,
            3,
            "warning",
            "<send> has no attribute 'expire' in urn:django-statecharts; it is ignored",
        ),
    ]


def test_the_delayed_sends_effect_carries_it_only_when_set() -> None:
    source = f"""<scxml {NS}><state id="a"><onentry>
      <send id="kept" event="e" delay="1s" ds:expires="30s"/>
      <send id="plain" event="e" delay="1s"/>
    </onentry></state></scxml>"""
    step = Interpreter(load_chart(source)).initialize("s")
    effects = [e.to_dict() for e in step.effects if e.kind == "send_delayed"]
    assert [(e["send_id"], e.get("expires_ms", "absent")) for e in effects] == [
        ("kept", 30_000),
        ("plain", "absent"),
    ]
