"""The routes app on every door: the admin (the ledger list with "in doubt", route timers,
the execution page's panel), the API (read-only lists, the execution detail's field),
``statechart show``, and retention (pruning settled ledger rows, erasing targets)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client, override_settings
from django.urls import reverse
from rest_framework.test import APIClient

from routes.inspection import read_routes
from routes.models import DeliveryStatus, RouteDelivery
from routes.queue import WaitingSend
from statecharts import stepper
from statecharts.models import Chart, Execution
from statecharts.operations import erasure, retention
from tests.routes.recording import Recorder
from timers import firing
from timers.models import RouteTimer

pytestmark = pytest.mark.django_db

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
CHART = f"""<scxml {NS} initial="a">
  <state id="a">
    <onentry>
      <send id="now" type="record" target="ada@example.com" event="hello"/>
      <send id="later" type="record" target="bob@example.com" event="later" delay="1h"/>
    </onentry>
    <transition event="stop" target="end"/>
  </state>
  <final id="end"/>
</scxml>"""


@pytest.fixture
def execution(recorder: type[Recorder]) -> Execution:
    return stepper.start(Chart.objects.load(CHART, name="surface"), now=T0)


def test_the_admin_shows_the_ledger_the_waiting_rows_and_the_panel(
    client: Client, execution: Execution
) -> None:
    client.force_login(User.objects.create_superuser("admin", "a@example.com", "pw"))
    long_ago = datetime(2020, 1, 1, tzinfo=UTC)  # (the admin reads the real clock)
    RouteDelivery.objects.update(status=DeliveryStatus.CLAIMED, created=long_ago)
    listing = client.get(reverse("admin:routes_routedelivery_changelist"))
    assert listing.status_code == 200
    assert b"<strong>in doubt</strong>" in listing.content
    assert client.get(reverse("admin:timers_routetimer_changelist")).status_code == 200
    page = client.get(reverse("admin:statecharts_execution_change", args=[execution.pk]))
    assert page.status_code == 200
    text = page.content.decode()
    assert "Route deliveries" in text and "ada@example.com" in text  # the ledger row
    assert "bob@example.com" in text  # the delayed send waiting
    add = client.get(reverse("admin:routes_routedelivery_add"))
    assert add.status_code == 403  # read-only: machine-owned rows


def test_the_api_lists_deliveries_read_only_and_in_the_execution_detail(
    execution: Execution,
) -> None:
    api = APIClient()
    api.force_authenticate(User.objects.create_superuser("admin", "a@example.com", "pw"))
    listed = api.get("/api/route-deliveries/", {"execution": execution.pk})
    assert listed.status_code == 200
    [row] = listed.json()["results"]
    assert (row["route"], row["status"]) == ("record", "delivered")
    assert row["target"] == "ada@example.com" and row["in_doubt"] is False
    assert api.get("/api/route-deliveries/", {"status": "nonsense"}).status_code == 400
    assert api.post("/api/route-deliveries/", {}).status_code == 405
    detail = api.get(f"/api/executions/{execution.pk}/").json()
    assert [d["send_id"] for d in detail["route_deliveries"]] == ["now"]


def test_statechart_show_lists_the_deliveries_and_the_waiting_sends(
    execution: Execution, capsys: pytest.CaptureFixture[str]
) -> None:
    call_command("statechart", "show", str(execution.pk), "--json")
    document = json.loads(capsys.readouterr().out)
    assert [d["send_id"] for d in document["routes"]["deliveries"]] == ["now"]
    assert [w["send_id"] for w in document["routes"]["waiting"]] == ["later"]


class ListingQueue:
    """A route timer queue of another app: it keeps its own entries (none in RouteTimer)."""

    def schedule(self, entry: Any) -> None:
        pass

    def cancel(self, scope: int, send_id: str, *, now: datetime, reason: str) -> int:
        return 0

    def waiting(self, scope: int) -> list[WaitingSend]:
        return [WaitingSend("q-1", "k", "record", "elsewhere", {"name": "x"}, T0, "")]


def test_the_waiting_sends_are_what_the_configured_queue_keeps(execution: Execution) -> None:
    """The routes section asks ROUTE_TIMER_QUEUE (routes.queue.TimerQueue.waiting), never
    the timers app's rows behind its back."""
    assert RouteTimer.objects.filter(execution=execution).count() == 1
    queue = ListingQueue  # (a class: a dotted path outside the installed apps is not loaded)
    with override_settings(STATECHARTS={**settings.STATECHARTS, "ROUTE_TIMER_QUEUE": queue}):
        section = read_routes(execution, T0)
    assert [w.timer.send_id for w in section.waiting] == ["elsewhere"]
    with override_settings(STATECHARTS={**settings.STATECHARTS, "ROUTE_TIMER_QUEUE": None}):
        assert read_routes(execution, T0).waiting == ()
    assert [w.timer.send_id for w in read_routes(execution, T0).waiting] == ["later"]


def test_settled_deliveries_of_finished_executions_are_pruned_and_targets_erased(
    execution: Execution,
) -> None:
    stepper.send(execution, "stop", now=T0)
    firing.fire_all_due(now=T0 + timedelta(hours=1))  # discarded: the execution completed
    assert not RouteTimer.objects.exists()
    assert RouteDelivery.objects.count() == 2
    report = retention.prune(
        now=T0 + timedelta(days=31), only=["route_deliveries"],
    )
    assert report.deleted == 2 and not RouteDelivery.objects.exists()

    other = stepper.start(Chart.objects.load(CHART, name="surface"), now=T0)
    stepper.send(other, "stop", now=T0)
    erasure.erase([other], reason="a request")
    erased = RouteDelivery.objects.filter(execution=other).values_list("target", flat=True)
    assert list(erased) == [""]


def test_an_override_the_route_does_not_allow_is_a_400_through_the_api(
    recorder: type[Recorder],
) -> None:
    api = APIClient()
    api.force_authenticate(User.objects.create_superuser("admin", "a@example.com", "pw"))
    chart = Chart.objects.load(CHART, name="surface")
    refused = api.post(
        "/api/executions/",
        {"chart": chart.pk, "metadata": {"routes": {"record": {"fail": True}}}},
        format="json",
    )
    assert refused.status_code == 400, refused.content
    assert "overridable: label" in refused.content.decode()
    assert not Execution.objects.exists()
    allowed = api.post(
        "/api/executions/",
        {"chart": chart.pk, "metadata": {"routes": {"record": {"label": "api"}}}},
        format="json",
    )
    assert allowed.status_code == 201, allowed.content
    assert recorder.deliveries[-1][0]["label"] == "api"
