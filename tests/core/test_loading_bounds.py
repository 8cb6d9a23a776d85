"""Loading refuses what it cannot hold with a ChartError that says where, and stays linear:
DOCTYPE text inside comments, text that is not UTF-8, endless files, delays past the maximum,
names and ids longer than the columns that store them, positions on one very long line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from statecharts.core import ChartError, Interpreter, load_chart, load_chart_file
from statecharts.core.delays import MAX_DELAY_MS, delay_problem, parse_delay
from statecharts.core.model import StateRange
from statecharts.core.parse import MAX_DOCUMENT_BYTES, decode_utf8, parse_document
from statecharts.core.validate import (
    MAX_CHART_NAME_LENGTH,
    MAX_INVOKE_ID_LENGTH,
    MAX_INVOKE_TYPE_LENGTH,
    MAX_SEND_ID_LENGTH,
    MAX_STATE_ID_LENGTH,
)

NS = "http://www.w3.org/2005/07/scxml"


def refused(source: str | bytes) -> list[str]:
    with pytest.raises(ChartError) as info:
        load_chart(source)
    return [str(p) for p in info.value.problems]


# ---- DOCTYPE text that declares nothing -------------------------------------------------


@pytest.mark.parametrize(
    "inert",
    [
        "<!-- a comment mentioning <!DOCTYPE html> -->",
        "<![CDATA[ <!DOCTYPE x ]]>",
        "<?note <!DOCTYPE in a processing instruction?>",
    ],
)
def test_doctype_text_inside_a_comment_cdata_or_pi_is_not_a_doctype(inert: str) -> None:
    chart = load_chart(
        f'<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript"><state id="a">'
        f'<onentry><script>{inert if "CDATA" in inert else ""}</script></onentry></state>'
        f"{inert if 'CDATA' not in inert else ''}</scxml>"
    )
    assert chart.ids.keys() == {"a"}


def test_a_doctype_after_a_comment_mentioning_one_is_still_refused_where_it_is() -> None:
    problems = refused(
        f'<!-- <!DOCTYPE --><!-- x -->\n  <!DOCTYPE scxml>\n<scxml xmlns="{NS}"/>'
    )
    assert problems == ["2:3: a DOCTYPE is not allowed (no DTDs or entities are processed)"]


def test_an_unterminated_comment_is_malformed_not_slow() -> None:
    problems = refused(f'<scxml xmlns="{NS}">' + "<!--" * 200_000)
    assert len(problems) == 1 and "not well-formed XML" in problems[0]


# ---- text that is not UTF-8 --------------------------------------------------------------


def test_text_holding_a_lone_surrogate_is_a_chart_error_at_its_position() -> None:
    broken = b'<scxml xmlns="x">\n  <state id="\xff"/></scxml>'.decode("utf-8", "surrogateescape")
    assert refused(broken) == [
        "2:14: U+DCFF is not a character (a lone surrogate: was the document decoded from "
        "invalid UTF-8?)"
    ]


def test_decode_utf8_names_the_line_and_column_of_the_first_bad_byte() -> None:
    with pytest.raises(ChartError) as info:
        decode_utf8('<scxml>\n  <state id="é\xff"/>'.encode("latin-1"))
    assert [str(p) for p in info.value.problems] == [
        "2:14: byte 0xE9 is not valid UTF-8 (a chart stored as text must be UTF-8)"
    ]
    assert decode_utf8("\ufeff<scxml/>".encode()) == "<scxml/>"


def test_invalid_utf8_bytes_are_a_chart_error_at_their_position() -> None:
    assert refused(f'<scxml xmlns="{NS}"><state id="a\xff"/></scxml>'.encode("latin-1")) == [
        "1:60: not well-formed XML: Invalid bytes in character encoding, line 1, column 60"
    ]


# ---- files -------------------------------------------------------------------------------


def test_an_endless_file_is_refused_after_reading_one_byte_past_the_bound() -> None:
    with pytest.raises(ChartError) as info:
        load_chart_file("/dev/zero")
    assert [str(p) for p in info.value.problems] == [
        f"1:1: document is over {MAX_DOCUMENT_BYTES} bytes; the limit is {MAX_DOCUMENT_BYTES}"
    ]
    assert info.value.source_name == "/dev/zero"


def test_a_file_at_the_bound_loads(tmp_path: Path) -> None:
    head = f'<scxml xmlns="{NS}"><state id="a"/><!--'
    tail = "--></scxml>"
    path = tmp_path / "big.scxml"
    path.write_text(head + "x" * (MAX_DOCUMENT_BYTES - len(head) - len(tail)) + tail)
    assert path.stat().st_size == MAX_DOCUMENT_BYTES
    assert load_chart_file(path).ids.keys() == {"a"}


# ---- delays ------------------------------------------------------------------------------


def test_delays_up_to_the_maximum_parse_and_beyond_it_say_why_not() -> None:
    assert parse_delay("36500d") == MAX_DELAY_MS
    assert parse_delay("36500.5d") is None
    assert delay_problem("36500.5d") == (
        "delay '36500.5d' is longer than the maximum of 36500d (100 years)"
    )
    assert parse_delay("9" * 400 + "ms") is None
    assert delay_problem("9" * 400 + "ms") == f"delay {('9' * 20)!r}... is too long to be a delay"
    assert delay_problem("soon") == "malformed delay 'soon' (use e.g. 500ms, 2s, 1.5s, 5m, 3h, 3d)"
    assert delay_problem("1." + "5" * 30 + "s") is None


@pytest.mark.parametrize(
    ("delay", "message"),
    [
        ("3000000d", "delay '3000000d' is longer than the maximum of 36500d (100 years)"),
        ("1" * 400 + "s", f"delay {('1' * 20)!r}... is too long to be a delay"),
    ],
)
def test_a_static_delay_beyond_the_maximum_is_a_validation_problem(
    delay: str, message: str
) -> None:
    problems = refused(
        f'<scxml xmlns="{NS}" version="1.0">\n<state id="a"><onentry>\n'
        f'  <send event="e" delay="{delay}"/></onentry></state></scxml>'
    )
    assert problems == [f"3:3: {message}"]


def test_a_delayexpr_beyond_the_maximum_is_error_execution_when_sent() -> None:
    chart = load_chart(
        f"""<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript">
  <state id="a">
    <onentry><send event="late" delayexpr="'3000000d'"/></onentry>
    <transition event="error.execution" target="b">
      <log label="why" expr="_event.data.message"/>
    </transition>
  </state>
  <state id="b"/>
</scxml>"""
    )
    step = Interpreter(chart).initialize("s")
    assert [e.data["value"] for e in step.effects if e.kind == "log"] == [
        "<send> delayexpr: delay '3000000d' is longer than the maximum of 36500d (100 years)"
    ]
    assert not [e for e in step.effects if e.kind == "send_delayed"]


# ---- lengths the database columns hold ----------------------------------------------------


def test_names_and_ids_longer_than_their_columns_are_problems_at_their_position() -> None:
    name = "n" * (MAX_CHART_NAME_LENGTH + 1)
    send_id = "i" * (MAX_SEND_ID_LENGTH + 1)
    state_id = "s" * (MAX_STATE_ID_LENGTH + 1)
    problems = refused(
        f'<scxml xmlns="{NS}" version="1.0" name="{name}">\n'
        f'  <state id="{state_id}">\n'
        f'    <onentry><send event="e" id="{send_id}"/></onentry>\n'
        f"  </state>\n</scxml>"
    )
    assert problems == [
        f"1:1: <scxml> name is {MAX_CHART_NAME_LENGTH + 1} characters long; the limit is "
        f"{MAX_CHART_NAME_LENGTH}",
        f"2:3: state id '{'s' * 20}...' is {MAX_STATE_ID_LENGTH + 1} characters long; the "
        f"limit is {MAX_STATE_ID_LENGTH}",
        f"3:14: <send> id is {MAX_SEND_ID_LENGTH + 1} characters long; the limit is "
        f"{MAX_SEND_ID_LENGTH}",
    ]


def test_names_and_ids_at_their_limits_load() -> None:
    chart = load_chart(
        f'<scxml xmlns="{NS}" version="1.0" name="{"n" * MAX_CHART_NAME_LENGTH}">'
        f'<state id="{"s" * MAX_STATE_ID_LENGTH}"><onentry>'
        f'<send event="e" id="{"i" * MAX_SEND_ID_LENGTH}"/></onentry></state></scxml>'
    )
    assert chart.name == "n" * MAX_CHART_NAME_LENGTH


def test_a_static_invoke_id_or_type_longer_than_its_column_is_a_problem_at_its_position() -> None:
    invoke_id = "i" * (MAX_INVOKE_ID_LENGTH + 1)
    invoke_type = "t" * (MAX_INVOKE_TYPE_LENGTH + 1)
    problems = refused(
        f'<scxml xmlns="{NS}" version="1.0">\n'
        f'  <state id="a">\n'
        f'    <invoke id="{invoke_id}" src="chart:x"/>\n'
        f'    <invoke type="{invoke_type}" src="x"/>\n'
        f"  </state>\n</scxml>"
    )
    assert problems == [
        f"3:5: <invoke> id is {MAX_INVOKE_ID_LENGTH + 1} characters long; the limit is "
        f"{MAX_INVOKE_ID_LENGTH}",
        f"4:5: <invoke> type is {MAX_INVOKE_TYPE_LENGTH + 1} characters long; the limit is "
        f"{MAX_INVOKE_TYPE_LENGTH}",
    ]


@pytest.mark.django_db
def test_a_static_invoke_id_at_its_limit_is_stored_when_its_state_is_entered() -> None:
    """The limit is the column's: on PostgreSQL a longer id would load, then fail every
    entry of its state (``value too long``)."""
    from invocations.models import Invocation
    from statecharts.models import Chart, Execution

    invoke_id = "i" * MAX_INVOKE_ID_LENGTH
    chart = Chart.objects.load(
        f'<scxml xmlns="{NS}" version="1.0" name="parent_of_long_id">'
        f'<state id="a"><invoke id="{invoke_id}"><content>'
        f'<scxml xmlns="{NS}" version="1.0"><state id="c"/></scxml>'
        f"</content></invoke></state></scxml>"
    )
    execution = Execution.objects.start(chart)
    execution.refresh_from_db()
    assert execution.status == "active"
    assert list(Invocation.objects.filter(parent=execution).values_list("invokeid", flat=True)) == [
        invoke_id
    ]


# ---- shapes: positions and structure stay exact on documents that are all one line -------


def test_positions_on_one_long_line_count_characters_from_the_line_start() -> None:
    tags = [f'<state id="s{i}"/>' for i in range(2000)]
    head = f'<scxml xmlns="{NS}">' + "é" * 3
    source = head + "".join(tags) + '\n <state id="last"/></scxml>'
    document = parse_document(source)
    elements = [e for e in document.root.iter() if isinstance(e.tag, str)]
    columns = [len(head) + 1]
    for tag in tags[:-1]:
        columns.append(columns[-1] + len(tag))
    assert [document.position(e) for e in elements[1:2001]] == [(1, c) for c in columns]
    assert document.position(elements[-1]) == (2, 2)


def test_descendants_of_a_large_subtree_answer_like_a_set() -> None:
    chart = load_chart(
        f'<scxml xmlns="{NS}"><state id="top">'
        + "".join(f'<state id="c{i}"/>' for i in range(200))
        + '</state><state id="after"/></scxml>'
    )
    top = chart.state("top")
    assert isinstance(top.descendants, StateRange)
    assert chart.ids["c0"] in top.descendants and chart.ids["c199"] in top.descendants
    assert chart.ids["after"] not in top.descendants and top.index not in top.descendants
    assert {chart.ids["c5"], chart.ids["after"], 0} & top.descendants == {chart.ids["c5"]}
    assert len(top.descendants) == 200
    assert set(top.descendants) == {chart.ids[f"c{i}"] for i in range(200)}
    assert chart.state("c3").descendants == frozenset()


def test_an_element_with_many_attributes_keeps_every_name_and_the_values_scxml_reads() -> None:
    """Past 64 attributes an element's values are read when asked (lxml reads them all in
    quadratic time): what the chart reads is the same, and every other name is a warning."""
    extra = " ".join(f'x{i}="{i}"' for i in range(100))
    chart = load_chart(
        f'<scxml xmlns="{NS}" initial="a"><state id="a" {extra}>'
        f'<transition event="go" cond="In(\'a\')" target="b" {extra}/></state>'
        f'<state id="b" initial="c" {extra}><state id="c"/></state></scxml>'
    )
    go = chart.state("a").transitions[0]
    assert (go.event_text, go.targets) == ("go", (chart.ids["b"],))
    assert go.cond is not None and go.cond.source == "In('a')"
    assert chart.state("b").initial is not None
    assert chart.state("b").initial.targets == (chart.ids["c"],)
    messages = [w.message for w in chart.warnings]
    assert len(messages) == 300
    assert messages[:2] == [
        "<state> has no attribute 'x0'; it is ignored",
        "<state> has no attribute 'x1'; it is ignored",
    ]
    assert "<transition> has no attribute 'x99'; it is ignored" in messages


def test_an_element_with_many_attributes_reports_a_missing_one() -> None:
    extra = " ".join(f'x{i}="{i}"' for i in range(100))
    source = (
        f'<scxml xmlns="{NS}" datamodel="ecmascript"><state id="a"><datamodel>'
        f'<data expr="1" {extra}/></datamodel></state></scxml>'
    )
    with pytest.raises(ChartError) as caught:
        load_chart(source)
    column = source.index("<data ") + 1
    assert [str(p) for p in caught.value.problems] == [
        f"1:{column}: <data> requires the attribute 'id'"
    ]


@pytest.mark.django_db
def test_a_stored_chart_source_holding_a_lone_surrogate_is_a_chart_error_at_every_door() -> None:
    from django.contrib.auth.models import User
    from rest_framework.test import APIClient

    from statecharts.models import Chart

    source = f'<scxml xmlns="{NS}" version="1.0">\n  <state id="a\ud800"/>\n</scxml>'
    with pytest.raises(ChartError) as caught:
        Chart.objects.load(source)
    [problem] = caught.value.problems
    assert (problem.line, problem.column) == (2, 15)
    assert "U+D800 is not a character (a lone surrogate" in problem.message
    client = APIClient()
    client.force_authenticate(User.objects.create_superuser("root", password="pw"))
    # The JSON text spells the surrogate as an escape, as a client's JSON would.
    body = json.dumps({"source": source})  # ensure_ascii: the surrogate as \ud800
    assert "\\ud800" in body
    response = client.post("/api/charts/", body, content_type="application/json")
    assert response.status_code == 400
    assert not Chart.objects.exists()
