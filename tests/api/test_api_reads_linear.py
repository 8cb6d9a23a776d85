"""The API's reads of an execution stay linear in its chart (issue 28: the detail and the
list with ``?fields=available_events`` took 1.9 s -> 52 s for 2,000 -> 10,000 guarded
transitions, and a list page holding such an execution hung for minutes). Counted, not
timed: the calls ``sys.setprofile`` sees in the whole request, as the chart doubles
(tests/core/test_availability_scaling.py counts the core alone)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from statecharts import stepper
from statecharts.models import Chart, Execution
from tests.core.test_availability_scaling import (
    CALLS_PER_TRANSITION,
    DOOR_SHAPES,
    DOOR_SIZES,
    counting,
    prefix,
)

pytestmark = pytest.mark.django_db

SHAPES = DOOR_SHAPES
SIZES = DOOR_SIZES
# Calls of a request whatever the chart (Django, DRF, the row's queries), for the cap that
# stops a quadratic request before it runs long.
FIXED = 400_000


@pytest.fixture
def client() -> APIClient:
    client = APIClient()
    client.force_authenticate(User.objects.create_superuser("root", password="pw"))
    return client


def started(source: str, name: str, rows: int = 1) -> list[Execution]:
    chart = Chart.objects.load(source.replace("<scxml ", f'<scxml name="{name}" ', 1))
    return [stepper.start(chart) for _ in range(rows)]


def calls(client: APIClient, url: str, params: dict[str, Any], cap: int) -> tuple[int, Any]:
    client.get(url, params)  # warm: the compiled chart, the sandbox's checks of each text
    with counting(cap) as counts:
        response = client.get(url, params)
    assert response.status_code == 200
    return counts["calls"], response.json()


def assert_linear(calls: list[int], what: str) -> None:
    # Doubling the chart at most doubles what it adds to the request: the increase from 400
    # to 800 transitions is about twice the one from 200 to 400 (four times if quadratic).
    assert calls[2] - calls[1] <= 2.5 * (calls[1] - calls[0]), (what, calls)


@pytest.mark.parametrize("shape", SHAPES)
def test_the_detail_is_linear_in_the_chart(client: APIClient, shape: str) -> None:
    counted = []
    for n in SIZES:
        (execution,) = started(SHAPES[shape](n), f"{shape}-{n}")
        count, body = calls(
            client, f"/api/executions/{execution.pk}/", {}, CALLS_PER_TRANSITION * n + FIXED
        )
        counted.append(count)
        assert body["available_events"]  # (the events were read)
    assert_linear(counted, shape)


@pytest.mark.parametrize("shape", SHAPES)
def test_the_list_with_available_events_is_linear_in_the_charts(
    client: APIClient, shape: str
) -> None:
    counted = []
    for n in SIZES:
        executions = started(SHAPES[shape](n), f"{shape}-{n}", rows=2)
        query = {"fields": "available_events", "chart": executions[0].chart_id}
        count, body = calls(client, "/api/executions/", query, 2 * CALLS_PER_TRANSITION * n + FIXED)
        counted.append(count)
        assert {row["id"] for row in body["results"]} == {e.pk for e in executions}
        assert all(row["available_events"] for row in body["results"])
    assert_linear(counted, shape)


def test_a_cut_short_list_says_so_and_the_rest_is_whole(client: APIClient) -> None:
    (execution,) = started(prefix(2000), "prefix")
    events = client.get(f"/api/executions/{execution.pk}/").json()["available_events"]
    assert len(events) == 1001  # "a" and the 1,000 names under it, all of them
    assert all(event["availability"] == "disabled" for event in events)
    assert events[1]["truncated"] is False and len(events[1]["transitions"]) == 1001
    assert events[-1]["truncated"] is True and len(events[-1]["transitions"]) < 1001
