"""The Basic HTTP processor in durable executions: the route registered in settings, its POST
made after the step commits (the routes app's outbox delivery and ledger), received by the
inbound view on Django's live server and fed to the execution it addresses."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings

from routes import inbound
from routes.basichttp import BASICHTTP_TYPES, LOOPBACK_OPTIONS
from statecharts import stepper
from statecharts.models import Chart, Execution

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.urls("tests.routes.urls")]

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
ROUTES = {
    "basichttp": {
        "ROUTE": "routes.basichttp.BasicHTTPRoute",
        "TYPES": list(BASICHTTP_TYPES),
        "OPTIONS": {k: list(v) if isinstance(v, tuple) else v for k, v in LOOPBACK_OPTIONS.items()},
    }
}


@pytest.fixture
def basichttp_route() -> Iterator[None]:
    with override_settings(STATECHARTS={"ROUTES": ROUTES}):
        yield


def test_a_durable_execution_posts_to_itself_and_reads_the_raw_message(
    live_server: Any, basichttp_route: None
) -> None:
    chart = f"""<scxml {NS} initial="s0">
  <datamodel><data id="Var1" expr="2"/></datamodel>
  <state id="s0">
    <onentry>
      <send event="timeout" delay="30s"/>
      <send event="test" targetexpr="_ioprocessors['basichttp']['location']" namelist="Var1"
            type="http://www.w3.org/TR/scxml/#BasicHTTPEventProcessor"/>
    </onentry>
    <transition event="test" cond="_event.raw.search(/Var1=2/) !== -1" target="pass"/>
    <transition event="*" target="fail"/>
  </state>
  <final id="pass"/><final id="fail"/>
</scxml>"""
    execution = inbound.start(
        Chart.objects.load(chart), base_url=f"{live_server.url}/scxml/basichttp/"
    )
    execution.refresh_from_db()
    assert execution.status == "completed"
    assert execution.configuration == ["pass"]


def test_a_durable_send_off_the_allow_list_is_error_execution(basichttp_route: None) -> None:
    chart = f"""<scxml {NS} initial="s0">
  <state id="s0">
    <onentry><send event="x" type="basichttp" target="http://169.254.169.254/"/></onentry>
    <transition event="error.execution" target="refused"/>
    <transition event="*" target="sent"/>
  </state>
  <final id="refused"/><final id="sent"/>
</scxml>"""
    execution = stepper.start(Chart.objects.load(chart))
    execution.refresh_from_db()
    assert execution.configuration == ["refused"]
    assert Execution.objects.count() == 1
