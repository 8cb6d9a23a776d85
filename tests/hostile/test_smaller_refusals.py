"""Smaller refusals instead of silence (issue 28, item 7): a session id outside the
documented alphabet, a delay with a space, and an event that ``EVENT_PERMISSIONS`` protects
sent to a Basic HTTP address."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import Client, override_settings

from routes import addresses, inbound
from statecharts import stepper
from statecharts.core import load_chart
from statecharts.core.errors import ChartError, LoadCheck
from statecharts.models import Chart, Execution, HistoryEntry
from statecharts.models.charts import source_hash
from statecharts.policies.validation import SESSION_ID_MAX_LENGTH, InvalidInput
from timers.models import Timer

pytestmark = pytest.mark.django_db

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
CHART = f'<scxml {NS} name="plain"><state id="a"/></scxml>'


# ---- session ids ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "session_id",
    ["../../x", "a/b", "a b", "a.b", "x\\y", "é", "%2e%2e", " ", "a\n", "a" * 65],
)
def test_a_session_id_outside_the_alphabet_is_refused_and_nothing_is_written(
    session_id: str,
) -> None:
    assert len("a" * 65) > SESSION_ID_MAX_LENGTH
    chart = Chart.objects.load(CHART)
    with pytest.raises(InvalidInput, match="session_id"):
        stepper.start(chart, session_id=session_id)
    with pytest.raises(InvalidInput, match="session_id"):
        inbound.start(chart, base_url="http://testserver/in/", session_id=session_id)
    with pytest.raises(InvalidInput, match="session_id: must not be blank"):
        stepper.start(chart, session_id="")
    assert not Execution.objects.exists()


@pytest.mark.parametrize("session_id", ["abc", "A-b_9", "f" * SESSION_ID_MAX_LENGTH])
def test_a_session_id_in_the_alphabet_is_taken(session_id: str) -> None:
    assert stepper.start(Chart.objects.load(CHART), session_id=session_id).session_id == (
        session_id
    )


# ---- delays -----------------------------------------------------------------------------------


def sending(delay: str) -> str:
    return f"""<scxml {NS} name="delays" initial="a">
  <state id="a">
    <onentry><send event="later" {delay}/></onentry>
    <transition event="error.execution" target="refused"/>
  </state>
  <state id="refused"/>
</scxml>"""


@pytest.mark.parametrize("delay", [" 1s", "1 s", "1s ", "\t2m"])
def test_a_static_delay_with_a_space_is_refused_at_load(delay: str) -> None:
    source = sending(f'delay="{delay}"')
    with pytest.raises(ChartError, match=r"3:14: delay .* is not a time: a time has no spaces"):
        Chart.objects.load(source)
    # The core alone reports it as a warning for the load doors (a stored chart compiles).
    assert [p.code for p in load_chart(source).warnings] == [LoadCheck.DELAY_SYNTAX]


def test_a_stored_chart_with_a_spaced_delay_still_runs_as_before() -> None:
    source = sending('delay=" 1s"')
    chart = Chart.objects.create(
        source=source, content_hash=source_hash(source), name="delays", datamodel="ecmascript"
    )
    execution = stepper.start(chart)
    assert execution.configuration == ["a"]
    timer = Timer.objects.get(execution=execution)
    assert (timer.due - execution.created).total_seconds() == 1


@pytest.mark.parametrize("delay", ["' 1s'", "'1 s'", "'1s '"])
def test_a_delayexpr_with_a_space_is_error_execution(delay: str) -> None:
    execution = stepper.start(Chart.objects.load(sending(f'delayexpr="{delay}"')))
    assert execution.configuration == ["refused"]
    assert not Timer.objects.filter(execution=execution).exists()
    effects = HistoryEntry.objects.get(execution=execution, seq=1).effects
    assert "a time has no spaces" in str(effects)


def test_a_delayexpr_without_spaces_is_scheduled() -> None:
    execution = stepper.start(Chart.objects.load(sending("delayexpr=\"'1.5s'\"")))
    assert execution.configuration == ["a"]
    assert Timer.objects.filter(execution=execution).count() == 1


# ---- Basic HTTP and EVENT_PERMISSIONS ---------------------------------------------------------

PROTECTED = f"""<scxml {NS} name="loan" initial="review">
  <state id="review">
    <transition event="approve" target="approved"/>
    <transition event="comment"/>
  </state>
  <final id="approved"/>
</scxml>"""
FORM = "application/x-www-form-urlencoded"


@pytest.mark.urls("tests.routes.urls")
def test_an_event_event_permissions_protects_cannot_come_in_through_a_basic_http_address(
    client: Client,
) -> None:
    rules = {**settings.STATECHARTS, "EVENT_PERMISSIONS": {"loan": {"approve": "loans.approve"}}}
    with override_settings(STATECHARTS=rules):
        execution = inbound.start(Chart.objects.load(PROTECTED), base_url="http://testserver/")
        address = addresses.location_of(execution, "/scxml/basichttp/")
        refused = client.post(address, "_scxmleventname=approve", content_type=FORM)
        assert refused.status_code == 403, refused.content
        assert "EVENT_PERMISSIONS['loan']['approve']" in refused.json()["reasons"][0]
        below = client.post(address, "_scxmleventname=approve.now", content_type=FORM)
        assert below.status_code == 403
        # An event no rule names: the address stands for change_execution on this execution.
        assert client.post(address, "_scxmleventname=comment", content_type=FORM).status_code == 204
    execution.refresh_from_db()
    assert execution.configuration == ["review"] and execution.steps == 2
    # Without the rule, the same post is applied.
    answer = client.post(address, "_scxmleventname=approve", content_type=FORM)
    assert answer.status_code == 204
    execution.refresh_from_db()
    assert execution.status == "completed"
