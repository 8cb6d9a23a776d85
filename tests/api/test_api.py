"""The REST API (statecharts.api): endpoints, bad input, permissions, pages, filters, schema."""

from __future__ import annotations

import json
import re
import sys
import types
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.test import override_settings
from django.urls import resolve
from drf_spectacular.validation import validate_schema
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from statecharts.models import Chart, Execution
from timers.models import Timer

pytestmark = pytest.mark.django_db

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0"'
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)

ORDER = f"""<scxml {NS} name="order" datamodel="ecmascript" initial="cart">
  <datamodel><data id="items" expr="[]"/><data id="limit" expr="3"/></datamodel>
  <state id="cart">
    <transition event="add"><assign location="items" expr="items.concat([_event.data])"/>
    </transition>
    <transition event="checkout" target="paying"/>
  </state>
  <state id="paying">
    <onentry><send event="reminder" delay="1d" id="remind"/></onentry>
    <transition event="paid" target="shipped"/>
  </state>
  <final id="shipped"><donedata><param name="count" expr="items.length"/></donedata></final>
</scxml>"""

NESTED = f"""<scxml {NS} name="nested" datamodel="ecmascript" initial="outer">
  <datamodel><data id="odd" expr="NaN"/></datamodel>
  <state id="outer" initial="inner"><state id="inner"/></state>
</scxml>"""

# Two problems, each on its own line: an unknown initial state and <data> where none may be.
INVALID = f"""<scxml {NS} initial="nowhere">
  <state id="a">
    <data id="x"/>
  </state>
</scxml>"""

API = "/api"


# ---- users and clients -----------------------------------------------------------------------


def user_with(username: str, *perms: str) -> User:
    user = User.objects.create_user(username, password="pw")
    for perm in perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    return user


READ = ("statecharts.view_chart", "statecharts.view_execution", "timers.view_timer")
WRITE = (*READ, "statecharts.add_chart", "statecharts.add_execution")
OPERATE = (*WRITE, "statecharts.change_execution")


def client_for(user: User | None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


@pytest.fixture
def api() -> APIClient:
    """A user who may do everything the API offers."""
    return client_for(user_with("operator", *OPERATE))


@pytest.fixture
def chart() -> Chart:
    return Chart.objects.load(ORDER)


def start(api: APIClient, chart: Chart, **body: Any) -> dict[str, Any]:
    response = api.post(f"{API}/executions/", {"chart": chart.pk, **body}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def send(api: APIClient, pk: int, name: str, data: Any = None) -> Any:
    return api.post(f"{API}/executions/{pk}/send/", {"name": name, "data": data}, format="json")


def raw_post(api: APIClient, url: str, body: str) -> Any:
    return api.generic("POST", url, body, content_type="application/json")


# ---- charts ----------------------------------------------------------------------------------


def test_load_a_chart_then_the_same_source_again(api: APIClient) -> None:
    response = api.post(f"{API}/charts/", {"source": ORDER, "version": "3"}, format="json")
    assert response.status_code == 201
    body = response.json()
    assert body["name"] == "order" and body["version"] == "3"
    assert body["source"] == ORDER and body["warnings"] == []
    assert response["Location"].endswith(f"/api/charts/{body['id']}/")
    assert body["diagram"].endswith(f"/api/charts/{body['id']}/diagram.svg")
    assert Chart.objects.get(pk=body["id"]).content_hash == body["content_hash"]

    again = api.post(f"{API}/charts/", {"source": ORDER}, format="json")
    assert again.status_code == 200  # loading is idempotent: the chart stored with it
    assert again.json()["id"] == body["id"]
    assert Chart.objects.count() == 1


def test_invalid_scxml_is_a_400_listing_every_problem_with_line_and_column(
    api: APIClient,
) -> None:
    response = api.post(f"{API}/charts/", {"source": INVALID}, format="json")
    assert response.status_code == 400
    problems = response.json()["source"]
    assert len(problems) == 2
    assert all(re.match(r"^\d+:\d+: ", problem) for problem in problems)
    assert any(p.startswith("1:") and "'nowhere'" in p for p in problems)
    assert any(p.startswith("3:") and "<data>" in p for p in problems)
    assert Chart.objects.count() == 0


@pytest.mark.parametrize(
    ("body", "field", "reason"),
    [
        ({"source": "<scxml"}, "source", r"^1:\d+: not well-formed XML"),
        ({"source": "<a/>"}, "source", r"^1:1: the root element must be <scxml>"),
        ({"source": ""}, "source", "may not be blank"),
        ({}, "source", "required"),
        ({"source": ORDER, "version": "v" * 101}, "version", "no more than 100"),
    ],
)
def test_bad_chart_input_is_a_400_naming_the_field(
    api: APIClient, body: dict[str, Any], field: str, reason: str
) -> None:
    response = api.post(f"{API}/charts/", body, format="json")
    assert response.status_code == 400
    assert re.search(reason, response.json()[field][0])


def test_chart_warnings_are_reported(api: APIClient) -> None:
    source = '<scxml version="1.0" initial="a"><state id="a"/></scxml>'  # no namespace
    body = api.post(f"{API}/charts/", {"source": source}, format="json").json()
    assert len(body["warnings"]) == 1
    assert body["warnings"][0].startswith("1:1: <scxml> has no namespace")


def test_list_retrieve_and_filter_charts(api: APIClient, chart: Chart) -> None:
    other = Chart.objects.load(NESTED, version="2")
    listed = api.get(f"{API}/charts/").json()
    assert listed["count"] == 2
    assert {c["id"] for c in listed["results"]} == {chart.pk, other.pk}
    assert "source" not in listed["results"][0]  # lists stay small

    detail = api.get(f"{API}/charts/{chart.pk}/").json()
    assert detail["source"] == ORDER and detail["name"] == "order"

    only = api.get(f"{API}/charts/", {"name": "nested"}).json()
    assert [c["id"] for c in only["results"]] == [other.pk]
    assert api.get(f"{API}/charts/", {"version": "2"}).json()["count"] == 1


@pytest.mark.parametrize("url", ["/charts/9999/", "/charts/abc/", "/executions/9999/"])
def test_unknown_ids_are_404(api: APIClient, url: str) -> None:
    assert api.get(f"{API}{url}").status_code == 404


def superuser() -> APIClient:
    return client_for(User.objects.create_superuser("root", password="pw"))


def test_charts_are_not_edited_or_deleted_through_the_api(chart: Chart) -> None:
    # (A user without change_chart is refused first, with a 403: permissions come first.)
    api = superuser()
    url = f"{API}/charts/{chart.pk}/"
    assert api.put(url, {"source": NESTED}, format="json").status_code == 405
    assert api.patch(url, {"name": "x"}, format="json").status_code == 405
    assert api.delete(url).status_code == 405


# ---- executions: start -----------------------------------------------------------------------


def test_start_an_execution(api: APIClient, chart: Chart) -> None:
    response = api.post(
        f"{API}/executions/",
        {
            "chart": chart.pk,
            "data": {"limit": 5},
            "business_key": "order-1",
            "metadata": {"customer": 42},
        },
        format="json",
    )
    assert response.status_code == 201
    body = response.json()
    execution = Execution.objects.get(pk=body["id"])
    assert response["Location"].endswith(f"/api/executions/{execution.pk}/")
    assert body["chart"] == chart.pk and body["business_key"] == "order-1"
    assert body["status"] == "active" and body["configuration"] == ["cart"]
    assert body["active_states"] == ["cart"]
    assert body["datamodel"] == {"items": [], "limit": 5}
    assert body["metadata"] == {"customer": 42}
    assert body["pending_timers"] == [] and body["steps"] == 1
    assert body["history"].endswith(f"/api/executions/{execution.pk}/history/")
    assert execution.session_id == body["session_id"]


@pytest.mark.parametrize(
    ("body", "field", "reason"),
    [
        ({"chart": 9999}, "chart", "does not exist"),
        ({"chart": "abc"}, "chart", "no chart with id or name 'abc'"),  # a name (none such)
        ({"chart": [1]}, "chart", "Incorrect type"),
        ({"chart": None}, "chart", "may not be null"),
        ({"data": [1, 2]}, "data", "JSON object"),
        ({"data": {"nope": 1, "limit": 2}}, "data", r"nope \(declared: items, limit\)"),
        ({"data": {"limit": {"$sc": "bigint", "v": "12x"}}}, "data", "decimal integer"),
        ({"data": {"limit": {"$sc": "function", "source": "() => 1"}}}, "data", "not accepted"),
        ({"business_key": ""}, "business_key", "blank"),
        ({"business_key": "k" * 201}, "business_key", "no more than 200"),
        ({"metadata": [1]}, "metadata", "JSON object"),
    ],
)
def test_bad_start_input_is_a_400_naming_the_field(
    api: APIClient, chart: Chart, body: dict[str, Any], field: str, reason: str
) -> None:
    response = api.post(f"{API}/executions/", {"chart": chart.pk, **body}, format="json")
    assert response.status_code == 400, response.content
    assert re.search(reason, " ".join(response.json()[field]))
    assert Execution.objects.count() == 0


def test_a_chart_whose_source_was_edited_in_place_cannot_be_started(
    api: APIClient, chart: Chart
) -> None:
    Chart.objects.filter(pk=chart.pk).update(source=NESTED)
    response = api.post(f"{API}/executions/", {"chart": chart.pk}, format="json")
    assert response.status_code == 400
    assert "cannot be started" in response.json()["chart"][0]


def test_tagged_start_data_that_describes_values_is_accepted(api: APIClient, chart: Chart) -> None:
    body = start(api, chart, data={"limit": {"$sc": "bigint", "v": "12345678901234567890"}})
    assert body["datamodel"]["limit"] == "12345678901234567890"  # plain view of a bigint


def test_numbers_json_cannot_hold_are_refused_not_a_500(api: APIClient, chart: Chart) -> None:
    # Python reads 1e999 as infinity; the datamodel could not take it.
    response = raw_post(
        api, f"{API}/executions/", f'{{"chart": {chart.pk}, "data": {{"limit": 1e999}}}}'
    )
    assert response.status_code == 400
    assert response.json()["data"] == [
        'data.limit: inf is not a finite number; send {"$sc": "number", "v": "Infinity"}.'
    ]
    response = raw_post(api, f"{API}/executions/", f'{{"chart": {chart.pk}, "data": NaN}}')
    assert response.status_code == 400  # strict JSON: NaN is not JSON


@pytest.mark.parametrize("body", ["{", "not json", '{"chart": 1,}', "[" * 100_000 + "]" * 100_000])
def test_a_body_that_is_not_json_is_a_400(api: APIClient, chart: Chart, body: str) -> None:
    response = raw_post(api, f"{API}/executions/", body)
    assert response.status_code == 400
    assert "JSON parse error" in response.json()["detail"]


def test_a_business_key_in_use_is_a_409_with_the_reason(api: APIClient, chart: Chart) -> None:
    start(api, chart, business_key="order-7")
    response = api.post(
        f"{API}/executions/", {"chart": chart.pk, "business_key": "order-7"}, format="json"
    )
    assert response.status_code == 409
    assert "order-7" in response.json()["business_key"][0]
    other = Chart.objects.load(NESTED)
    start(api, other, business_key="order-7")  # unique per chart only


def test_start_by_chart_name_takes_its_latest_version(api: APIClient) -> None:
    # The rule of `manage.py statechart start NAME` (statecharts.policies.lookups): dotted versions.
    Chart.objects.load(ORDER.replace('expr="3"', 'expr="4"'), version="1.9", new_version=True)
    latest = Chart.objects.load(
        ORDER.replace('expr="3"', 'expr="5"'), version="1.10", new_version=True
    )
    by_name = api.post(f"{API}/executions/", {"chart": "order"}, format="json")
    assert by_name.status_code == 201, by_name.content
    assert by_name.json()["chart"] == latest.pk and by_name.json()["datamodel"]["limit"] == 5
    as_text = api.post(f"{API}/executions/", {"chart": str(latest.pk)}, format="json")
    assert as_text.json()["chart"] == latest.pk  # an id written as text is still an id
    # Versions are unique per name, but "01.10" is the same number as "1.10": a tie.
    tie = Chart.objects.load(
        ORDER.replace('expr="3"', 'expr="7"'), version="01.10", new_version=True
    )
    response = api.post(f"{API}/executions/", {"chart": "order"}, format="json")
    assert response.status_code == 400
    [reason] = response.json()["chart"]
    assert reason.startswith("several charts named 'order' have the latest version '01.10'")
    assert str(tie.pk) in reason and str(latest.pk) in reason
    assert Execution.objects.count() == 2


def test_the_browsable_api_reads_as_plain_text(chart: Chart) -> None:
    user_with("reader", *WRITE)
    client = APIClient()
    assert client.login(username="reader", password="pw")
    page = client.get(f"{API}/executions/", HTTP_ACCEPT="text/html").content.decode()
    assert "``" not in page  # no reStructuredText markup in a page description
    assert "Start one with a chart id or a chart name (its latest version)." in page
    # Help texts are drawn as HTML: nothing in them may read as a tag.
    assert "Initial values of the chart's top-level data elements, by id" in page
    charts = client.get(f"{API}/charts/", HTTP_ACCEPT="text/html").content.decode()
    assert "Defaults to the name attribute of the document's scxml element." in charts
    assert "``" not in charts


# ---- executions: events, cancel, history -----------------------------------------------------


def test_send_events_until_the_execution_finishes(api: APIClient, chart: Chart) -> None:
    pk = start(api, chart)["id"]
    added = send(api, pk, "add", {"sku": "A1", "qty": 2})
    assert added.status_code == 200
    assert added.json() == {
        "execution": pk,
        "url": f"http://testserver/api/executions/{pk}/",
        "seq": 2,
        "disposition": "applied",
        "status": "active",
        "configuration": ["cart"],
        "donedata": None,
        "handled": True,
        "repeated": False,
    }
    assert send(api, pk, "checkout").json()["configuration"] == ["paying"]

    detail = api.get(f"{API}/executions/{pk}/").json()
    assert detail["datamodel"]["items"] == [{"sku": "A1", "qty": 2}]
    [timer] = detail["pending_timers"]
    assert timer["send_id"] == "remind" and timer["event"]["name"] == "reminder"
    assert timer["status"] == "pending" and timer["execution"] == pk

    paid = send(api, pk, "paid").json()
    assert paid["status"] == "completed" and paid["configuration"] == ["shipped"]
    assert paid["donedata"] == {"count": 1}
    # Finishing discards the pending reminder in the same step (docs/timers.md).
    assert api.get(f"{API}/executions/{pk}/").json()["pending_timers"] == []
    [timer] = api.get(f"{API}/timers/", {"execution": pk}).json()["results"]
    assert timer["status"] == "discarded"


def test_events_from_an_html_form(api: APIClient, chart: Chart) -> None:
    # What the browsable API posts: the data field holds JSON text.
    pk = start(api, chart)["id"]
    url = f"{API}/executions/{pk}/send/"
    response = api.post(url, {"name": "add", "data": '{"sku": "B2"}'}, format="multipart")
    assert response.status_code == 200
    assert api.get(f"{API}/executions/{pk}/").json()["datamodel"]["items"] == [{"sku": "B2"}]
    response = api.post(url, {"name": "add", "data": "{oops"}, format="multipart")
    assert response.status_code == 400
    [reason] = response.json()["data"]
    assert reason.startswith("data: not valid JSON: Expecting property name")


def test_an_event_to_a_finished_execution_is_a_409_and_recorded(
    api: APIClient, chart: Chart
) -> None:
    pk = start(api, chart)["id"]
    send(api, pk, "checkout")
    send(api, pk, "paid")
    response = send(api, pk, "add", {"sku": "late"})
    assert response.status_code == 409
    body = response.json()
    assert body["disposition"] == "discarded" and body["status"] == "completed"
    assert "discarded" in body["detail"]
    history = api.get(f"{API}/executions/{pk}/history/").json()
    assert history["results"][-1]["disposition"] == "discarded"


def test_an_event_to_an_execution_that_needs_migration_is_a_409(
    api: APIClient, chart: Chart
) -> None:
    pk = start(api, chart)["id"]
    # Someone edited the stored source in place: the position no longer belongs to it.
    Chart.objects.filter(pk=chart.pk).update(source=ORDER.replace('expr="3"', 'expr="4"'))
    response = send(api, pk, "add", 1)
    assert response.status_code == 409
    body = response.json()
    assert body["disposition"] == "refused" and body["status"] == "needs_migration"
    detail = api.get(f"{API}/executions/{pk}/")
    assert detail.status_code == 200
    assert detail.json()["status"] == "needs_migration"
    assert detail.json()["active_states"] == ["cart"]
    assert send(api, pk, "add", 1).status_code == 409  # refused again, never a 500


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"name": ""}, "may not be blank"),
        ({"name": "order paid"}, "whitespace"),
        ({"name": " go"}, "whitespace"),
        ({"name": "go\n"}, "whitespace"),
        ({}, "required"),
        ({"name": ["go"]}, "Not a valid string"),
        ({"name": "e" * 201}, "no more than 200"),
    ],
)
def test_bad_event_names_are_a_400(
    api: APIClient, chart: Chart, body: dict[str, Any], reason: str
) -> None:
    pk = start(api, chart)["id"]
    response = api.post(f"{API}/executions/{pk}/send/", body, format="json")
    assert response.status_code == 400
    assert reason in response.json()["name"][0]
    assert Execution.objects.get(pk=pk).steps == 1  # nothing reached the stepper


def test_bad_event_data_is_a_400(api: APIClient, chart: Chart) -> None:
    pk = start(api, chart)["id"]
    response = send(api, pk, "add", {"when": {"$sc": "date", "v": "yesterday"}})
    assert response.status_code == 400
    assert response.json()["data"] == [
        'data.when: a "date" tag needs "v": milliseconds since the epoch.'
    ]
    response = raw_post(api, f"{API}/executions/{pk}/send/", '{"name": "add", "data": {')
    assert response.status_code == 400
    assert Execution.objects.get(pk=pk).steps == 1


def test_events_to_unknown_executions_are_404(api: APIClient) -> None:
    assert send(api, 9999, "go").status_code == 404
    assert api.post(f"{API}/executions/9999/cancel/").status_code == 404
    assert api.get(f"{API}/executions/9999/history/").status_code == 404


def test_cancel(api: APIClient, chart: Chart) -> None:
    pk = start(api, chart)["id"]
    send(api, pk, "checkout")
    response = api.post(f"{API}/executions/{pk}/cancel/")
    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"
    again = api.post(f"{API}/executions/{pk}/cancel/")
    assert again.status_code == 409 and again.json()["status"] == "cancelled"


def test_history_is_paginated_oldest_first(api: APIClient, chart: Chart) -> None:
    pk = start(api, chart)["id"]
    for n in range(4):
        send(api, pk, "add", n)
    first = api.get(f"{API}/executions/{pk}/history/", {"page_size": 2}).json()
    assert first["count"] == 5
    assert [e["seq"] for e in first["results"]] == [1, 2]
    assert first["results"][0]["input"]["kind"] == "start"
    assert first["results"][1]["input"]["event"]["name"] == "add"
    assert first["results"][1]["disposition"] == "applied"
    last = api.get(first["next"].replace("http://testserver", "")).json()
    last = api.get(last["next"].replace("http://testserver", "")).json()
    assert [e["seq"] for e in last["results"]] == [5] and last["next"] is None
    assert api.get(f"{API}/executions/{pk}/history/", {"page": 9}).status_code == 404


def test_datamodel_values_strict_json_cannot_hold_are_spelled_out(api: APIClient) -> None:
    nested = Chart.objects.load(NESTED)
    body = start(api, nested)
    assert body["datamodel"] == {"odd": "NaN"}
    assert body["configuration"] == ["inner"]
    assert body["active_states"] == ["outer", "inner"]


# ---- executions: lists, pages, filters -------------------------------------------------------


def test_list_filter_and_paginate_executions(api: APIClient, chart: Chart) -> None:
    nested = Chart.objects.load(NESTED)
    ids = [start(api, chart, business_key=f"k{n}")["id"] for n in range(3)]
    other = start(api, nested)["id"]
    send(api, ids[0], "checkout")
    send(api, ids[0], "paid")
    for n, pk in enumerate([*ids, other]):
        Execution.objects.filter(pk=pk).update(created=T0 + timedelta(days=n))

    def listed(**params: Any) -> list[int]:
        response = api.get(f"{API}/executions/", params)
        assert response.status_code == 200, response.content
        return sorted(e["id"] for e in response.json()["results"])

    assert listed() == sorted([*ids, other])
    assert listed(chart=nested.pk) == [other]
    assert listed(status="completed") == [ids[0]]
    assert listed(status="active", chart=chart.pk) == ids[1:]
    assert listed(business_key="k2") == [ids[2]]
    assert listed(created_after=(T0 + timedelta(days=1)).isoformat()) == [ids[1], ids[2], other]
    assert listed(
        created_after=(T0 + timedelta(days=1)).isoformat(),
        created_before=(T0 + timedelta(days=2)).isoformat(),
    ) == [ids[1], ids[2]]

    page = api.get(f"{API}/executions/", {"page_size": 3}).json()
    assert page["count"] == 4 and len(page["results"]) == 3 and page["next"]
    assert [e["id"] for e in page["results"]] == [other, ids[2], ids[1]]  # newest first
    assert "datamodel" not in page["results"][0]  # lists do not decode positions
    with override_settings(REST_FRAMEWORK={"PAGE_SIZE": 2}):
        assert len(api.get(f"{API}/executions/").json()["results"]) == 2


def test_executions_are_filtered_by_the_state_they_are_in(api: APIClient, chart: Chart) -> None:
    nested = Chart.objects.load(NESTED)
    in_cart, paying, shipped = (start(api, chart)["id"] for _ in range(3))
    outer = start(api, nested)["id"]
    send(api, paying, "checkout")
    send(api, shipped, "checkout")
    send(api, shipped, "paid")

    def listed(**params: Any) -> list[int]:
        response = api.get(f"{API}/executions/", params)
        assert response.status_code == 200, response.content
        return sorted(e["id"] for e in response.json()["results"])

    assert listed(in_state="paying") == [paying]
    assert listed(in_state="outer") == [outer]  # a compound state, not only atomic ones
    assert listed(in_state="inner") == [outer]
    assert listed(in_state="cart,paying") == sorted([in_cart, paying])  # any of them
    assert listed(in_state="paying", chart=nested.pk) == []  # with the other filters
    assert listed(in_state="pay") == []  # never a part of another id
    assert listed(in_state="") == sorted([in_cart, paying, shipped, outer])  # no filter
    schema = api.get(f"{API}/schema/", {"format": "json"}).json()
    parameters = schema["paths"]["/api/executions/"]["get"]["parameters"]
    (described,) = [p for p in parameters if p["name"] == "in_state"]
    assert "comma-separated" in described["description"]


@pytest.mark.parametrize(
    "value", ["has space", "a,\x00b", "1st", 'quo"te', "a," * 30 + "a", "x" * 201, "a,,b"]
)
def test_a_state_filter_that_cannot_name_a_state_is_a_400(
    api: APIClient, chart: Chart, value: str
) -> None:
    start(api, chart)
    response = api.get(f"{API}/executions/", {"in_state": value})
    assert response.status_code == 400, response.content
    assert "in_state" in response.json()


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"status": "sleeping"}, "status"),
        ({"chart": 9999}, "chart"),
        ({"chart": "abc"}, "chart"),
        ({"created_after": "last tuesday"}, "created"),
    ],
)
def test_bad_filters_are_a_400(
    api: APIClient, chart: Chart, params: dict[str, Any], field: str
) -> None:
    response = api.get(f"{API}/executions/", params)
    assert response.status_code == 400
    assert field in response.json()


# ---- timers ----------------------------------------------------------------------------------


def test_timers_list_filter_retrieve(api: APIClient, chart: Chart) -> None:
    first, second = start(api, chart)["id"], start(api, chart)["id"]
    send(api, first, "checkout")
    send(api, second, "checkout")
    Timer.objects.filter(execution_id=second).update(status="cancelled")

    everything = api.get(f"{API}/timers/").json()
    assert everything["count"] == 2
    mine = api.get(f"{API}/timers/", {"execution": first}).json()["results"]
    assert [t["execution"] for t in mine] == [first]
    assert [
        t["execution"] for t in api.get(f"{API}/timers/", {"status": "cancelled"}).json()["results"]
    ] == [second]
    assert api.get(f"{API}/timers/", {"execution": first, "status": "fired"}).json()["count"] == 0

    timer = api.get(f"{API}/timers/{mine[0]['id']}/").json()
    assert timer["event"]["name"] == "reminder" and timer["owner"].startswith("onentry:paying")
    assert timer["target"]["kind"] == "self"
    assert api.get(f"{API}/timers/9999/").status_code == 404


def test_timers_are_read_only(api: APIClient, chart: Chart) -> None:
    pk = start(api, chart)["id"]
    send(api, pk, "checkout")
    timer = Timer.objects.get()
    api = superuser()
    assert api.post(f"{API}/timers/", {}, format="json").status_code == 405
    assert api.delete(f"{API}/timers/{timer.pk}/").status_code == 405
    assert api.patch(f"{API}/timers/{timer.pk}/", {"status": "fired"}).status_code == 405


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"status": "snoozing"}, "status"),
        ({"execution": "abc"}, "execution"),
        ({"execution": "1.5"}, "execution"),
    ],
)
def test_bad_timer_filters_are_a_400(api: APIClient, params: dict[str, Any], field: str) -> None:
    response = api.get(f"{API}/timers/", params)
    assert response.status_code == 400
    assert field in response.json()


# ---- authentication and permissions ----------------------------------------------------------


ENDPOINTS = [
    ("get", "/charts/"),
    ("get", "/charts/{chart}/"),
    ("post", "/charts/"),
    ("get", "/executions/"),
    ("post", "/executions/"),
    ("get", "/executions/{execution}/"),
    ("post", "/executions/{execution}/send/"),
    ("post", "/executions/{execution}/cancel/"),
    ("post", "/executions/migrate/"),
    ("get", "/executions/{execution}/history/"),
    ("get", "/timers/"),
    ("get", "/route-deliveries/"),
    ("get", "/schema/"),
    ("get", "/"),
]


@pytest.fixture
def ids(api: APIClient, chart: Chart) -> dict[str, int]:
    return {"chart": chart.pk, "execution": start(api, chart)["id"]}


@pytest.mark.parametrize(("method", "url"), ENDPOINTS)
def test_anonymous_users_can_do_nothing(method: str, url: str, ids: dict[str, int]) -> None:
    response = getattr(APIClient(), method)(API + url.format(**ids), {}, format="json")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"


@pytest.mark.parametrize(("method", "url"), [e for e in ENDPOINTS if e[1] not in ("/schema/", "/")])
def test_a_user_without_model_permissions_is_refused(
    method: str, url: str, ids: dict[str, int]
) -> None:
    client = client_for(user_with("nobody"))
    response = getattr(client, method)(API + url.format(**ids), {}, format="json")
    assert response.status_code == 403


def test_reading_needs_the_view_permission_and_writing_more(
    chart: Chart, ids: dict[str, int]
) -> None:
    reader = client_for(user_with("reader", *READ))
    assert reader.get(f"{API}/executions/{ids['execution']}/").status_code == 200
    assert reader.get(f"{API}/timers/").status_code == 200
    assert reader.post(f"{API}/charts/", {"source": NESTED}, format="json").status_code == 403
    assert reader.post(f"{API}/executions/", {"chart": chart.pk}, format="json").status_code == 403
    assert send(reader, ids["execution"], "add").status_code == 403

    # Starting needs add_execution; sending an event and cancelling need change_execution.
    starter = client_for(user_with("starter", *WRITE))
    assert starter.post(f"{API}/charts/", {"source": NESTED}, format="json").status_code == 201
    assert starter.post(f"{API}/executions/", {"chart": chart.pk}, format="json").status_code == 201
    assert send(starter, ids["execution"], "add").status_code == 403
    assert starter.post(f"{API}/executions/{ids['execution']}/cancel/").status_code == 403

    operator = client_for(user_with("op", *READ, "statecharts.change_execution"))
    assert send(operator, ids["execution"], "add").status_code == 200
    assert operator.post(f"{API}/executions/{ids['execution']}/cancel/").status_code == 200
    assert Execution.objects.get(pk=ids["execution"]).status == "cancelled"


def test_token_authentication(chart: Chart) -> None:
    user_with("tokenuser", *READ)
    client = APIClient()
    response = client.post(
        f"{API}/auth/token/", {"username": "tokenuser", "password": "pw"}, format="json"
    )
    assert response.status_code == 200
    key = response.json()["token"]
    assert Token.objects.get(user__username="tokenuser").key == key
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get(f"{API}/charts/").json()["count"] == 1
    client.credentials(HTTP_AUTHORIZATION="Token wrong")
    assert client.get(f"{API}/charts/").status_code == 401
    bad = APIClient().post(f"{API}/auth/token/", {"username": "tokenuser", "password": "no"})
    assert bad.status_code == 400


def test_session_authentication_and_the_browsable_api(chart: Chart) -> None:
    user_with("browser", *READ)
    client = APIClient()
    assert client.login(username="browser", password="pw")
    for url in ("/", "/charts/", f"/charts/{chart.pk}/", "/executions/", "/timers/"):
        response = client.get(API + url, HTTP_ACCEPT="text/html")
        assert response.status_code == 200, url
        assert response["Content-Type"].startswith("text/html")
    page = client.get(f"{API}/executions/", HTTP_ACCEPT="text/html").content.decode()
    assert "Filters" in page  # django-filter's form, drawn by the browsable API
    assert client.get("/api-auth/login/").status_code == 200


def test_execution_views_never_run_in_a_request_transaction() -> None:
    # The stepper commits each step itself; ATOMIC_REQUESTS must not wrap these views.
    for url in ("/api/executions/", "/api/executions/1/send/", "/api/executions/1/cancel/"):
        assert "default" in resolve(url).func._non_atomic_requests


# ---- the OpenAPI schema ----------------------------------------------------------------------


EXPECTED_PATHS = {
    "/api/auth/token/",
    "/api/charts/",
    "/api/charts/{id}/",
    "/api/charts/{id}/diagram.svg",
    "/api/executions/",
    "/api/executions/{id}/",
    "/api/executions/migrate/",
    "/api/executions/erase/",
    "/api/executions/{id}/trace/",
    "/api/outbox/",
    "/api/outbox/{id}/",
    "/api/outbox/{id}/retry/",
    "/api/executions/{id}/send/",
    "/api/executions/{id}/cancel/",
    "/api/executions/{id}/history/",
    "/api/executions/{id}/diagram.svg",
    "/api/timers/",
    "/api/timers/{id}/",
    "/api/timers/{id}/fire-now/",
    "/api/timers/{id}/cancel/",
    "/api/timers/{id}/reschedule/",
    "/api/route-timers/",
    "/api/route-timers/{id}/",
    "/api/route-timers/{id}/fire-now/",
    "/api/route-timers/{id}/cancel/",
    "/api/route-timers/{id}/reschedule/",
    "/api/route-deliveries/{id}/mark-delivered/",
    "/api/route-deliveries/{id}/mark-failed/",
    "/api/invocations/{id}/retry-now/",
    "/api/invocations/{id}/cancel/",
    "/api/invocations/",
    "/api/invocations/{id}/",
    "/api/route-deliveries/",
    "/api/route-deliveries/{id}/",
    "/api/basichttp-addresses/",
    "/api/basichttp-addresses/{execution}/",
    "/api/basichttp-addresses/{execution}/rotate/",
    "/api/schema/",
}


def test_the_schema_is_a_valid_openapi_3_document_listing_every_endpoint(api: APIClient) -> None:
    response = api.get(f"{API}/schema/", {"format": "json"})
    assert response.status_code == 200
    schema = json.loads(response.content)
    assert schema["openapi"].startswith("3.")
    validate_schema(schema)  # against the OpenAPI 3 meta-schema; raises if invalid
    assert set(schema["paths"]) == EXPECTED_PATHS
    assert set(schema["paths"]["/api/executions/"]) == {"get", "post"}
    assert set(schema["paths"]["/api/timers/"]) == {"get"}
    send_op = schema["paths"]["/api/executions/{id}/send/"]["post"]
    assert {"200", "400", "404", "409"} <= set(send_op["responses"])
    filters = {p["name"] for p in schema["paths"]["/api/executions/"]["get"]["parameters"]}
    assert {"chart", "status", "business_key", "created_after", "created_before", "page"} <= (
        filters
    )
    assert {"tokenAuth", "cookieAuth"} <= set(schema["components"]["securitySchemes"])

    as_yaml = api.get(f"{API}/schema/")  # YAML is the default rendering
    assert as_yaml.status_code == 200
    assert yaml.safe_load(as_yaml.content)["paths"].keys() == schema["paths"].keys()


def test_the_schema_generates_without_warnings(tmp_path: Any) -> None:
    call_command(
        "spectacular",
        "--validate",
        "--fail-on-warn",
        "--custom-settings",
        "statecharts.api.schema.SCHEMA_SETTINGS",
        "--file",
        str(tmp_path / "schema.yaml"),
    )
    document = yaml.safe_load((tmp_path / "schema.yaml").read_text())
    assert set(document["paths"]) == EXPECTED_PATHS


# ---- diagrams (statecharts.diagram, imported when first asked for) ---------------------------


@pytest.fixture
def fake_renderer(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, tuple[str, ...]]]:
    """A stand-in statecharts.diagram that records what the views ask it to draw."""
    calls: list[tuple[Any, tuple[str, ...]]] = []

    def render_svg(
        compiled: Any, active: tuple[str, ...] = (), invoking: tuple[str, ...] = ()
    ) -> str:
        calls.append((compiled, active))
        return f'<svg xmlns="http://www.w3.org/2000/svg"><title>{",".join(active)}</title></svg>'

    module = types.ModuleType("statecharts.diagram")
    module.render_svg = render_svg  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "statecharts.diagram", module)
    return calls


def test_diagrams_are_svg_with_the_active_states(api: APIClient, fake_renderer: list[Any]) -> None:
    nested = Chart.objects.load(NESTED)
    response = api.get(f"{API}/charts/{nested.pk}/diagram.svg")
    assert response.status_code == 200
    assert response["Content-Type"] == "image/svg+xml"
    assert response.content.startswith(b"<svg")
    compiled, active = fake_renderer[-1]
    assert compiled is nested.compiled() and active == ()

    pk = start(api, nested)["id"]
    response = api.get(f"{API}/executions/{pk}/diagram.svg")
    assert response.status_code == 200
    assert fake_renderer[-1][1] == ("outer", "inner")
    assert b"<title>outer,inner</title>" in response.content


def test_diagram_errors_are_json(api: APIClient, fake_renderer: list[Any]) -> None:
    for url in ("/charts/9999/diagram.svg", "/executions/9999/diagram.svg"):
        response = api.get(API + url)
        assert response.status_code == 404
        assert response["Content-Type"] == "application/json"
        assert response.json()["detail"]
    assert APIClient().get(f"{API}/charts/1/diagram.svg").status_code == 401
    assert not fake_renderer


def test_a_missing_renderer_is_a_501(
    api: APIClient, chart: Chart, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "statecharts.diagram", None)  # import fails
    response = api.get(f"{API}/charts/{chart.pk}/diagram.svg")
    assert response.status_code == 501
    assert "statecharts.diagram" in response.json()["detail"]


def test_diagrams_with_the_real_renderer(api: APIClient, chart: Chart) -> None:
    """The API serves statecharts.diagram's own SVG (no skip: a rename must fail here), and
    an execution's diagram highlights where it stands."""
    response = api.get(f"{API}/charts/{chart.pk}/diagram.svg")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("image/svg+xml")
    svg = response.content.decode()
    assert re.search(r'<svg[^>]*class="sc-diagram"', svg), svg[:200]
    for state in ("cart", "paying", "shipped"):
        assert f'data-state="{state}"' in svg
    assert not re.search(r'class="sc-state sc-\w+ active"', svg)  # a chart's: none highlighted
    pk = start(api, chart)["id"]
    response = api.get(f"{API}/executions/{pk}/diagram.svg")
    assert response.status_code == 200
    svg = response.content.decode()
    assert re.search(r'class="sc-state sc-\w+ active" data-state="cart"', svg)
    assert re.search(r'class="sc-state sc-\w+ inactive" data-state="paying"', svg)
