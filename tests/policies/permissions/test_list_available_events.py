"""The API's executions list carries ``available_events`` on request
(``?fields=available_events``), for the rows of the page only, without a query per row
(docs/permissions-and-available-events.md, docs/admin-and-api.md)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from statecharts import stepper
from statecharts.models import Chart, Execution
from statecharts.policies import availability
from tests.policies.permissions.test_event_permissions import LOAN, OPERATE, RULES, api, user_with

pytestmark = pytest.mark.django_db


@pytest.fixture
def loans() -> Any:
    with override_settings(STATECHARTS=RULES):
        chart = Chart.objects.load(LOAN)
        yield [stepper.start(chart) for _ in range(5)]


def test_the_plain_list_has_no_available_events(loans: list[Execution]) -> None:
    rows = api(user_with("clerk", *OPERATE)).get("/api/executions/").json()["results"]
    assert len(rows) == 5 and all("available_events" not in row for row in rows)


def test_fields_available_events_gives_each_row_the_details_list_for_the_user(
    loans: list[Execution],
) -> None:
    loans[0].send("reject")  # finished: it can do nothing
    client = api(user_with("clerk", *OPERATE))
    rows = client.get("/api/executions/", {"fields": "available_events"}).json()["results"]
    by_id = {row["id"]: row["available_events"] for row in rows}
    assert by_id[loans[0].pk] == []
    detail = client.get(f"/api/executions/{loans[1].pk}/").json()["available_events"]
    assert by_id[loans[1].pk] == detail
    # For this user: approve and reject need what the clerk has not.
    assert [e["name"] for e in by_id[loans[1].pk]] == ["escalate", "comment"]


def test_only_the_rows_of_the_page_are_computed(
    loans: list[Execution], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real = availability.available_events

    def counting(execution: Execution, **options: Any) -> Any:
        calls.append(execution.pk)
        return real(execution, **options)

    monkeypatch.setattr(availability, "available_events", counting)
    client = api(user_with("clerk", *OPERATE))
    body = client.get(
        "/api/executions/", {"fields": "available_events", "page_size": 2}
    ).json()
    assert body["count"] == 5 and len(body["results"]) == 2
    assert sorted(calls) == sorted(row["id"] for row in body["results"])


def test_the_queries_do_not_grow_with_the_rows(loans: list[Execution]) -> None:
    client = api(user_with("clerk", *OPERATE))
    client.get("/api/executions/", {"fields": "available_events"})  # warm caches

    def queries(page_size: int) -> int:
        with CaptureQueriesContext(connection) as captured:
            response = client.get(
                "/api/executions/", {"fields": "available_events", "page_size": page_size}
            )
        assert len(response.json()["results"]) == page_size
        return len(captured)

    assert queries(5) == queries(1)


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        ("subject", "'subject' is not a field the list adds; one of: available_events"),
        ("available_events,nope", "'nope' is not a field the list adds"),
        ("x" * 201, "at most 200 characters"),
    ],
)
def test_an_unknown_field_is_a_400(loans: list[Execution], given: str, problem: str) -> None:
    response = api(user_with("clerk", *OPERATE)).get("/api/executions/", {"fields": given})
    assert response.status_code == 400
    assert problem in response.json()["fields"][0]


def test_the_parameter_is_in_the_schema() -> None:
    import yaml

    client = api(user_with("reader", *OPERATE))
    schema = yaml.safe_load(client.get("/api/schema/").content)
    parameters = schema["paths"]["/api/executions/"]["get"]["parameters"]
    fields = next(p for p in parameters if p["name"] == "fields")
    assert fields["schema"]["enum"] == ["available_events"]
