"""Late timers (issue 33): delivered by default however late (SCXML 6.2); ``ds:expires``
(per chart or per send) makes a row later than that ``expired``, and the chart hears
``error.platform.timer.expired`` instead (timers.expiry)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from statecharts import stepper, telemetry
from statecharts.core.position import decode
from statecharts.models import Chart, Execution, HistoryEntry
from tests.hostile.test_refused_at_load import refused_at_every_door
from timers import firing, operating
from timers.expiry import EXPIRED_EVENT
from timers.models import Timer, TimerStatus
from timers.transfer import export_timers, load_timers

pytestmark = pytest.mark.django_db

NS = (
    'xmlns="http://www.w3.org/2005/07/scxml" xmlns:ds="urn:django-statecharts" '
    'version="1.0" datamodel="ecmascript"'
)
T0 = datetime(2031, 3, 1, 9, 0, tzinfo=UTC)
S = timedelta(seconds=1)


@pytest.fixture
def api() -> APIClient:
    client = APIClient()
    client.force_authenticate(User.objects.create_superuser("root", password="pw"))
    return client


@pytest.fixture
def admin(client: Client) -> Client:
    client.force_login(User.objects.create_superuser("admin", password="pw"))
    return client


def chart(chart_expires: str = "", send_expires: str = "") -> str:
    """A chart with one delayed send (``nudge`` in 10 s) that counts what it hears."""
    on_chart = f' ds:expires="{chart_expires}"' if chart_expires else ""
    on_send = f' ds:expires="{send_expires}"' if send_expires else ""
    return f"""<scxml {NS}{on_chart} initial="waiting">
  <datamodel><data id="nudges" expr="0"/><data id="expired" expr="null"/></datamodel>
  <state id="waiting">
    <onentry><send id="nudge" event="nudge" delay="10s"{on_send}/></onentry>
    <transition event="nudge"><assign location="nudges" expr="nudges + 1"/></transition>
    <transition event="error.platform.timer.expired">
      <assign location="expired" expr="[_event.name, _event.type, _event.sendid, _event.data]"/>
    </transition>
  </state>
</scxml>"""


def start(source: str) -> Execution:
    return stepper.start(Chart.objects.load(source), now=T0)


def data(execution: Execution) -> dict[str, Any]:
    execution.refresh_from_db()
    found: dict[str, Any] = dict(decode(bytes(execution.position)).state.datamodel)
    return found


# ---- 1. late is delivered by default ----------------------------------------------------------


@pytest.mark.parametrize("late", [S, timedelta(days=400)])
def test_a_late_timer_is_delivered_by_default_however_late(late: timedelta) -> None:
    execution = start(chart())
    timer = Timer.objects.get(execution=execution)
    assert timer.expires_at is None
    report = firing.fire_all_due(now=timer.due + late)
    assert report.outcomes == {"fired": 1}
    assert data(execution)["nudges"] == 1
    assert Timer.objects.get(pk=timer.pk).status == TimerStatus.FIRED


# ---- 2. ds:expires ----------------------------------------------------------------------------


def test_the_row_keeps_its_due_plus_the_expiry_the_send_overriding_the_chart() -> None:
    chart_default = start(chart(chart_expires="10m"))
    overridden = start(chart(chart_expires="10m", send_expires="30s"))
    due = T0 + 10 * S
    assert Timer.objects.get(execution=chart_default).expires_at == due + timedelta(minutes=10)
    assert Timer.objects.get(execution=overridden).expires_at == due + 30 * S


def test_a_fire_within_the_expiry_delivers_as_usual() -> None:
    execution = start(chart(send_expires="30s"))
    timer = Timer.objects.get(execution=execution)
    assert firing.fire_all_due(now=timer.due + 30 * S).outcomes == {"fired": 1}
    assert data(execution)["nudges"] == 1


def test_a_fire_later_than_the_expiry_is_recorded_expired_and_the_chart_is_told(
    django_capture_on_commit_callbacks: Any,
) -> None:
    execution = start(chart(send_expires="30s"))
    timer = Timer.objects.get(execution=execution)
    at = timer.due + 31 * S
    heard: list[dict[str, Any]] = []

    def hear(sender: Any, **attributes: Any) -> None:
        heard.append(attributes)

    telemetry.timer_expired.connect(hear)
    try:
        with django_capture_on_commit_callbacks(execute=True):  # (sent after the commit)
            assert firing.fire_all_due(now=at).outcomes == {"expired": 1}
    finally:
        telemetry.timer_expired.disconnect(hear)
    [expired] = heard  # the telemetry event, once (docs/telemetry.md)
    assert expired["session_id"] == execution.session_id
    assert expired["reason"] == "expired: 31 s late (ds:expires 30 s)"
    timer.refresh_from_db()
    assert timer.status == TimerStatus.EXPIRED
    assert timer.reason == "expired: 31 s late (ds:expires 30 s)"
    assert timer.settled == at and timer.claimed_until is None
    seen = data(execution)
    assert seen["nudges"] == 0  # never delivered late
    name, kind, sendid, told = seen["expired"]
    assert (name, kind, sendid) == (EXPIRED_EVENT, "platform", "nudge")
    assert told == {
        "sendid": "nudge",
        "event": "nudge",
        "due": timer.due.isoformat(),
        "expires_at": timer.expires_at.isoformat(),
        "late_s": 31.0,
    }
    # The step that told it is recorded with the timer as its cause.
    step = HistoryEntry.objects.filter(execution=execution).order_by("-seq").first()
    assert step is not None and step.cause["timer"] == timer.pk


def test_expiry_is_decided_the_same_in_a_chunk_and_alone() -> None:
    """A chunk of several timers (timers.chunks) and a lone fire give the same outcomes."""
    expiring = [start(chart(send_expires="30s")) for _ in range(3)]
    keeping = [start(chart()) for _ in range(2)]
    at = T0 + 10 * S + timedelta(minutes=5)
    report = firing.fire_due(now=at)
    assert report.outcomes == {"expired": 3, "fired": 2}
    assert [data(e)["nudges"] for e in expiring] == [0, 0, 0]
    assert all(data(e)["expired"][0] == EXPIRED_EVENT for e in expiring)
    assert [data(e)["nudges"] for e in keeping] == [1, 1]


def test_an_expired_row_of_a_finished_execution_is_discarded_not_told() -> None:
    execution = start(chart(send_expires="30s"))
    timer = Timer.objects.get(execution=execution)
    Execution.objects.filter(pk=execution.pk).update(status="completed")
    assert firing.fire_all_due(now=timer.due + timedelta(hours=1)).outcomes == {"discarded": 1}


def test_an_operators_fire_now_delivers_however_late() -> None:
    execution = start(chart(send_expires="30s"))
    timer = Timer.objects.get(execution=execution)
    outcome = operating.fire_now(timer.pk, reason="deliver it anyway", now=timer.due + 3600 * S)
    assert outcome == "fired"
    assert data(execution)["nudges"] == 1
    assert Timer.objects.get(pk=timer.pk).expires_at is None


def test_the_expiry_travels_with_an_exported_execution() -> None:
    execution = start(chart(send_expires="30s"))
    timer = Timer.objects.get(execution=execution)
    exported = export_timers(execution, redact=False)
    assert exported[0]["expires_at"] == timer.expires_at.isoformat()
    other = start(chart())
    Timer.objects.filter(execution=other).delete()
    load_timers(other, exported)
    assert Timer.objects.get(execution=other).expires_at == timer.expires_at


def test_the_read_model_and_the_api_show_the_expiry(api: APIClient) -> None:
    execution = start(chart(send_expires="30s"))
    timer = Timer.objects.get(execution=execution)
    firing.fire_all_due(now=timer.due + 31 * S)
    shown = api.get(f"/api/timers/{timer.pk}/").json()
    assert shown["status"] == "expired" and shown["expires_at"] is not None
    assert api.get("/api/timers/", {"status": "expired"}).json()["count"] == 1


@pytest.mark.parametrize(
    ("source", "where", "says"),
    [
        (chart(chart_expires="soon"), "1:1", "ds:expires: malformed time 'soon'"),
        (chart(send_expires="0s"), "4:14", "ds:expires: '0s' must be longer than 0"),
        (chart(send_expires="1 m"), "4:14", "ds:expires: '1 m' is not a time"),
    ],
)
def test_a_bad_expiry_is_refused_at_every_door_with_its_line_and_column(
    source: str, where: str, says: str, api: APIClient, admin: Client, tmp_path: Path
) -> None:
    refused_at_every_door(source, where, says, api, admin, tmp_path)
