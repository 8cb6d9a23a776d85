"""The browsable API (DRF's HTML pages) a person opens in a browser: the send and cancel
addresses describe their action on a GET (never "405 Method Not Allowed") with the form or
button under it, an empty JSON field is drawn empty (not ``null``), and an execution links to
its chart."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.test import Client

from statecharts.models import Chart, Execution

SIGNUP = Path(__file__).resolve().parents[2] / "docs" / "examples" / "signup.scxml"


@pytest.fixture
def execution() -> Execution:
    return Execution.objects.start(Chart.objects.load(SIGNUP.read_text()), business_key="ada")


def html(client: Client, url: str) -> tuple[int, str]:
    response = client.get(url, HTTP_ACCEPT="text/html")
    return response.status_code, response.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize("action", ["send", "cancel"])
def test_the_send_and_cancel_pages_open_on_what_they_do(
    admin_client: Client, execution: Execution, action: str
) -> None:
    status, body = html(admin_client, f"/api/executions/{execution.pk}/{action}/")
    assert status == 200 and "Method Not Allowed" not in body
    assert "to this address" in body  # how to act: the POST
    assert "signup v1 · ada" in body and "status: active; in state invited" in body
    assert "Executions: one durable run" not in body  # the list's description is not shown
    assert f'action="/api/executions/{execution.pk}/{action}/"' in body  # the form under it
    # A GET changes nothing.
    execution.refresh_from_db()
    assert execution.status == "active" and execution.steps == 1


@pytest.mark.django_db
def test_empty_json_fields_are_drawn_empty_not_null(
    admin_client: Client, execution: Execution
) -> None:
    for url in ("/api/executions/", f"/api/executions/{execution.pk}/send/"):
        _, body = html(admin_client, url)
        [data] = re.findall(r'<textarea name="data"[^>]*>([^<]*)</textarea>', body)
        assert data == "", url


@pytest.mark.django_db
def test_an_execution_links_to_its_chart(admin_client: Client, execution: Execution) -> None:
    detail = admin_client.get(f"/api/executions/{execution.pk}/").json()
    assert detail["chart"] == execution.chart_id  # the id stays, for the clients reading it
    assert detail["chart_url"] == f"http://testserver/api/charts/{execution.chart_id}/"
    _, body = html(admin_client, f"/api/executions/{execution.pk}/")
    assert f'href="http://testserver/api/charts/{execution.chart_id}/"' in body
