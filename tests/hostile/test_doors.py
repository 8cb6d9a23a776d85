"""Hostile input through every door: the API, the admin's forms, ``manage.py statechart`` and
the Python API each answer with a clear error (400, a form error, one-line CommandError, an
InvalidInput naming the path), never a 500 or a traceback, and nothing is written."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from statecharts import stepper
from statecharts.core.errors import StatechartError
from statecharts.core.events import EXTERNAL, Event
from statecharts.drivers.durable import Input
from statecharts.inspection import TOO_DEEP, datamodel_of, inspect
from statecharts.models import Chart, Execution, HistoryEntry
from statecharts.validation import InvalidInput

pytestmark = pytest.mark.django_db

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0"'
# A loan whose approval an outsider would like to flip; it answers error.* and done.* events.
LOAN = f"""<scxml {NS} name="loan" datamodel="ecmascript" initial="review">
  <datamodel><data id="approved" expr="false"/><data id="note" expr="null"/></datamodel>
  <state id="review">
    <transition event="note"><assign location="note" expr="_event.data"/></transition>
    <transition event="error" target="failed"/>
    <transition event="done" target="failed"/>
  </state>
  <final id="failed"/>
</scxml>"""
CODE = {"$sc": "function", "source": "(function(){approved=true;return 0})()"}


def deep_text(levels: int) -> str:
    return "[" * levels + "]" * levels


# Deeper than any Python's JSON decoder reads (3.11 stops near 1,000 levels, 3.13 between
# 5,000 and 10,000), and well under the input size bound.
UNREADABLE = deep_text(100_000)


def deep_value(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"a": value}
    return value


@pytest.fixture
def chart() -> Chart:
    return Chart.objects.load(LOAN)


@pytest.fixture
def loan(chart: Chart) -> Execution:
    return Execution.objects.start(chart, business_key="loan-1")


@pytest.fixture
def api() -> APIClient:
    client = APIClient()
    client.force_authenticate(User.objects.create_superuser("root", password="pw"))
    return client


@pytest.fixture
def admin(client: Client) -> Client:
    client.force_login(User.objects.create_superuser("admin", password="pw"))
    return client


def approved(execution: Execution) -> Any:
    execution.refresh_from_db()
    values = datamodel_of(execution)
    assert isinstance(values, dict)
    return values["approved"]


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("statechart", *args, stdout=out)
    return out.getvalue()


def command_error(*args: str) -> str:
    with pytest.raises(CommandError) as refused:
        run(*args)
    message = str(refused.value)
    assert "\n" not in message and "Traceback" not in message  # one line
    return message


def admin_messages(response: Any) -> str:
    return " ".join(str(message) for message in response.context["messages"])


# ---- code from outside never runs ---------------------------------------------------------------


def test_the_admin_send_form_refuses_code_and_the_datamodel_is_unchanged(
    admin: Client, loan: Execution
) -> None:
    url = reverse("admin:statecharts_execution_send", args=[loan.pk])
    response = admin.post(url, {"name": "note", "data": json.dumps(CODE)}, follow=True)
    assert response.status_code == 200
    assert "the tag 'function' is not accepted here" in admin_messages(response)
    assert approved(loan) is False and loan.steps == 1


def test_code_is_refused_by_every_other_door_too(
    api: APIClient, chart: Chart, loan: Execution
) -> None:
    url = f"/api/executions/{loan.pk}/send/"
    sent = api.post(url, {"name": "note", "data": CODE}, format="json")
    assert sent.status_code == 400 and "not accepted" in sent.json()["data"][0]
    with pytest.raises(InvalidInput, match=r"data: the tag 'function'"):
        loan.send("note", CODE)
    with pytest.raises(InvalidInput, match=r"data\.note: the tag 'function'"):
        Execution.objects.start(chart, data={"note": CODE})
    refused = command_error("send", str(loan.pk), "note", "--data", json.dumps(CODE))
    assert "the tag 'function'" in refused
    assert approved(loan) is False and loan.steps == 1
    assert Execution.objects.count() == 1


def test_the_platform_keeps_its_own_tags(loan: Execution) -> None:
    # What stepper.feed is given is the platform's own encoding (a replayed history, a timer,
    # an outbox row): it is not checked as outside data.
    stepper.feed(loan.pk, Input.external(Event("note", EXTERNAL, {"$sc": "map", "v": []})))
    loan.refresh_from_db()
    assert loan.steps == 2 and loan.status == "active"


# ---- nesting ------------------------------------------------------------------------------------


def test_form_encoded_data_nested_ten_thousand_levels_is_a_400(
    api: APIClient, chart: Chart, loan: Execution
) -> None:
    sent = api.post(f"/api/executions/{loan.pk}/send/", {"name": "note", "data": UNREADABLE})
    assert sent.status_code == 400
    assert sent.json()["data"] == ["data: nested too deeply to read"]
    started = api.post("/api/executions/", {"chart": chart.pk, "data": UNREADABLE})
    assert started.status_code == 400
    loan.refresh_from_db()
    assert loan.steps == 1 and Execution.objects.count() == 1


def test_metadata_nested_600_levels_is_a_400_and_nothing_is_created(
    api: APIClient, chart: Chart
) -> None:
    response = api.post(
        "/api/executions/", {"chart": chart.pk, "metadata": deep_value(600)}, format="json"
    )
    assert response.status_code == 400
    [reason] = response.json()["metadata"]
    assert reason.startswith("metadata.a.a.a") and "nested more than 64 levels deep" in reason
    assert Execution.objects.count() == 0
    with pytest.raises(InvalidInput, match="metadata"):
        stepper.start(chart, metadata=deep_value(600))
    assert Execution.objects.count() == 0


def test_an_execution_stored_with_deep_metadata_still_shows_on_every_page(
    api: APIClient, admin: Client, loan: Execution
) -> None:
    # A row written before input was bounded: the read model shows it, cut at a depth.
    Execution.objects.filter(pk=loan.pk).update(metadata=deep_value(600), donedata=deep_value(600))
    detail = api.get(f"/api/executions/{loan.pk}/")
    assert detail.status_code == 200
    assert TOO_DEEP in json.dumps(detail.json()["metadata"])
    page = admin.get(reverse("admin:statecharts_execution_change", args=[loan.pk]))
    assert page.status_code == 200 and TOO_DEEP in page.content.decode()
    assert TOO_DEEP in run("show", str(loan.pk), "--json")
    loan.refresh_from_db()
    assert TOO_DEEP in json.dumps(inspect(loan).document())


def test_the_admin_forms_answer_nan_and_deep_data_with_a_form_error(
    admin: Client, chart: Chart, loan: Execution
) -> None:
    send = reverse("admin:statecharts_execution_send", args=[loan.pk])
    start = reverse("admin:statecharts_chart_start", args=[chart.pk])
    cases = [
        (send, {"name": "note", "data": "NaN"}, "NaN is not JSON"),
        (send, {"name": "note", "data": "[1e999]"}, "data[0]: inf is not a finite number"),
        (send, {"name": "note", "data": UNREADABLE}, "nested too deeply to read"),
        (send, {"name": "note", "data": json.dumps(deep_value(100))}, "more than 64 levels"),
        (start, {"data": '{"note": NaN}'}, "NaN is not JSON"),
        (start, {"data": UNREADABLE}, "nested too deeply to read"),
        (start, {"data": '{"nope": 1}'}, "not a top-level <data> id of this chart: nope"),
        (start, {"data": "", "business_key": "k" * 201}, "at most 200 characters"),
    ]
    for url, body, message in cases:
        response = admin.post(url, body, follow=True)
        assert response.status_code == 200, body
        assert message in admin_messages(response), body
    loan.refresh_from_db()
    assert loan.steps == 1 and Execution.objects.count() == 1


def test_the_command_answers_nan_and_deep_data_with_one_line(chart: Chart, loan: Execution) -> None:
    pk = str(loan.pk)
    assert "NaN is not JSON" in command_error("send", pk, "note", "--data", "NaN")
    assert "nested too deeply to read" in command_error("send", pk, "note", "--data", UNREADABLE)
    assert "more than 64 levels" in command_error(
        "send", pk, "note", "--data", json.dumps(deep_value(100))
    )
    assert "data.note: inf is not a finite number" in command_error(
        "start", str(chart.pk), "--data", '{"note": 1e999}'
    )
    assert "NaN is not JSON" in command_error("start", str(chart.pk), "--data", '{"note": NaN}')
    assert "nested too deeply" in command_error("start", str(chart.pk), "--data", UNREADABLE)
    loan.refresh_from_db()
    assert loan.steps == 1 and Execution.objects.count() == 1


# ---- text that does not fit -------------------------------------------------------------------


def test_a_lone_surrogate_in_event_data_is_a_400(api: APIClient, loan: Execution) -> None:
    body = '{"name": "note", "data": {"text": "\\ud800"}}'
    response = api.generic(
        "POST", f"/api/executions/{loan.pk}/send/", body, content_type="application/json"
    )
    assert response.status_code == 400
    assert response.json()["data"] == [
        "data.text: a string with a lone UTF-16 surrogate is not text"
    ]
    loan.refresh_from_db()
    assert loan.steps == 1


def test_a_chart_named_longer_than_its_column_is_refused_at_every_door(
    api: APIClient, admin: Client, tmp_path: Any
) -> None:
    # Refused by whichever check meets it first (the core's load check reports it under
    # source, the doors' column check under name): never a DataError on PostgreSQL.
    source = LOAN.replace('name="loan"', f'name="{"n" * 201}"')
    loaded = api.post("/api/charts/", {"source": source}, format="json")
    assert loaded.status_code == 400
    assert "201 characters long" in json.dumps(loaded.json())
    add = reverse("admin:statecharts_chart_add")
    page = admin.post(add, {"source": source, "name": "", "version": ""})
    assert page.status_code == 200 and "201 characters long" in page.content.decode()
    path = tmp_path / "long.scxml"
    path.write_text(source)
    with pytest.raises(CommandError, match="201 characters long"):  # (a chart's problem list)
        run("load", str(path))
    assert "--version is 101 characters long" in command_error(
        "load", str(path), "--name", "x", "--version", "v" * 101
    )
    with pytest.raises(StatechartError, match="201 characters long"):
        Chart.objects.load(source)
    with pytest.raises(InvalidInput, match="version: is 101 characters long"):
        Chart.objects.load(LOAN, version="v" * 101)
    assert Chart.objects.count() == 0


def test_a_timer_filter_beyond_64_bits_is_a_400(api: APIClient) -> None:
    response = api.get("/api/timers/", {"execution": "99999999999999999999999"})
    assert response.status_code == 400
    assert "execution" in response.json()
    assert api.get("/api/timers/", {"execution": str(2**63 - 1)}).status_code == 200


# ---- reserved event names ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["error.execution", "error", "done.state.review"])
def test_reserved_event_names_are_refused_from_outside_at_every_door(
    api: APIClient, admin: Client, loan: Execution, name: str
) -> None:
    sent = api.post(f"/api/executions/{loan.pk}/send/", {"name": name}, format="json")
    assert sent.status_code == 400
    assert "reserved for the platform's own events" in sent.json()["name"][0]
    url = reverse("admin:statecharts_execution_send", args=[loan.pk])
    response = admin.post(url, {"name": name, "data": ""}, follow=True)
    assert "reserved for the platform's own events" in admin_messages(response)
    assert "reserved for the platform's own events" in command_error("send", str(loan.pk), name)
    with pytest.raises(InvalidInput, match="reserved"):
        loan.send(name)
    loan.refresh_from_db()
    assert (loan.status, loan.steps) == ("active", 1)


def test_the_platform_still_delivers_reserved_names_between_executions(chart: Chart) -> None:
    sender_chart = Chart.objects.load(
        f"""<scxml {NS} name="sender" datamodel="ecmascript" initial="s">
          <datamodel><data id="to" expr="''"/></datamodel>
          <state id="s"><transition event="fail">
            <send event="error.custom" targetexpr="'#_scxml_' + _event.data"/>
          </transition></state>
        </scxml>"""
    )
    target = Execution.objects.start(chart)
    sender = Execution.objects.start(sender_chart)
    sender.send("fail", target.session_id)
    target.refresh_from_db()
    assert target.status == "completed"  # its <transition event="error"> took error.custom
    entry = HistoryEntry.objects.filter(execution=target).order_by("-seq").first()
    assert entry is not None and entry.input["event"]["name"] == "error.custom"


# ---- found by the property test ---------------------------------------------------------------


def test_an_admin_change_page_for_an_id_that_is_not_one_is_the_admins_not_found(
    admin: Client, loan: Execution
) -> None:
    for url in ["/admin/statecharts/execution/abc/change/", "/admin/statecharts/chart/1.5/change/"]:
        response = admin.get(url, follow=True)
        assert response.status_code == 200
        assert "doesn\u2019t exist" in admin_messages(response)  # Django's apostrophe


def test_a_chart_reference_holding_nul_is_a_400(api: APIClient, chart: Chart) -> None:
    response = api.post("/api/executions/", {"chart": "lo\x00an"}, format="json")
    assert response.status_code == 400
    assert response.json()["chart"] == ["must not contain a NUL character"]


def test_an_admin_search_or_filter_holding_nul_is_dropped_with_a_message(
    admin: Client, loan: Execution
) -> None:
    url = reverse("admin:statecharts_execution_changelist")
    response = admin.get(url, {"q": "loan\x00", "status__exact": "active"}, follow=True)
    assert response.status_code == 200
    assert "cannot hold a NUL character" in admin_messages(response)
    assert response.redirect_chain[-1][0].endswith("?status__exact=active")
    timers = admin.get(reverse("admin:timers_timer_changelist"), {"q": "\x00"}, follow=True)
    assert timers.status_code == 200 and "cannot hold a NUL" in admin_messages(timers)


def test_chart_bytes_that_are_not_utf8_are_a_chart_error_with_line_and_column() -> None:
    from statecharts.core.errors import ChartError

    source = f'<scxml {NS}>\n  <state id="caf\xe9"/>\n</scxml>'.encode("latin-1")
    with pytest.raises(ChartError) as caught:
        Chart.objects.load(source)
    problem = caught.value.problems[0]
    assert (problem.line, problem.column) == (2, 17)
    assert "byte 0xE9 is not valid UTF-8" in problem.message
    assert not Chart.objects.exists()
