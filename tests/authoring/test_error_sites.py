"""Errors raised inside a chart are visible: the event's data says where (tagname, line,
column, reason, keeping ``message``) and the history records each one."""

from __future__ import annotations

import html
import io
import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils.html import strip_tags
from rest_framework.test import APIClient

from statecharts import stepper
from statecharts.core import Event, Interpreter, load_chart
from statecharts.core.effects import EffectKind
from statecharts.models import Chart
from statecharts.operations.inspection import inspect
from statecharts.testing import Workbench

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'

# Each failing element at a known line:column; the chart keeps each error's data.
FAILING = f"""<scxml {NS} name="failing">
  <datamodel>
    <data id="errors" expr="[]"/>
    <data id="bad" expr="nothing.here"/>
  </datamodel>
  <state id="s">
    <onentry>
      <assign location="x.y" expr="1"/>
    </onentry>
    <onentry>
      <send event="e" target="#_nowhere"/>
    </onentry>
    <transition event="error.*">
      <assign location="errors" expr="errors.concat([_event.data])"/>
    </transition>
    <transition event="go" cond="undefinedThing.x" target="t"/>
  </state>
  <final id="t"/>
</scxml>"""

AT_START = [
    ("error.execution", "data", 4, 5, "ReferenceError: nothing is not defined"),
    ("error.execution", "assign", 8, 7, "ReferenceError: x is not defined"),
    ("error.communication", "send", 11, 7, "no active invocation 'nowhere'"),
]


def where(errors: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(e["name"], e["tagname"], e["line"], e["column"], e["reason"]) for e in errors]


def test_the_error_event_carries_the_failing_element_its_position_and_reason() -> None:
    interpreter = Interpreter(load_chart(FAILING))
    step = interpreter.initialize("session-1")
    recorded = [dict(e.data) for e in step.effects if e.kind is EffectKind.ERROR]
    assert where(recorded) == AT_START
    assert recorded[0]["message"] == "<data id='bad'>: ReferenceError: nothing is not defined"
    # the chart saw the same in _event.data (today's message kept)
    seen = json.loads(step.state.datamodel_json)["errors"]
    assert seen == [
        {k: v for k, v in e.items() if k not in ("name", "sendid")} for e in recorded
    ]
    step = interpreter.handle_event(step.state, Event("go"))
    seen = json.loads(step.state.datamodel_json)["errors"]
    assert (seen[-1]["tagname"], seen[-1]["line"], seen[-1]["column"]) == ("transition", 16, 5)
    assert seen[-1]["reason"] == "ReferenceError: undefinedThing is not defined"


@pytest.mark.django_db
def test_the_history_the_api_the_admin_and_show_record_each_error(client: Client) -> None:
    execution = stepper.start(Chart.objects.load(FAILING))
    first = execution.history.order_by("seq").first()
    assert where([e for e in first.effects if e["kind"] == "error"]) == AT_START

    admin = User.objects.create_superuser("admin", "a@example.com", "pw")
    api = APIClient()
    api.force_authenticate(admin)
    history = api.get(f"/api/executions/{execution.pk}/history/").json()["results"]
    api_errors = [e for e in history[0]["effects"] if e["kind"] == "error"]
    assert where(api_errors) == AT_START
    assert api_errors[1]["message"] == "<assign location='x.y'>: ReferenceError: x is not defined"

    row = next(iter(inspect(execution).history()))
    assert [e.text for e in row.effects if e.text.startswith("error.")] == [
        "error.execution in <data> at line 4:5: ReferenceError: nothing is not defined",
        "error.execution in <assign> at line 8:7: ReferenceError: x is not defined",
        "error.communication in <send> at line 11:7: no active invocation 'nowhere'",
    ]
    out = io.StringIO()
    call_command("statechart", "show", str(execution.pk), stdout=out)
    assert "      error.execution in <assign> at line 8:7: ReferenceError: x is not defined" \
        in out.getvalue().splitlines()

    client.force_login(admin)
    page = client.get(reverse("admin:statecharts_execution_change", args=[execution.pk]))
    # What the page shows (the history's JSON is laid out as tokens, one span per word).
    shown = html.unescape(strip_tags(page.content.decode()))
    assert "error.execution in <assign> at line 8:7: ReferenceError: x is not defined" in shown


@pytest.mark.django_db
def test_a_child_that_cannot_start_points_at_its_invoke(statecharts: Workbench) -> None:
    parent = f"""<scxml {NS} initial="a">
  <datamodel><data id="seen" expr="null"/></datamodel>
  <state id="a">
    <invoke id="c" src="chart:nobody"/>
    <transition event="error.execution" target="b">
      <assign location="seen" expr="_event.data"/>
    </transition>
  </state>
  <final id="b"/>
</scxml>"""
    execution = statecharts.start(parent)
    assert execution.status == "completed"
    seen = statecharts.datamodel(execution)["seen"]
    assert (seen["tagname"], seen["line"], seen["column"]) == ("invoke", 4, 5)
    assert seen["reason"] == seen["message"] and "chart:nobody" in seen["message"]
