"""What a client or a chart names a row by is checked before it reaches the database.

- A chart reference in the API is an integer id or a name: a JSON number with a fraction or
  an exponent (``1.5``, ``1e400``) is a 400 with a reason, never rounded to another chart
  and never an ``OverflowError``.
- A key chart code computes from data (``<cancel sendidexpr>``, ``<send targetexpr>``, a
  route's event name) may hold a NUL, which PostgreSQL's text cannot: the lookup finds
  nothing (nothing to cancel; ``error.communication`` for an unknown target), and what is
  written is written in the JSON columns' NUL escape, on both databases.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core import mail
from django.test import override_settings
from rest_framework.test import APIClient

from routes.models import RouteDelivery
from statecharts import stepper
from statecharts.models import Chart, Execution, OutboxMessage
from statecharts.models.fields import ESCAPE
from statecharts.operations.inspection import datamodel_of
from timers import firing
from timers.models import Timer

pytestmark = pytest.mark.django_db

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
NUL_KEY = "x\u0000"
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def load(body: str, name: str) -> Chart:
    return Chart.objects.load(
        f'<scxml {NS} name="{name}"><datamodel><data id="errors" expr="[]"/></datamodel>'
        f'<state id="a">{body}<transition event="error.*">'
        '<assign location="errors" expr="errors.concat([_event.name])"/></transition>'
        "</state></scxml>"
    )


def errors(execution: Execution) -> list[Any]:
    execution.refresh_from_db()
    values = datamodel_of(execution)
    assert isinstance(values, dict)
    return list(values["errors"])


# ---- chart references -------------------------------------------------------------------


@pytest.mark.parametrize("number", ["1e400", "-1e400", "{pk}.5", "{pk}.0", "{pk}e0"])
def test_a_chart_reference_that_is_not_an_integer_is_a_400_with_a_reason(
    api: APIClient, number: str
) -> None:
    chart = load("", "one")
    body = f'{{"chart": {number.format(pk=chart.pk)}}}'
    response = api.post("/api/executions/", body, content_type="application/json")
    assert response.status_code == 400
    assert "a chart id is an integer (such as 7), not the number" in response.json()["chart"][0]
    assert not Execution.objects.exists()


def test_a_chart_id_past_64_bits_is_a_400_and_an_integer_id_still_starts(api: APIClient) -> None:
    chart = load("", "one")
    too_big = api.post("/api/executions/", {"chart": 2**64}, format="json")
    assert too_big.status_code == 400
    assert "a chart id is at most 9223372036854775807" in too_big.json()["chart"][0]
    started = api.post("/api/executions/", {"chart": chart.pk}, format="json")
    assert started.status_code == 201 and started.json()["chart"] == chart.pk


def test_migrating_executions_named_by_ids_past_64_bits_is_a_400(api: APIClient) -> None:
    chart = load("", "one")
    response = api.post(
        "/api/executions/migrate/",
        {"chart": chart.pk, "executions": [2**64], "dry_run": True},
        format="json",
    )
    assert response.status_code == 400
    assert "executions" in response.json()


# ---- keys computed by chart code ----------------------------------------------------------


def test_a_cancel_whose_send_id_holds_nul_cancels_nothing(api: APIClient) -> None:
    chart = load(
        '<onentry><send id="x" event="later" delay="1h"/></onentry>'
        '<transition event="stop"><cancel sendidexpr="_event.data.v"/></transition>',
        "canceller",
    )
    execution = Execution.objects.start(chart)
    response = api.post(
        f"/api/executions/{execution.pk}/send/",
        json.dumps({"name": "stop", "data": {"v": NUL_KEY}}),
        content_type="application/json",
    )
    assert response.status_code == 200
    assert response.json()["status"] == "active"
    assert list(Timer.objects.values_list("send_id", "status")) == [("x", "pending")]
    assert errors(execution) == []


def test_a_send_to_a_session_id_holding_nul_is_error_communication(api: APIClient) -> None:
    chart = load(
        '<transition event="tell"><send targetexpr="\'#_scxml_\' + _event.data.v" '
        'event="hello"/></transition>',
        "teller",
    )
    execution = Execution.objects.start(chart)
    response = api.post(
        f"/api/executions/{execution.pk}/send/",
        json.dumps({"name": "tell", "data": {"v": NUL_KEY}}),
        content_type="application/json",
    )
    assert response.status_code == 200
    assert errors(execution) == ["error.communication"]
    assert not OutboxMessage.objects.exists()


def test_a_timer_whose_event_cancels_by_a_nul_send_id_fires_once() -> None:
    """The key comes from a timer's event: the timer fires (no retry), nothing is cancelled."""
    chart = load(
        '<onentry><send id="x" event="later" delay="1h"/>'
        """<send event="stop" delay="1s"><param name="v" expr="'x\\u0000'"/>"""
        "</send></onentry>"
        '<transition event="stop"><cancel sendidexpr="_event.data.v"/></transition>',
        "timed_canceller",
    )
    execution = stepper.start(chart, now=T0)
    report = firing.fire_all_due(now=T0 + timedelta(seconds=1))
    assert report.fired == 1
    assert sorted(Timer.objects.values_list("send_id", "status", "attempts")) == [
        ("send_2", "fired", 0),
        ("x", "pending", 0),
    ]
    execution.refresh_from_db()
    assert (execution.status, execution.steps) == ("active", 2)


def test_lookups_by_keys_holding_nul_find_nothing_and_keep_the_others() -> None:
    execution = Execution.objects.start(load("", "plain"))
    sessions = Execution.objects.filter(session_id__in=[NUL_KEY, execution.session_id])
    assert list(sessions) == [execution]
    assert not Execution.objects.filter(session_id__in=[NUL_KEY]).exists()
    assert not Execution.objects.filter(session_id=NUL_KEY).exists()
    assert Timer.objects.filter(send_id=NUL_KEY).update(attempts=9) == 0


@pytest.fixture
def email_route() -> Iterator[None]:
    from django.conf import settings

    routes = {
        "email": {
            "ROUTE": "routes.builtins.EmailRoute",
            "TYPES": ["email"],
            "OPTIONS": {"allowed_domains": ["example.com"], "from_email": "robot@example.com"},
        }
    }
    with override_settings(
        STATECHARTS={**settings.STATECHARTS, "ROUTES": routes},
        EMAIL_BACKEND="django.core.mail.backends.locmem.EmailBackend",
    ):
        yield


def test_a_route_send_whose_event_name_holds_nul_is_delivered_once(email_route: None) -> None:
    chart = load(
        '<transition event="go"><send type="email" target="bob@example.com" '
        "eventexpr=\"'e' + _event.data.v\"><param name=\"subject\" expr=\"'hi'\"/>"
        "<param name=\"body\" expr=\"'b'\"/></send></transition>",
        "mailer",
    )
    execution = Execution.objects.start(chart)
    execution.send("go", {"v": NUL_KEY})
    assert list(OutboxMessage.objects.values_list("status", "attempts")) == [("delivered", 0)]
    assert [m.to for m in mail.outbox] == [["bob@example.com"]]
    # The ledger's descriptive column holds it in the JSON columns' escape.
    assert list(RouteDelivery.objects.values_list("event_name", "status")) == [
        (f"ex{ESCAPE}0", "delivered")
    ]
    assert errors(execution) == []
