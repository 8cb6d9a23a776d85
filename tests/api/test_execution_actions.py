"""Every action the admin offers on executions is reachable from the API and the
``statechart`` command too (the inventory test), and the API's erase and trace: the same
service functions as the admin and the command (``statecharts.operations.erasure``,
``stepper.trace``), the same permission, the operator and the reason recorded in the
history, the refusal table's answer, a 400 with reasons for bad input."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import Permission, User
from django.urls import NoReverseMatch, reverse
from rest_framework.test import APIClient

from statecharts import stepper
from statecharts.management.commands.statechart import BY_NAME
from statecharts.models import Chart, Execution, HistoryEntry
from statecharts.models.history import Disposition
from statecharts.operations.inspection import history_row

pytestmark = pytest.mark.django_db

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0"'
SIGNUP = f"""<scxml {NS} name="signup" datamodel="ecmascript" initial="waiting">
  <datamodel><data id="email" expr="'alice@example.com'"/></datamodel>
  <state id="waiting"><transition event="finish" target="end"/></state>
  <final id="end"/>
</scxml>"""

# Every action of the statecharts app's admin (on executions, their charts and their outbox):
# where the API and the `statechart` command do the same. The key is the model and the
# admin's name: a bulk action of its list, or the URL name of an extra view of its page (the
# execution page's send and cancel forms, the chart page's start). A new admin action that is
# not here fails the inventory test below: give it an API route and a subcommand, then list
# it.
DOORS: dict[tuple[str, str], tuple[str, dict[str, Any], str]] = {
    # (model, admin name): (API URL name, its URL kwargs, the `statechart` subcommand)
    ("execution", "cancel_selected"): ("execution-cancel", {"pk": 1}, "cancel"),
    ("execution", "migrate_selected"): ("execution-migrate", {}, "migrate"),
    ("execution", "erase_selected"): ("execution-erase", {}, "erase"),
    ("execution", "trace_selected"): ("execution-trace", {"pk": 1}, "trace"),
    ("execution", "untrace_selected"): ("execution-trace", {"pk": 1}, "trace"),  # on: false
    ("execution", "statecharts_execution_send"): ("execution-send", {"pk": 1}, "send"),
    ("execution", "statecharts_execution_cancel"): ("execution-cancel", {"pk": 1}, "cancel"),
    ("chart", "statecharts_chart_start"): ("execution-list", {}, "start"),
    ("outboxmessage", "retry_selected"): ("outbox-message-retry", {"pk": 1}, "deliver"),
}
# The URL names Django's admin gives every model admin (its own pages, not actions of ours;
# a chart's add page is `statechart load` and POST /api/charts/).
DJANGO_ADMIN_VIEWS = {"changelist", "add", "history", "delete", "change"}


def admin_actions() -> set[tuple[str, str]]:
    """The bulk actions and the extra page views of every admin of the statecharts app's
    models, read from the registered admins."""
    found: set[tuple[str, str]] = set()
    for model, model_admin in admin.site._registry.items():
        if model._meta.app_label != "statecharts":
            continue
        name = model._meta.model_name
        actions = model_admin.actions or ()
        found |= {(name, action) for action in actions if action != "delete_selected"}
        for pattern in model_admin.get_urls():
            url_name = pattern.name or ""
            view = url_name.removeprefix(f"statecharts_{name}_")
            if view != url_name and view not in DJANGO_ADMIN_VIEWS:
                found.add((name, url_name))
    return found


def test_every_admin_action_on_executions_has_an_api_route_and_a_command() -> None:
    found = admin_actions()
    assert {("execution", "erase_selected"), ("outboxmessage", "retry_selected")} <= found
    missing = found - set(DOORS)
    assert not missing, f"admin actions with no API route or command listed: {missing}"
    assert not set(DOORS) - found, "DOORS lists an action the admin no longer has"
    api = APIClient()
    api.force_authenticate(User.objects.create_superuser("root", password="pw"))
    for name, (url_name, kwargs, subcommand) in DOORS.items():
        try:
            url = reverse(f"statecharts_api:{url_name}", kwargs=kwargs)
        except NoReverseMatch:
            pytest.fail(f"{name}: the API has no route {url_name}")
        allowed = api.options(url)["Allow"]
        assert "POST" in allowed, f"{name}: {url} takes no POST ({allowed})"
        assert subcommand in BY_NAME, f"{name}: no `statechart {subcommand}`"


def test_the_inventory_sees_an_action_added_to_the_admin(monkeypatch: pytest.MonkeyPatch) -> None:
    executions = admin.site._registry[Execution]
    monkeypatch.setattr(executions, "actions", [*executions.actions, "export_selected"])
    assert ("execution", "export_selected") in admin_actions() - set(DOORS)


def test_the_api_and_the_command_name_each_action_in_the_schema(client_with: Any) -> None:
    schema = client_with("statecharts.view_execution").get("/api/schema/", {"format": "json"})
    paths = json.loads(schema.content)["paths"]
    for url_name, kwargs, _ in DOORS.values():
        path = reverse(f"statecharts_api:{url_name}", kwargs=kwargs).replace("/1/", "/{id}/")
        assert "post" in paths[path], path
    erase = paths["/api/executions/erase/"]["post"]
    assert {"200", "400", "403", "409"} <= set(erase["responses"])
    trace = paths["/api/executions/{id}/trace/"]["post"]
    assert {"200", "400", "403", "404"} <= set(trace["responses"])


# ---- fixtures ---------------------------------------------------------------------------------


def user_with(name: str, *perms: str) -> User:
    user = User.objects.create_user(name, password="pw")
    for perm in perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    return user


@pytest.fixture
def client_with() -> Any:
    made = iter(range(1000))

    def make(*perms: str, name: str = "") -> APIClient:
        client = APIClient()
        client.force_authenticate(user_with(name or f"user{next(made)}", *perms))
        return client

    return make


ERASER = ("statecharts.view_execution", "statecharts.erase_execution")
TRACER = ("statecharts.view_execution", "statecharts.change_execution")


def finished(key: str | None = None) -> Execution:
    execution = stepper.start(Chart.objects.load(SIGNUP), business_key=key)
    stepper.send(execution, "finish")
    execution.refresh_from_db()
    assert execution.status == "completed"
    return execution


def erase(client: APIClient, **body: Any) -> Any:
    return client.post("/api/executions/erase/", body, format="json")


# ---- erase ------------------------------------------------------------------------------------


def test_erase_records_the_user_and_the_reason_in_the_history(client_with: Any) -> None:
    execution = finished(key="alice")
    client = client_with(*ERASER, name="dpo")
    response = client.post(
        "/api/executions/erase/",
        {"executions": [execution.pk], "reason": "request #881"},
        format="json",
        HTTP_X_REQUEST_ID="erase-1",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["executions"] == [execution.pk] and body["dry_run"] is False
    assert body["rows"]["executions"] == 1 and body["summary"].startswith("erased 1 execution")
    execution.refresh_from_db()
    assert execution.erased is not None and execution.business_key is None
    entry = HistoryEntry.objects.filter(execution=execution).order_by("-seq").first()
    assert entry is not None and entry.disposition == Disposition.ERASED
    assert entry.reason == "personal data erased by dpo: request #881"
    assert entry.caller_context is not None
    assert entry.caller_context["door"] == "api" and entry.caller_context["request_id"] == "erase-1"
    assert entry.caller_context["user"]["username"] == "dpo"


def test_erase_refuses_running_executions_unless_cancel(client_with: Any) -> None:
    running = stepper.start(Chart.objects.load(SIGNUP), business_key="bob")
    client = client_with(*ERASER)
    refused = erase(client, business_key="bob", reason="gdpr")
    assert refused.status_code == 409
    assert refused.json()["reason"] == "refused"
    assert refused.json()["detail"].startswith("Nothing was erased: 1 execution(s) may still step")
    running.refresh_from_db()
    assert running.erased is None and running.business_key == "bob"

    done = erase(client, business_key="bob", reason="gdpr", cancel=True)
    assert done.status_code == 200, done.content
    assert done.json()["cancelled"] == [running.pk]
    running.refresh_from_db()
    assert running.status == "cancelled" and running.erased is not None


def test_a_dry_run_says_what_would_be_erased_and_erases_nothing(client_with: Any) -> None:
    running = stepper.start(Chart.objects.load(SIGNUP), business_key="carol")
    answer = erase(client_with(*ERASER), business_key="carol", chart="signup", dry_run=True)
    assert answer.status_code == 200, answer.content
    assert answer.json()["executions"] == [running.pk]
    assert answer.json()["running"] == [running.pk]
    running.refresh_from_db()
    assert running.erased is None and running.status == "active"


def test_erase_needs_its_own_permission(client_with: Any) -> None:
    execution = finished()
    change_only = client_with("statecharts.view_execution", "statecharts.change_execution")
    assert erase(change_only, executions=[execution.pk]).status_code == 403
    execution.refresh_from_db()
    assert execution.erased is None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "executions"),
        ({"executions": [1], "business_key": "x"}, "executions"),
        ({"executions": [1], "chart": "signup"}, "chart"),
        ({"executions": []}, "executions"),
        ({"executions": [0]}, "executions"),
        ({"executions": ["x"]}, "executions"),
        ({"executions": list(range(1, 502))}, "executions"),
        ({"executions": [2**63]}, "executions"),
        ({"business_key": "a\x00b"}, "business_key"),
        ({"business_key": "x", "chart": "no-such-chart"}, "chart"),
        ({"executions": [1], "reason": "a\x00b"}, "reason"),
        ({"executions": [1], "reason": "x" * 1001}, "reason"),
        ({"executions": [1], "cancel": "maybe"}, "cancel"),
        ({"executions": [1], "erase_everything": True}, "erase_everything"),
    ],
)
def test_bad_erase_requests_are_400s_naming_the_field(
    client_with: Any, body: dict[str, Any], field: str
) -> None:
    Chart.objects.load(SIGNUP)
    response = erase(client_with(*ERASER), **body)
    assert response.status_code == 400, response.content
    assert field in response.json()


def test_the_reason_is_refused_in_the_gates_words(client_with: Any) -> None:
    execution = finished()
    response = erase(client_with(*ERASER), executions=[execution.pk], reason="a\x00b")
    gate = stepper.ErasureRequest(reason="a\x00b")
    with pytest.raises(ValueError) as refused:
        stepper.admit(gate)
    assert response.json()["reason"] == [refused.value.problems[0].message]  # type: ignore[attr-defined]


# ---- trace ------------------------------------------------------------------------------------


def test_trace_turns_tracing_on_and_off_under_the_lock(client_with: Any) -> None:
    execution = stepper.start(Chart.objects.load(SIGNUP))
    client = client_with(*TRACER)
    url = f"/api/executions/{execution.pk}/trace/"
    first = client.post(url, {}, format="json")
    assert first.status_code == 200, first.content
    assert first.json() == {"execution": execution.pk, "tracing": True, "changed": True}
    again = client.post(url, {"on": True}, format="json")
    assert again.json() == {"execution": execution.pk, "tracing": True, "changed": False}
    execution.refresh_from_db()
    assert execution.tracing is True
    stepper.send(execution, "finish")  # its next step keeps the core's trace
    entry = HistoryEntry.objects.filter(execution=execution).order_by("-seq").first()
    assert entry is not None and history_row(entry).trace

    off = client.post(url, {"on": False}, format="json")
    assert off.json() == {"execution": execution.pk, "tracing": False, "changed": True}
    execution.refresh_from_db()
    assert execution.tracing is False


def test_trace_needs_change_and_answers_bad_input_and_unknown_executions(
    client_with: Any,
) -> None:
    execution = stepper.start(Chart.objects.load(SIGNUP))
    url = f"/api/executions/{execution.pk}/trace/"
    reader = client_with("statecharts.view_execution")
    assert reader.post(url, {}, format="json").status_code == 403
    client = client_with(*TRACER)
    assert client.post(url, {"on": "maybe"}, format="json").status_code == 400
    assert "of" in client.post(url, {"of": True}, format="json").json()
    assert client.post("/api/executions/999999/trace/", {}, format="json").status_code == 404
    execution.refresh_from_db()
    assert execution.tracing is False
