"""Hostile input through every door: the API, the admin's forms, ``manage.py statechart``, the
Basic HTTP inbound view and the Python API each answer with a clear error (400, a form error,
one-line CommandError, an InvalidInput naming the path), never a 500 or a traceback, and
nothing is written.

The door table (the end of this file) lists every door and runs one table of bad inputs and
one table of refusals through each, checking each answer against the refusal table
(``statecharts.policies.refusals``): the same reason at every door, the status of its column."""

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
from statecharts.models import Chart, Execution, HistoryEntry
from statecharts.operations.inspection import TOO_DEEP, datamodel_of, inspect
from statecharts.policies.validation import InvalidInput

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


# ---- the door table ---------------------------------------------------------------------------
#
# Every door data from outside comes in through, listed: each bad input and each refusal is run
# through every door that takes it, and each door answers it as the refusal table says
# (statecharts.policies.refusals): the same reason, the status of its column, never a 500, and
# nothing
# applied. A door that is not listed here fails test_every_door_is_listed.

# Doors that feed an event into an execution (each runs every bad event input and refusal).
EVENT_DOORS = ("api", "admin", "command", "inbound", "python")
# Doors that start an execution (each runs every bad start input).
START_DOORS = ("api", "admin", "command", "python")

# The API's writes: (URL name, method) -> what it is.
API_WRITES = {
    ("execution-list", "post"): "start: START_DOORS['api']",
    ("execution-send", "post"): "event: EVENT_DOORS['api']",
    ("execution-cancel", "post"): "cancel: a CancelRequest through the gate (no body)",
    ("execution-migrate", "post"): "chart migration: a MigrationRequest (its renames) "
    "through the gate: NO_STEP_DOORS['migration renames'] "
    "(test_an_api_error_never_echoes_what_it_cannot_print, test_unknown_fields_are_a_400)",
    ("execution-erase", "post"): "erasure: an ErasureRequest (its reason) through the "
    "gate: NO_STEP_DOORS['erase'] (tests/api/test_execution_actions.py)",
    ("execution-trace", "post"): "tracing on or off: a boolean, no data into an execution "
    "(tests/api/test_execution_actions.py)",
    ("outbox-message-retry", "post"): "delivering an undeliverable message again: no body, "
    "no data into an execution (tests/api/test_outbox_retry.py)",
    ("chart-list", "post"): "chart load: a document, checked by the core, then a "
    "ChartLoadRequest (name, version) through the gate "
    "(test_a_chart_named_longer_than_its_column_is_refused_at_every_door)",
    ("basichttp-address-rotate", "post"): "address rotation: an OperatorRequest (a reason) "
    "through the gate, no data into an execution (tests/routes/test_address_rotation.py: a "
    "bad reason is a 400)",
    **{
        (f"{rows}-{action}", "post"): "an operator's action: a reason (and a due time), no "
        "data into an execution (tests/timers/test_operating_doors.py)"
        for rows in ("timer", "route-timer")
        for action in ("fire-now", "cancel", "reschedule")
    },
    **{
        (f"route-delivery-{action}", "post"): "an operator's record of a fate: a reason, no "
        "data into an execution (tests/routes/test_route_delivery_marks.py)"
        for action in ("mark-delivered", "mark-failed")
    },
    **{
        (f"invocation-{action}", "post"): "an operator's action: a reason, no data into an "
        "execution (tests/invocations/test_invocation_operating.py)"
        for action in ("retry-now", "cancel")
    },
}
# The admin's own views and actions of the project's models.
ADMIN_VIEWS = {
    "statecharts_chart_start": "start: START_DOORS['admin']",
    "statecharts_execution_send": "event: EVENT_DOORS['admin']",
    "statecharts_execution_cancel": "cancel: a CancelRequest through the gate",
    "routes_inboundaddress_rotate": "address rotation: an OperatorRequest (a reason) "
    "through the gate (tests/routes/test_address_rotation.py)",
}
ADMIN_ACTIONS = {
    "statecharts.Execution": {"cancel_selected", "migrate_selected", "erase_selected",
                              "trace_selected", "untrace_selected"},
    "statecharts.OutboxMessage": {"retry_selected"},
    "timers.Timer": {"retry_selected", "fire_now_selected", "cancel_selected",
                     "reschedule_selected"},
    "timers.RouteTimer": {"fire_now_selected", "cancel_selected", "reschedule_selected"},
    "routes.InboundAddress": {"rotate_selected"},
    "routes.RouteDelivery": {"mark_delivered", "mark_failed"},
    "invocations.Invocation": {"retry_now_selected", "cancel_selected"},
}  # (a selection of rows: no data from outside; cancel_selected submits CancelRequests)
COMMANDS = {
    "statechart start": "start: START_DOORS['command']",
    "statechart send": "event: EVENT_DOORS['command']",
    "statechart cancel": "cancel: a CancelRequest through the gate",
    "statechart import": (
        "a document: an ImportRequest and each part's ImportedRowRequests through the gate "
        "(NO_STEP_DOORS['import'], tests/operations/test_transfer_door.py)"
    ),
    "statechart load": "a ChartLoadRequest (--name, --version): NO_STEP_DOORS['chart load']",
    "statechart erase": "an ErasureRequest (--reason): NO_STEP_DOORS['erase']",
    "statechart migrate": "a MigrationRequest (--map): NO_STEP_DOORS['migration renames']",
    **{
        f"statechart {name}": "no data into an execution"
        for name in ["deliver", "diagram", "export", "health", "prune", "reencrypt", "replay",
                     "show", "trace", "validate"]
    },
    "fire_timers": "no data from outside",
    "setup_timers": "no data from outside",
    "route_delivery": "an operator's record of a fate: a reason "
    "(tests/routes/test_route_delivery_marks.py)",
    "invocation_action": "an operator's action: a reason "
    "(tests/invocations/test_invocation_operating.py)",
    "timer_action": "an operator's action: a reason (tests/timers/test_operating_doors.py)",
    "rotate_address": "address rotation: an OperatorRequest (--reason) through the gate "
    "(NO_STEP_DOORS['operator reason'], tests/routes/test_address_rotation.py)",
}
INBOUND_VIEWS = {"basichttp-inbound": "event: EVENT_DOORS['inbound']"}


def _patterns(patterns: Any) -> Any:
    from django.urls import URLResolver

    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _patterns(pattern.url_patterns)
        else:
            yield pattern


def test_every_door_is_listed() -> None:
    import argparse

    from django.contrib import admin as django_admin
    from django.core.management import get_commands

    import routes.inbound
    from statecharts.api import urls as api_urls
    from statecharts.management.commands.statechart import Command

    writes = set()
    for pattern in _patterns(api_urls.urlpatterns):
        for method in getattr(pattern.callback, "actions", None) or {}:
            if method in ("post", "put", "patch", "delete"):
                writes.add((pattern.name, method))
    assert writes == set(API_WRITES), "a new API write: list it in API_WRITES and its tables"
    project = {"statecharts", "timers", "routes", "invocations"}
    standard = ("_changelist", "_add", "_history", "_delete", "_change")
    views, actions = set(), {}
    for model, model_admin in django_admin.site._registry.items():
        if model._meta.app_label not in project:
            continue
        views |= {
            url.name for url in model_admin.get_urls()
            if url.name and not url.name.endswith(standard)
        }  # fmt: skip
        if model_admin.actions:
            actions[model._meta.label] = {getattr(a, "__name__", a) for a in model_admin.actions}
    assert views == set(ADMIN_VIEWS), "a new admin view: list it in ADMIN_VIEWS"
    assert actions == ADMIN_ACTIONS, "a new admin action: list it in ADMIN_ACTIONS"
    parser = Command().create_parser("manage.py", "statechart")
    [subcommands] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    commands = {f"statechart {name}" for name in subcommands.choices}
    commands |= {name for name, app in get_commands().items() if app in project - {"statecharts"}}
    assert commands == set(COMMANDS), "a new command: list it in COMMANDS"
    inbound = {p.name for p in _patterns(routes.inbound.urlpatterns) if p.name}
    assert inbound == set(INBOUND_VIEWS)


# A bad input: the event (name, data) each door is given, the words the gate refuses it with,
# and the doors it does not apply to (and why).
BAD_EVENTS = {
    "reserved name": ("error.execution", None, "reserved for the platform's own events"),
    "reserved prefix": ("done.state.review", None, "reserved for the platform's own events"),
    "NUL in the name": ("no\x00te", None, "NUL character"),
    "lone surrogate": ("note", {"t": "\ud800"}, "lone UTF-16 surrogate"),
    "deep JSON": ("note", deep_value(100), "more than 64 levels"),
    "tagged code": ("note", CODE, "the tag 'function' is not accepted here"),
    "oversized": ("note", {"t": "x" * 3000}, "is larger than 2000 bytes"),
}
# (the inbound view reads the name itself first: its own words, the same reason and status)
INBOUND_WORDS = {"NUL in the name": "is not an event name"}
LIMITS = {"INPUT_MAX_BYTES": 2000}


def _api_event(api: APIClient, execution: Execution, name: str, data: Any, **headers: Any) -> Any:
    body = json.dumps({"name": name, "data": data}, ensure_ascii=True)  # (\ud800 as an escape)
    return api.generic("POST", f"/api/executions/{execution.pk}/send/", body,
                       content_type="application/json", headers=headers)


def _inbound_event(client: Client, execution: Execution, name: str, data: Any,
                   **headers: Any) -> Any:
    from urllib.parse import quote

    from routes import addresses

    address = addresses.location_of(execution, "/scxml/basichttp/")
    assert address is not None
    query = f"?_scxmleventname={quote(name, safe='')}"
    body = json.dumps(data, ensure_ascii=True) if data is not None else ""
    with override_urls("tests.routes.urls"):
        return Client().post(address + query, body, content_type="application/json",
                             headers=headers)


def override_urls(urlconf: str) -> Any:
    from django.test import override_settings

    return override_settings(ROOT_URLCONF=urlconf)


class DoorAnswer:
    """What one door answered: the refusal's reason, its HTTP status (None for a door that
    has none) and its words."""

    def __init__(self, reason: str, status: int | None, words: str) -> None:
        self.reason, self.status, self.words = reason, status, words

    def __repr__(self) -> str:
        return f"DoorAnswer({self.reason!r}, {self.status!r}, {self.words[:200]!r})"


def _http(response: Any) -> DoorAnswer:
    assert response.status_code < 500, response.content[:500]
    body = response.json()
    words = json.dumps(body, ensure_ascii=False)
    if response.status_code == 400:
        return DoorAnswer(body.get("reason", "invalid_input"), 400, words)
    return DoorAnswer(body.get("reason", ""), response.status_code, words)


def _refusal_of(error: BaseException) -> DoorAnswer:
    from statecharts.policies import refusals

    row = refusals.row_of(error)
    assert row is not None, error
    return DoorAnswer(row.reason, None, str(error))


def send_through(door: str, execution: Execution, name: str, data: Any, *, user: Any = None,
                 key: str | None = None) -> DoorAnswer:
    """One event through one door, as the door's own client gives it."""
    user = user or User.objects.get(username="root")
    if door == "api":
        api = APIClient()
        api.force_authenticate(user)
        headers = {"Idempotency-Key": key} if key else {}
        return _http(_api_event(api, execution, name, data, **headers))
    if door == "inbound":
        headers = {"Idempotency-Key": key} if key else {}
        return _http(_inbound_event(Client(), execution, name, data, **headers))
    if door == "admin":
        client = Client()
        client.force_login(user)
        url = reverse("admin:statecharts_execution_send", args=[execution.pk])
        body = {"name": name, "data": "" if data is None else json.dumps(data)}
        if key:
            body["idempotency_token"] = key
        response = client.post(url, body, follow=True)
        assert response.status_code == 200
        words = admin_messages(response)
        reason = _admin_reason(words)
        return DoorAnswer(reason, None, words)
    if door == "command":
        args = ["send", str(execution.pk), name]
        if data is not None:
            args += ["--data", json.dumps(data)]
        if key:
            args += ["--idempotency-key", key]
        if user.username != "root":
            args += ["--as-user", user.username]
        try:
            output = run(*args)
        except CommandError as exc:
            message = str(exc)
            assert "\n" not in message
            return DoorAnswer(_admin_reason(message), None, message)
        # A finished execution discards the input: recorded, said in a note, not an error.
        assert "note: the input was not applied" in output, output
        return DoorAnswer("finished", None, output)
    assert door == "python"
    try:
        result = stepper.send(execution, name, data, idempotency_key=key,
                              user=None if user.username == "root" else user)
    except Exception as exc:
        return _refusal_of(exc)
    # A finished execution discards the input: a result saying so, not an exception.
    assert result.disposition == "discarded", result
    return DoorAnswer("finished", None, f"execution {result.execution.status}")


def _admin_reason(words: str) -> str:
    """The reason a door without a reason field (the admin, a command) words, found in the
    table's order by what each refusal says."""
    said = {
        "not_permitted": ("Not sent:", "not permitted:"),
        "idempotency_conflict": ("idempotency key",),
        "halted": ("is halted",),
        "needs_migration": ("needs migration",),
        "needs_repair": ("needs repair",),
        "finished": ("discarded",),
    }
    for reason, marks in said.items():
        if any(mark in words for mark in marks):
            return reason
    return "invalid_input"


@pytest.fixture
def door_loan(settings: Any) -> Execution:
    settings.STATECHARTS = {
        **getattr(settings, "STATECHARTS", {}),
        **LIMITS,
        "EVENT_PERMISSIONS": {"loan": {"approve": "auth.approve_loan"}},
    }
    User.objects.create_superuser("root", password="pw")
    import routes.inbound

    chart = Chart.objects.load(LOAN)
    return routes.inbound.start(chart, base_url="http://testserver/scxml/basichttp/")


@pytest.mark.parametrize("case", sorted(BAD_EVENTS))
@pytest.mark.parametrize("door", EVENT_DOORS)
def test_every_event_door_refuses_each_bad_input_alike(
    door: str, case: str, door_loan: Execution
) -> None:
    from statecharts.policies import refusals

    name, data, words = BAD_EVENTS[case]
    answer = send_through(door, door_loan, name, data)
    row = refusals.BY_REASON["invalid_input"]
    assert answer.reason == "invalid_input", answer
    if door in ("api", "inbound"):
        assert answer.status == getattr(row, door if door == "inbound" else "api"), answer
    expected = INBOUND_WORDS.get(case, words) if door == "inbound" else words
    assert expected in answer.words, answer
    door_loan.refresh_from_db()
    assert (door_loan.steps, door_loan.status) == (1, "active")
    assert approved(door_loan) is False


def test_unknown_fields_are_refused_where_a_door_has_fields(door_loan: Execution) -> None:
    api = APIClient()
    api.force_authenticate(User.objects.get(username="root"))
    sent = api.post(f"/api/executions/{door_loan.pk}/send/",
                    {"name": "note", "dta": 1}, format="json")
    assert sent.status_code == 400 and "dta" in sent.json()
    started = api.post("/api/executions/", {"chart": door_loan.chart_id, "busines_key": "k"},
                       format="json")
    assert started.status_code == 400 and "busines_key" in started.json()
    migrate = api.post("/api/executions/migrate/", {"chart": door_loan.chart_id, "dry": True},
                       format="json")
    assert migrate.status_code == 400 and "dry" in migrate.json()
    # a browser's form post carries Django's CSRF token: not an unknown field
    form = api.post(f"/api/executions/{door_loan.pk}/send/",
                    {"name": "note", "csrfmiddlewaretoken": "x"})
    assert form.status_code == 200, form.content
    with pytest.raises(InvalidInput, match="colour: not an event field"):
        stepper.send(door_loan, "note", colour="red")
    assert Execution.objects.count() == 1


def test_an_api_error_never_echoes_what_it_cannot_print(door_loan: Execution) -> None:
    api = APIClient()
    api.force_authenticate(User.objects.get(username="root"))
    for renames in ['{"\\ud800": [1]}', '{"\\ud800": null}', '{"a\\ud800": "b"}']:
        body = f'{{"chart": {door_loan.chart_id}, "renames": {renames}}}'
        response = api.generic("POST", "/api/executions/migrate/", body,
                               content_type="application/json")
        assert response.status_code == 400, response.content
        assert "\\ud800" in response.content.decode() or "surrogate" in response.content.decode()
    odd = api.generic("POST", "/api/executions/", f'{{"chart": {door_loan.chart_id}, '
                      '"\\ud800": 1}', content_type="application/json")
    assert odd.status_code == 400 and "\\ud800" in odd.json()


# A refusal: how to bring it about (given the execution), the words every door says, and the
# door's own idempotency key for the conflict case.
def _halt(execution: Execution) -> None:
    Execution.objects.filter(pk=execution.pk).update(status="halted", failure_reason="budget")


def _needs_migration(execution: Execution) -> None:
    Execution.objects.filter(pk=execution.pk).update(status="needs_migration")


def _needs_repair(execution: Execution) -> None:
    Execution.objects.filter(pk=execution.pk).update(status="needs_repair")


def _finish(execution: Execution) -> None:
    stepper.send(execution, "note", 1)
    Execution.objects.filter(pk=execution.pk).update(status="completed")


REFUSALS = {
    "halted": (_halt, "is halted"),
    "needs_migration": (_needs_migration, "needs migration"),
    "needs_repair": (_needs_repair, "needs repair"),
    "finished": (_finish, "completed"),
}


@pytest.mark.parametrize("reason", sorted(REFUSALS))
@pytest.mark.parametrize("door", EVENT_DOORS)
def test_every_event_door_answers_each_refusal_as_the_table_says(
    door: str, reason: str, door_loan: Execution
) -> None:
    from statecharts.policies import refusals

    bring_about, words = REFUSALS[reason]
    bring_about(door_loan)
    door_loan.refresh_from_db()
    before = door_loan.status
    answer = send_through(door, door_loan, "note", {"n": 1})
    row = refusals.BY_REASON[reason]
    assert answer.reason == reason, answer
    if door in ("api", "inbound"):
        assert answer.status == (row.inbound if door == "inbound" else row.api), answer
    assert words in answer.words, answer
    door_loan.refresh_from_db()
    assert door_loan.status == before


@pytest.mark.parametrize("door", EVENT_DOORS)
def test_every_event_door_answers_a_reused_idempotency_key_as_the_table_says(
    door: str, door_loan: Execution
) -> None:
    from statecharts.policies import refusals

    first = f"door-{door}-1"
    _apply_through(door, door_loan, first)  # applied; the same key with other data conflicts
    answer = send_through(door, door_loan, "note", {"n": 2}, key=first)
    row = refusals.BY_REASON["idempotency_conflict"]
    assert answer.reason == "idempotency_conflict", answer
    if door in ("api", "inbound"):
        assert answer.status == (row.inbound if door == "inbound" else row.api), answer
    door_loan.refresh_from_db()
    assert door_loan.steps == 2


def _apply_through(door: str, execution: Execution, key: str) -> None:
    root = User.objects.get(username="root")
    if door == "api":
        api = APIClient()
        api.force_authenticate(root)
        assert _api_event(api, execution, "note", {"n": 1}, **{"Idempotency-Key": key}
                          ).status_code == 200
    elif door == "inbound":
        response = _inbound_event(Client(), execution, "note", {"n": 1},
                                  **{"Idempotency-Key": key})
        assert response.status_code == 204, response.content
    elif door == "admin":
        client = Client()
        client.force_login(root)
        url = reverse("admin:statecharts_execution_send", args=[execution.pk])
        client.post(url, {"name": "note", "data": '{"n": 1}', "idempotency_token": key})
    elif door == "command":
        run("send", str(execution.pk), "note", "--data", '{"n": 1}', "--idempotency-key", key)
    else:
        stepper.send(execution, "note", {"n": 1}, idempotency_key=key)


@pytest.mark.parametrize("door", EVENT_DOORS)
def test_every_event_door_answers_a_protected_event_as_the_table_says(
    door: str, door_loan: Execution
) -> None:
    from statecharts.policies import refusals

    clerk = User.objects.create_user("clerk", password="pw", is_staff=True)
    from django.contrib.auth.models import Permission

    clerk.user_permissions.add(*Permission.objects.filter(
        content_type__app_label="statecharts",
        codename__in=["view_execution", "change_execution", "view_chart"],
    ))
    clerk = User.objects.get(pk=clerk.pk)
    answer = send_through(door, door_loan, "approve", None, user=clerk)
    row = refusals.BY_REASON["not_permitted"]
    assert answer.reason == "not_permitted", answer
    if door in ("api", "inbound"):
        assert answer.status == (row.inbound if door == "inbound" else row.api), answer
    assert "approve" in answer.words, answer
    door_loan.refresh_from_db()
    assert door_loan.steps == 1


# Bad start inputs: (data, business key, the words).
BAD_STARTS = {
    "tagged code": ({"note": CODE}, None, "the tag 'function' is not accepted here"),
    "lone surrogate": ({"note": "\ud800"}, None, "lone UTF-16 surrogate"),
    "deep JSON": ({"note": deep_value(100)}, None, "more than 64 levels"),
    "oversized": ({"note": "x" * 3000}, None, "is larger than 2000 bytes"),
    "NUL in the business key": (None, "k\x00", "NUL character"),
    "surrogate in the business key": (None, "k\ud800", "lone UTF-16 surrogate"),
}


CANNOT_BE_SENT = {
    ("admin", "surrogate in the business key"): "a form post is UTF-8 text: a lone surrogate "
    "cannot be encoded in it (JSON's \\ud800 escape can: the 'lone surrogate' case)",
}


def start_through(door: str, chart: Chart, data: Any, key: str | None) -> DoorAnswer:
    root = User.objects.get(username="root")
    if door == "api":
        api = APIClient()
        api.force_authenticate(root)
        body = json.dumps({"chart": chart.pk, "data": data, "business_key": key},
                          ensure_ascii=True)
        return _http(api.generic("POST", "/api/executions/", body,
                                 content_type="application/json"))
    if door == "admin":
        client = Client()
        client.force_login(root)
        url = reverse("admin:statecharts_chart_start", args=[chart.pk])
        body = {"data": "" if data is None else json.dumps(data), "business_key": key or ""}
        response = client.post(url, body, follow=True)
        assert response.status_code == 200
        words = admin_messages(response)
        return DoorAnswer(_admin_reason(words), None, words)
    if door == "command":
        args = ["start", str(chart.pk)]
        if data is not None:
            args += ["--data", json.dumps(data)]
        if key is not None:
            args += ["--key", key]
        try:
            run(*args)
        except CommandError as exc:
            return DoorAnswer(_admin_reason(str(exc)), None, str(exc))
        raise AssertionError("the command started it")
    try:
        stepper.start(chart, data=data, business_key=key)
    except Exception as exc:
        return _refusal_of(exc)
    raise AssertionError("stepper.start started it")


@pytest.mark.parametrize("case", sorted(BAD_STARTS))
@pytest.mark.parametrize("door", START_DOORS)
def test_every_start_door_refuses_each_bad_input_alike(
    door: str, case: str, door_loan: Execution
) -> None:
    data, key, words = BAD_STARTS[case]
    if (door, case) in CANNOT_BE_SENT:
        pytest.skip(CANNOT_BE_SENT[door, case])
    answer = start_through(door, door_loan.chart, data, key)
    assert answer.reason == "invalid_input", answer
    if door == "api":
        assert answer.status == 400
    assert words in answer.words, answer
    assert Execution.objects.count() == 1


# ---- requests that ask for no step: each door answers the gate's words -------------------------


def _load_through_the_command(version: str, tmp_path: Any) -> str:
    path = tmp_path / "loan.scxml"
    path.write_text(LOAN)
    return command_error("load", str(path), "--name", "x", "--version", version)


def _load_through_python(version: str, tmp_path: Any) -> str:
    with pytest.raises(InvalidInput) as refused:
        Chart.objects.load(LOAN, version=version)
    return str(refused.value)


def _erase_through_the_command(reason: str, tmp_path: Any) -> str:
    execution = Execution.objects.start(Chart.objects.load(LOAN))
    return command_error("erase", str(execution.pk), "--reason", reason, "--yes")


def _erase_through_the_api(reason: str, tmp_path: Any) -> str:
    execution = Execution.objects.start(Chart.objects.load(LOAN))
    api = APIClient()
    api.force_authenticate(User.objects.create_superuser("dpo", password="pw"))
    body = {"executions": [execution.pk], "reason": reason, "cancel": True}
    response = api.post("/api/executions/erase/", body, format="json")
    assert response.status_code == 400, response.content
    execution.refresh_from_db()
    assert execution.erased is None
    return json.dumps(response.json())


def _rename_through_python(old_id: str, tmp_path: Any) -> str:
    from statecharts.operations.chart_migration import MigrationPlan, PlanError

    with pytest.raises(PlanError) as refused:
        MigrationPlan.make(Chart.objects.load(LOAN), renames={old_id: "review"})
    return str(refused.value)


def _import_through_python(business_key: str, tmp_path: Any) -> str:
    from statecharts.operations.transfer import ImportRefused, export_execution, import_execution

    execution = Execution.objects.start(Chart.objects.load(LOAN))
    document = export_execution(execution)
    execution.delete()
    document["execution"]["business_key"] = business_key
    with pytest.raises(ImportRefused) as refused:
        import_execution(document)
    return str(refused.value)


def _rotate_through_the_command(reason: str, tmp_path: Any) -> str:
    with pytest.raises(CommandError) as refused:
        call_command("rotate_address", "1", "--reason", reason, stdout=io.StringIO())
    return str(refused.value)


def _rotate_through_python(reason: str, tmp_path: Any) -> str:
    from routes import addresses

    with pytest.raises(InvalidInput) as refused:
        addresses.rotate(1, reason=reason)
    return str(refused.value)


# door -> (how it is given the bad value, the value, the gate's words in its answer)
NO_STEP_DOORS = {
    "chart load": [
        (_load_through_the_command, "v" * 101, "--version is 101 characters long"),
        (_load_through_python, "v" * 101, "version: is 101 characters long"),
        (_load_through_python, "v\x00", "version: must not contain a NUL character"),
    ],
    "erase": [
        (_erase_through_the_command, "why\x00", "--reason must not contain a NUL"),
        (_erase_through_the_api, "why\x00", '{"reason": ["must not contain a NUL'),
    ],
    "migration renames": [
        (_rename_through_python, "re\x00view", "renames: must not contain a NUL character"),
        (_rename_through_python, "r" * 201, "renames: is 201 characters long"),
    ],
    "import": [
        (_import_through_python, "k\x00", "execution.business_key: must not contain a NUL"),
    ],
    "operator reason": [
        (_rotate_through_the_command, "   ", "--reason: must not be blank"),
        (_rotate_through_python, "why\x00", "reason: must not contain a NUL character"),
    ],
}


@pytest.mark.parametrize(
    ("give", "value", "words"),
    [case for cases in NO_STEP_DOORS.values() for case in cases],
    ids=[f"{door}-{n}" for door, cases in NO_STEP_DOORS.items() for n in range(len(cases))],
)
def test_every_door_of_a_request_without_a_step_answers_the_gates_words(
    give: Any, value: str, words: str, tmp_path: Any
) -> None:
    assert words in give(value, tmp_path)
    # (a refused load stores nothing; compared here, as PostgreSQL cannot be asked for a NUL)
    assert all(value not in (chart.name, chart.version) for chart in Chart.objects.all())


def test_the_gate_admits_only_the_requests_it_knows() -> None:
    with pytest.raises(TypeError, match="not a request the gate admits"):
        stepper.admit(object())  # type: ignore[arg-type]
    assert stepper.admit(stepper.ChartLookupRequest(reference="loan@2")) == "loan@2"
    assert stepper.admit(stepper.ChartLoadRequest(name="loan", version="2")) is None


def test_the_refusals_live_beside_each_other_and_the_old_paths_still_import() -> None:
    import statecharts.exceptions
    import statecharts.policies.validation
    import statecharts.stepper.transaction

    assert statecharts.policies.validation.InvalidInput is statecharts.exceptions.InvalidInput
    assert stepper.InvalidInput is statecharts.exceptions.InvalidInput
    assert (statecharts.stepper.transaction.BusinessKeyInUse
            is stepper.BusinessKeyInUse is statecharts.exceptions.BusinessKeyInUse)


@pytest.mark.parametrize("internal", ["io_processors", "parent", "invokeid", "outbox"])
def test_the_public_start_has_no_internal_keywords(chart: Chart, internal: str) -> None:
    with pytest.raises(TypeError, match=internal):
        stepper.start(chart, **{internal: None})
    assert not Execution.objects.exists()
