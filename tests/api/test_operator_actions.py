"""The API's one path for an operator's action on an app's row (``statecharts.api.operating``),
as the timers, route timers, route deliveries and invocations viewsets use it: what every one
of them answers alike, before the app's own function runs (each app's tests cover its
actions: tests/timers/test_operating_doors.py, tests/routes/test_route_delivery_marks.py,
tests/invocations/test_invocation_operating.py)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.urls import resolve
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

# One action of each viewset built on statecharts.api.operating.OperatorActions.
ACTIONS = [
    "/api/timers/{id}/cancel/",
    "/api/route-timers/{id}/fire-now/",
    "/api/route-deliveries/{id}/mark-failed/",
    "/api/invocations/{id}/retry-now/",
]


@pytest.fixture
def api() -> APIClient:
    client = APIClient()
    client.force_authenticate(User.objects.create_superuser("root", password="pw"))
    return client


@pytest.mark.parametrize("url", ACTIONS)
def test_a_row_id_that_is_no_number_is_a_404(api: APIClient, url: str) -> None:
    response = api.post(url.format(id="abc"), {"reason": "checked"}, format="json")
    assert response.status_code == 404


@pytest.mark.parametrize("url", ACTIONS)
def test_a_missing_row_is_the_refusal_tables_404(api: APIClient, url: str) -> None:
    response = api.post(url.format(id=999999), {"reason": "checked"}, format="json")
    assert response.status_code == 404
    assert response.json()["reason"] == "not_found"


@pytest.mark.parametrize("url", ACTIONS)
def test_no_reason_is_a_400_naming_it(api: APIClient, url: str) -> None:
    response = api.post(url.format(id=1), {}, format="json")
    assert response.status_code == 400
    assert "reason" in response.json()


@pytest.mark.parametrize("url", ACTIONS)
def test_a_bad_caller_context_header_is_a_400_naming_it(api: APIClient, url: str) -> None:
    response = api.post(
        url.format(id=999999),
        {"reason": "checked"},
        format="json",
        HTTP_X_CALLER_CONTEXT="[not an object",
    )
    assert response.status_code == 400
    assert "X-Caller-Context" in response.json()


@pytest.mark.parametrize("url", ACTIONS)
def test_the_actions_never_run_in_a_request_transaction(url: str) -> None:
    # Each action commits its own transaction (durable): ATOMIC_REQUESTS must not wrap it.
    assert "default" in resolve(url.format(id=1)).func._non_atomic_requests
