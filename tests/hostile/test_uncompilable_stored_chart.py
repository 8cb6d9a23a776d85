"""An execution whose chart's stored source no longer compiles (an upgrade that tightened
validation, a database edit of the row) is handled like a damaged position: the first input
marks it ``needs_repair`` with the reason, inputs are refused (409 at every door, recorded
in its history), and it can still be cancelled (without running chart code). Never a 500,
and never an execution left ``active`` that nothing can step."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from rest_framework.test import APIClient

from routes import addresses, inbound
from statecharts import stepper
from statecharts.exceptions import NeedsRepair
from statecharts.models import Chart, Execution, HistoryEntry
from statecharts.models.charts import source_hash
from statecharts.models.history import Disposition
from statecharts.statuses import ExecutionStatus
from timers import firing
from timers.models import Timer, TimerStatus

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.routes.urls")]

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0"'
GOOD = f"""<scxml {NS} name="uncompilable" initial="a">
  <state id="a">
    <onentry><send event="later" delay="1s"/></onentry>
    <onexit><log expr="'exited'"/></onexit>
    <transition event="go" target="b"/>
  </state>
  <state id="b"/>
</scxml>"""
# The same chart as it reads after the edit: a target that does not exist (refused by every
# version of the compiler, as a check an upgrade adds would be).
BROKEN = GOOD.replace('target="b"', 'target="nowhere"')
BASE = "http://testserver/scxml/basichttp/"
FORM = "application/x-www-form-urlencoded"


def broken_execution() -> Execution:
    """An execution started while its chart compiled; then its row's source was edited (the
    hash kept consistent, so only compiling fails)."""
    chart = Chart.objects.load(GOOD)
    execution = inbound.start(chart, base_url=BASE)
    Chart.objects.filter(pk=chart.pk).update(source=BROKEN, content_hash=source_hash(BROKEN))
    return Execution.objects.select_related("chart").get(pk=execution.pk)


def assert_needs_repair(execution: Execution, *, recorded: bool = True) -> None:
    execution.refresh_from_db()
    assert execution.status == ExecutionStatus.NEEDS_REPAIR
    assert "no longer compiles" in execution.failure_reason
    assert "'nowhere' does not exist" in execution.failure_reason
    last = HistoryEntry.objects.filter(execution=execution).order_by("-seq").first()
    assert last is not None
    assert last.disposition == (Disposition.REFUSED if recorded else Disposition.APPLIED)


def test_the_stepper_refuses_and_marks_it_needs_repair_then_cancels_it() -> None:
    execution = broken_execution()
    with pytest.raises(NeedsRepair, match="no longer compiles"):
        stepper.send(execution, "go")
    assert_needs_repair(execution)
    with pytest.raises(NeedsRepair):  # refused by its status now, recorded again
        stepper.send(execution, "go")
    result = stepper.cancel(execution)
    assert result.execution.status == ExecutionStatus.CANCELLED
    assert "cancelled without running chart code" in result.execution.failure_reason
    assert not Timer.objects.filter(execution=execution, status=TimerStatus.PENDING).exists()


def test_a_cancel_first_cancels_it_without_chart_code() -> None:
    execution = broken_execution()
    result = stepper.cancel(execution)
    assert result.execution.status == ExecutionStatus.CANCELLED
    assert "no longer compiles" in result.execution.failure_reason


def test_the_api_answers_409_to_a_send_and_cancels(api: APIClient) -> None:
    execution = broken_execution()
    answer = api.post(f"/api/executions/{execution.pk}/send/", {"name": "go"}, format="json")
    assert answer.status_code == 409, answer.content
    assert answer.json()["status"] == ExecutionStatus.NEEDS_REPAIR
    assert answer.json()["disposition"] == Disposition.REFUSED
    assert "no longer compiles" in answer.json()["detail"]
    shown = api.get(f"/api/executions/{execution.pk}/").json()
    assert shown["status"] == ExecutionStatus.NEEDS_REPAIR
    assert "no longer compiles" in shown["failure_reason"]
    answer = api.post(f"/api/executions/{execution.pk}/cancel/", format="json")
    assert answer.status_code == 200, answer.content
    assert Execution.objects.get(pk=execution.pk).status == ExecutionStatus.CANCELLED


def test_the_api_cancels_it_as_its_first_input(api: APIClient) -> None:
    execution = broken_execution()
    answer = api.post(f"/api/executions/{execution.pk}/cancel/", format="json")
    assert answer.status_code == 200, answer.content
    assert Execution.objects.get(pk=execution.pk).status == ExecutionStatus.CANCELLED


def test_the_basic_http_inbound_view_answers_409(client: Client) -> None:
    execution = broken_execution()
    address = addresses.location_of(execution, "/scxml/basichttp/")
    answer = client.post(address, "_scxmleventname=go", content_type=FORM)
    assert answer.status_code == 409, answer.content
    assert answer.json()["status"] == ExecutionStatus.NEEDS_REPAIR
    assert_needs_repair(execution)
    answer = client.post(address, "_scxmleventname=go", content_type=FORM)
    assert answer.status_code == 409


def test_a_due_timer_is_held_and_the_execution_marked() -> None:
    execution = broken_execution()
    timer = Timer.objects.get(execution=execution)
    firing.fire_due(now=timer.due + timedelta(seconds=1))
    assert_needs_repair(execution)
    timer.refresh_from_db()
    assert timer.status == TimerStatus.PENDING  # held, not lost: the status may be repaired


def test_a_due_send_to_another_session_is_held_and_the_execution_marked() -> None:
    # A delivery that is not a step of this execution (stepper.perform_delivery's performer
    # path) meets the same chart: held, and the execution marked, never a bare ChartError.
    to_other = GOOD.replace('delay="1s"', 'target="#_scxml_other" delay="1s"')
    receiver = Chart.objects.load(f'<scxml {NS} name="receiver"><state id="r"/></scxml>')
    stepper.start(receiver, session_id="other")
    chart = Chart.objects.load(to_other)
    execution = stepper.start(chart)
    broken = to_other.replace('target="b"', 'target="nowhere"')
    Chart.objects.filter(pk=chart.pk).update(source=broken, content_hash=source_hash(broken))
    timer = Timer.objects.get(execution=execution)
    firing.fire_due(now=timer.due + timedelta(seconds=1))
    assert_needs_repair(execution, recorded=False)  # (no input of its own was refused)
    timer.refresh_from_db()
    assert timer.status == TimerStatus.PENDING
