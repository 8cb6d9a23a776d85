"""Charts and delays beyond what the columns and dates hold, met at the doors.

The core refuses them (``statecharts.core``: a static ``<send id>`` longer than its column
refuses the chart when it is compiled; a ``delayexpr`` beyond the maximum delay raises
``error.execution``); these tests check that every door turns that into a clear answer, for
a chart row stored before the core checked it too.
"""

from __future__ import annotations

import io

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from statecharts import stepper
from statecharts.core.errors import StatechartError
from statecharts.models import Chart, Execution
from statecharts.models.charts import source_hash
from timers.models import Timer

pytestmark = pytest.mark.django_db

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0"'
LONG_SEND_ID = f"""<scxml {NS} name="reminder" initial="waiting">
  <state id="waiting"><onentry><send id="{"s" * 201}" event="nudge" delay="1d"/></onentry></state>
</scxml>"""
DELAYS = f"""<scxml {NS} name="delays" datamodel="ecmascript" initial="waiting">
  <state id="waiting">
    <transition event="later"><send event="due" delayexpr="_event.data"/></transition>
    <transition event="error.execution" target="refused"/>
  </state>
  <state id="refused"/>
</scxml>"""


def test_a_stored_chart_whose_send_id_overflows_its_column_cannot_be_started(
    api: APIClient, client: Client
) -> None:
    # Stored as it was before the core checked the length (a row, not a load).
    chart = Chart.objects.create(
        source=LONG_SEND_ID, content_hash=source_hash(LONG_SEND_ID), name="reminder"
    )
    response = api.post("/api/executions/", {"chart": chart.pk}, format="json")
    assert response.status_code == 400
    assert "cannot be started" in response.json()["chart"][0]
    client.force_login(User.objects.get(username="root"))
    page = client.post(reverse("admin:statecharts_chart_start", args=[chart.pk]), follow=True)
    assert page.status_code == 200
    assert "201 characters" in " ".join(str(m) for m in page.context["messages"])
    with pytest.raises(CommandError, match="201 characters"):
        call_command("statechart", "start", str(chart.pk), stdout=io.StringIO())
    with pytest.raises(StatechartError):
        stepper.start(chart)
    assert Execution.objects.count() == 0


def test_a_delay_from_event_data_beyond_the_maximum_is_error_execution_not_a_500(
    api: APIClient,
) -> None:
    execution = Execution.objects.start(Chart.objects.load(DELAYS))
    url = f"/api/executions/{execution.pk}/send/"
    for delay in ["3000000d", "1" * 400 + "ms"]:
        response = api.post(url, {"name": "later", "data": delay}, format="json")
        assert response.status_code == 200, response.content
    execution.refresh_from_db()
    assert execution.configuration == ["refused"]
    assert not Timer.objects.filter(execution_id=execution.pk).exists()
