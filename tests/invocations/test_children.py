"""Durable ``<invoke type="scxml">``: invocation rows and child executions through the outbox."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

import pytest
from django.test import override_settings

from invocations import children
from invocations.models import Invocation
from statecharts import stepper
from statecharts.core.position import decode
from statecharts.models import Chart, Execution, OutboxMessage
from statecharts.operations.replay import replay
from timers.firing import fire_all_due
from timers.models import Timer

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2033, 3, 1, tzinfo=UTC)
NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'

# The child greets its parent with the param it was given, waits for "work" from the parent,
# reports progress on a timer, and finishes with donedata.
CHILD = f"""<scxml {NS} initial="ready">
  <datamodel><data id="who" expr="'nobody'"/><data id="done" expr="0"/></datamodel>
  <state id="ready">
    <onentry><send target="#_parent" event="hello"><param name="who" expr="who"/></send>
    </onentry>
    <transition event="work" target="working"/>
  </state>
  <state id="working">
    <onentry><send event="tick" delay="5s"/></onentry>
    <onexit><log label="child leaves working" expr="done"/></onexit>
    <transition event="tick" target="finished"><assign location="done" expr="done + 1"/>
    </transition>
    <transition event="stop" target="stopped"/>
  </state>
  <final id="finished"><donedata><param name="who" expr="who"/><param name="done" expr="done"/>
  </donedata></final>
  <final id="stopped"/>
</scxml>"""

PARENT = f"""<scxml {NS} initial="working">
  <datamodel><data id="greeting" expr="null"/><data id="result" expr="null"/></datamodel>
  <state id="working">
    <invoke id="kid" type="scxml">
      <param name="who" expr="'ada'"/>
      <content>{CHILD}</content>
    </invoke>
    <transition event="hello">
      <assign location="greeting" expr="_event.data.who"/>
      <send target="#_kid" event="work"/>
    </transition>
    <transition event="done.invoke.kid" target="finished">
      <assign location="result" expr="_event.data"/>
    </transition>
    <transition event="abandon" target="elsewhere"/>
  </state>
  <state id="elsewhere"/>
  <final id="finished"/>
</scxml>"""


def datamodel(execution: Execution) -> dict[str, Any]:
    execution.refresh_from_db()
    return decode(bytes(execution.position)).state.datamodel


def start_parent(source: str = PARENT) -> Execution:
    return stepper.start(Chart.objects.load(source), now=T0)


def test_a_child_starts_talks_both_ways_and_its_donedata_reaches_the_parent() -> None:
    parent = start_parent()
    parent.refresh_from_db()
    assert parent.configuration == ["working"]
    assert datamodel(parent)["greeting"] == "ada"  # hello, with the param, came back up

    kid = Invocation.objects.get(parent=parent, invokeid="kid")
    assert kid.status == "active" and kid.params == {"who": "ada"}
    child = kid.child
    assert child is not None and child.parent_id == parent.pk and child.invokeid == "kid"
    assert child.configuration == ["working"]  # "work" came down through the outbox
    assert child.chart.origin == "invoked" and child.chart.name == ""

    # The child's own timer fires in its own execution; it finishes and the parent hears.
    assert fire_all_due(now=T0 + timedelta(seconds=6)).fired >= 1
    parent.refresh_from_db()
    assert parent.status == "completed"
    assert datamodel(parent)["result"] == {"who": "ada", "done": 1}
    kid.refresh_from_db()
    assert kid.status == "done"
    child.refresh_from_db()
    assert child.status == "completed"
    for execution in (parent, child):
        assert replay(execution).ok


def test_leaving_the_invoking_state_cancels_the_child_and_ignores_what_it_sends_after() -> None:
    parent = start_parent()
    child = Invocation.objects.get(parent=parent, invokeid="kid").child
    assert Timer.objects.filter(execution=child, status="pending").count() == 1
    stepper.send(parent, "abandon", now=T0)
    child.refresh_from_db()
    assert (child.status, child.outcome) == ("cancelled", "cancelled_by_parent")
    # Its onexit ran; its timer was discarded; it sent nothing up during the cancel.
    (entry,) = child.history.filter(input__kind="cancel")
    assert [e["label"] for e in entry.effects if e["kind"] == "log"] == ["child leaves working"]
    assert Timer.objects.get(execution=child).status == "discarded"
    assert Invocation.objects.get(parent=parent, invokeid="kid").status == "cancelled"

    # A message the child had written after the cancellation cut is not processed.
    stale = OutboxMessage.objects.create(
        sender=child,
        target_session_id=parent.session_id,
        event={"name": "hello", "data": {"who": "ghost"}, "invokeid": "kid"},
        via_invocation=child.invoke_ordinal,
        created=T0,
    )
    stepper.deliver([stale.pk])
    entry = parent.history.order_by("-seq").first()
    assert entry is not None and entry.disposition == "discarded"
    assert "after it was cancelled" in entry.reason
    assert datamodel(parent)["greeting"] == "ada"


def test_delivering_the_start_twice_makes_one_child() -> None:
    parent = start_parent()
    message = OutboxMessage.objects.get(sender=parent, kind=children.START, event__invocation=(
        Invocation.objects.get(parent=parent, invokeid="kid").pk))
    OutboxMessage.objects.filter(pk=message.pk).update(status="pending")
    assert children.deliver_start(OutboxMessage.objects.get(pk=message.pk), []) is True
    assert Execution.objects.filter(parent=parent, invoke_ordinal=1).count() == 1


def test_a_child_chart_that_cannot_be_had_is_error_execution_in_the_parent() -> None:
    chart = f"""<scxml {NS} initial="a">
      <datamodel><data id="why" expr="null"/></datamodel>
      <state id="a">
        <invoke id="x" type="scxml" srcexpr="'file:nowhere.scxml'"/>
        <transition event="error.execution" target="failed">
          <assign location="why" expr="_event.data.message"/></transition>
      </state>
      <state id="failed"/>
    </scxml>"""
    parent = start_parent(chart)
    parent.refresh_from_db()
    assert parent.configuration == ["failed"]
    assert "external documents are disabled" in datamodel(parent)["why"]  # refuse_all
    invocation = Invocation.objects.get(parent=parent)
    assert invocation.status == "failed" and invocation.defined_at_run_time


def test_run_time_child_charts_can_be_switched_off() -> None:
    tiny = '<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0"><final id="f"/></scxml>'
    literal = quoteattr(json.dumps(tiny))  # a JS string literal, as an XML attribute
    chart = f"""<scxml {NS} initial="a">
      <datamodel><data id="src" expr={literal}/></datamodel>
      <state id="a">
        <invoke id="x" type="scxml"><content expr="src"/></invoke>
        <transition event="done.invoke.x" target="ran"/>
        <transition event="error.execution" target="refused"/>
      </state>
      <state id="ran"/><state id="refused"/>
    </scxml>"""
    first = start_parent(chart)
    first.refresh_from_db()
    assert first.configuration == ["ran"]
    with override_settings(STATECHARTS={"INVOKE_RUNTIME_CHARTS": False}):
        second = start_parent(chart.replace('"ran"', '"ran2"'))
    second.refresh_from_db()
    assert second.configuration == ["refused"]
    assert "disabled" in Invocation.objects.get(parent=second).reason


def test_chart_scheme_invokes_the_latest_version_of_a_stored_chart() -> None:
    Chart.objects.load(CHILD.replace('initial="ready"', 'initial="ready" name="helper"'),
                       version="1")
    chart = f"""<scxml {NS} initial="a">
      <state id="a">
        <invoke id="h" type="scxml" src="chart:helper"/>
        <transition event="hello" target="greeted"/>
      </state>
      <state id="greeted"/>
    </scxml>"""
    parent = start_parent(chart)
    parent.refresh_from_db()
    assert parent.configuration == ["greeted"]
    assert Invocation.objects.get(parent=parent).chart.name == "helper"


def test_a_chart_loaded_from_a_file_stores_the_files_it_invokes(tmp_path: Path) -> None:
    (tmp_path / "child.scxml").write_text(CHILD)
    (tmp_path / "parent.scxml").write_text(f"""<scxml {NS} initial="a">
      <state id="a"><invoke id="c" type="scxml" src="file:child.scxml"/>
        <transition event="hello" target="b"/></state>
      <state id="b"/>
    </scxml>""")
    chart = Chart.objects.load_file(tmp_path / "parent.scxml")
    assert chart.resources == {"file:child.scxml": CHILD}
    assert chart.folder == str(tmp_path.resolve())
    (tmp_path / "child.scxml").unlink()  # the execution never depends on the file again
    parent = stepper.start(chart, now=T0)
    parent.refresh_from_db()
    assert parent.configuration == ["b"]


def test_every_door_shows_the_invocations_and_the_diagram_marks_the_invoking_state(
    admin_client: Any,
) -> None:
    from io import StringIO

    from django.core.management import call_command

    parent = start_parent()
    child = Invocation.objects.get(parent=parent).child
    assert child is not None
    page = admin_client.get(f"/admin/statecharts/execution/{parent.pk}/change/")
    assert page.status_code == 200
    body = page.content.decode()
    assert "Invocations" in body and f"/admin/statecharts/execution/{child.pk}/change/" in body
    assert 'class="sc-state sc-atomic active invoking" data-state="working"' in body
    child_page = admin_client.get(f"/admin/statecharts/execution/{child.pk}/change/")
    assert f"/admin/statecharts/execution/{parent.pk}/change/" in child_page.content.decode()

    detail = admin_client.get(f"/api/executions/{parent.pk}/").json()
    (row,) = detail["invocations"]
    assert (row["invokeid"], row["status"], row["child"]) == ("kid", "active", child.pk)
    listed = admin_client.get(f"/api/invocations/?parent={parent.pk}").json()
    assert [r["id"] for r in listed["results"]] == [row["id"]]
    svg = admin_client.get(f"/api/executions/{parent.pk}/diagram.svg").content.decode()
    assert "invoking" in svg

    out = StringIO()
    call_command("statechart", "show", str(parent.pk), stdout=out)
    assert "kid #1 (scxml) in working: active" in out.getvalue()
