"""One read model (statecharts.operations.inspection) behind the admin, the API and ``statechart
show``:
the three doors show the same execution, and none of them fails on a damaged row."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from statecharts import extensions
from statecharts.models import Chart, Execution, HistoryEntry
from statecharts.operations.inspection import Unreadable, chart_hints, inspect
from timers.models import Timer

pytestmark = pytest.mark.django_db

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0"'
# A compound holding a parallel holding two compound regions: four levels of ancestors.
NESTED = f"""<scxml {NS} name="nested" datamodel="ecmascript" initial="main">
  <datamodel><data id="n" expr="1"/><data id="label" expr="'start'"/></datamodel>
  <state id="main" initial="work">
    <parallel id="work">
      <state id="left" initial="l1">
        <state id="l1">
          <onentry><send id="poke" event="poke" delay="10s"/></onentry>
          <transition event="go" target="l2"><assign location="n" expr="_event.data.n"/>
          </transition>
        </state>
        <state id="l2"/>
      </state>
      <state id="right"><state id="r1"/></state>
    </parallel>
  </state>
</scxml>"""
ALL_ACTIVE = ["main", "work", "left", "l1", "right", "r1"]  # document order


@pytest.fixture
def user() -> User:
    return User.objects.create_superuser("admin", "admin@example.com", "pw")


@pytest.fixture
def admin_client(client: Client, user: User) -> Client:
    client.force_login(user)
    return client


@pytest.fixture
def api(user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def execution() -> Execution:
    return Execution.objects.start(Chart.objects.load(NESTED), business_key="n-1")


def admin_page(client: Client, execution: Execution) -> str:
    page = client.get(reverse("admin:statecharts_execution_change", args=[execution.pk]))
    assert page.status_code == 200
    return page.content.decode()


def highlighted(svg: str) -> list[str]:
    """The states a rendered diagram highlights, in the document's order."""
    return re.findall(r'<g class="sc-state [\w-]+ active" data-state="([^"]+)"', svg)


def show(execution: Execution, *options: str) -> str:
    out = io.StringIO()
    call_command("statechart", "show", str(execution.pk), *options, stdout=out)
    return out.getvalue()


def test_the_admin_the_api_and_show_highlight_the_same_active_states(
    admin_client: Client, api: APIClient, execution: Execution
) -> None:
    assert execution.configuration == ["l1", "r1"]  # what the row stores: atomic states
    admin = highlighted(admin_page(admin_client, execution))
    detail = api.get(f"/api/executions/{execution.pk}/").json()
    svg = api.get(f"/api/executions/{execution.pk}/diagram.svg").content.decode()
    document = json.loads(show(execution, "--json"))
    assert admin == detail["active_states"] == highlighted(svg) == document["active_states"]
    assert admin == ALL_ACTIVE
    assert detail["configuration"] == document["configuration"] == ["l1", "r1"]
    assert "active states: main work left l1 right r1" in show(execution)


def test_the_three_doors_show_the_same_datamodel_timers_and_history(
    admin_client: Client, api: APIClient, execution: Execution
) -> None:
    execution.send("go", {"n": 7, "note": "é"})
    body = admin_page(admin_client, execution)
    detail = api.get(f"/api/executions/{execution.pk}/").json()
    document = json.loads(show(execution, "--json"))
    assert detail["datamodel"] == document["datamodel"] == {"n": 7, "label": "start"}
    assert "&quot;label&quot;: &quot;start&quot;,\n  &quot;n&quot;: 7" in body
    # The pending timer: the API's pending_timers and show's timers section, one read.
    [pending] = detail["pending_timers"]
    [shown] = document["timers"]["pending"]
    assert pending["id"] == shown["id"] and pending["send_id"] == shown["send_id"] == "poke"
    assert "poke" in body
    history = api.get(f"/api/executions/{execution.pk}/history/").json()["results"]
    assert [h["seq"] for h in history] == [h["seq"] for h in document["history"]] == [1, 2]
    # The admin's data column is JSON, as the datamodel panel is (never a Python repr).
    data = re.findall(r'<td class="sc-data"><code>(.*?)</code></td>', body, re.S)
    assert '{&quot;n&quot;: 7, &quot;note&quot;: &quot;é&quot;}' in [
        re.sub(r"<[^>]+>", "", shown) for shown in data
    ]
    assert "{&#x27;n&#x27;" not in body


def test_the_read_model_of_a_nested_execution(execution: Execution) -> None:
    view = inspect(execution, now=datetime(2030, 1, 1, tzinfo=UTC))
    assert view.atomic_states == ("l1", "r1")
    assert view.active_states == tuple(ALL_ACTIVE)
    assert view.where == "status: active; in states l1, r1"
    assert view.title == "nested v1 · n-1"
    assert view.unreadable == {}
    assert [row.input for row in view.history()] == ["start"]


# ---- damaged rows ----------------------------------------------------------------------------


def test_a_position_that_cannot_be_decoded_is_shown_as_unreadable(
    admin_client: Client, api: APIClient, execution: Execution
) -> None:
    Execution.objects.filter(pk=execution.pk).update(position=b"\x00not a position")
    execution.refresh_from_db()
    view = inspect(execution)
    assert isinstance(view.datamodel, Unreadable)
    assert "the position cannot be read" in view.datamodel.reason
    body = admin_page(admin_client, execution)
    assert "unreadable datamodel: the position cannot be read" in body
    assert highlighted(body) == ALL_ACTIVE  # the rest of the page still reads
    detail = api.get(f"/api/executions/{execution.pk}/")
    assert detail.status_code == 200
    assert detail.json()["datamodel"] is None
    assert "the position cannot be read" in detail.json()["unreadable"]["datamodel"]
    assert "unreadable datamodel: the position cannot be read" in show(execution)
    assert json.loads(show(execution, "--json"))["datamodel"] is None


def test_a_damaged_configuration_history_timer_and_chart_never_fail_a_page(
    admin_client: Client, api: APIClient, execution: Execution
) -> None:
    Execution.objects.filter(pk=execution.pk).update(configuration={"not": "a list"})
    HistoryEntry.objects.filter(execution=execution).update(
        input="garbage", effects={"x": 1}, configuration_after="nope"
    )
    Timer.objects.filter(execution=execution).update(event="oops")
    Chart.objects.filter(pk=execution.chart_id).update(source="<scxml")  # edited in place
    execution.refresh_from_db()

    view = inspect(execution)
    assert set(view.unreadable) == {"configuration", "chart"}
    assert view.active_states == ()
    [row] = view.history()
    assert row.input == "(unreadable input)" and row.effects == ()
    assert view.sections["timers"].pending[0].event == "(unreadable event)"

    body = admin_page(admin_client, execution)
    assert "no diagram:" in body and "(unreadable event)" in body
    assert "unreadable configuration: the stored configuration is not a list" in body
    detail = api.get(f"/api/executions/{execution.pk}/")
    assert detail.status_code == 200
    assert set(detail.json()["unreadable"]) == {"configuration", "chart"}
    assert detail.json()["active_states"] == []
    assert "(unreadable event)" in show(execution)
    assert json.loads(show(execution, "--json"))["unreadable"].keys() == {"configuration", "chart"}
    listing = admin_client.get(reverse("admin:statecharts_historyentry_changelist"))
    assert listing.status_code == 200 and "(unreadable input)" in listing.content.decode()


@pytest.fixture
def broken_section() -> Iterator[None]:
    """A contributed section whose read fails, with its panel (from an installed app)."""

    def read(execution: Execution, now: datetime) -> object:
        raise RuntimeError("the broken section's table is gone")

    extensions.register(
        extensions.Section(app="statecharts", name="broken", read=read),
        extensions.Panel(app="statecharts", section="broken", title="Broken", template="x.html"),
    )
    yield
    extensions.sections.remove("broken")
    extensions.panels.remove("broken")


def test_a_failing_section_is_shown_as_unreadable_not_raised(
    admin_client: Client, api: APIClient, execution: Execution, broken_section: None
) -> None:
    body = admin_page(admin_client, execution)
    assert "<h2>Broken</h2>" in body
    assert "unreadable: RuntimeError: the broken section&#x27;s table is gone" in body
    detail = api.get(f"/api/executions/{execution.pk}/").json()
    assert detail["unreadable"] == {"broken": "RuntimeError: the broken section's table is gone"}
    assert len(detail["pending_timers"]) == 1  # the other sections still read
    assert "broken: unreadable: RuntimeError" in show(execution)


# ---- the registries --------------------------------------------------------------------------


def test_a_name_belongs_to_the_app_that_registered_it_first() -> None:
    def read(execution: Execution, now: datetime) -> None:
        return None

    with pytest.raises(ImproperlyConfigured, match="'timers' registered already"):
        extensions.register(extensions.Section(app="someapp", name="timers", read=read))
    with pytest.raises(ImproperlyConfigured, match="the read model's own"):
        extensions.register(extensions.Section(app="someapp", name="datamodel", read=read))
    assert extensions.sections.get("timers").app == "timers"  # type: ignore[union-attr]


def test_contributions_of_apps_that_are_not_installed_are_not_used() -> None:
    def read(execution: Execution, now: datetime) -> None:
        return None

    extensions.register(extensions.Section(app="not_installed", name="ghost", read=read))
    try:
        assert "ghost" not in [section.name for section in extensions.sections]
        assert extensions.sections.get("ghost") is None
    finally:
        extensions.sections.remove("ghost")


# ---- hints derived from the chart -------------------------------------------------------------


def test_hints_come_from_the_charts_data_and_transitions() -> None:
    hints = chart_hints(Chart.objects.load(NESTED).compiled())
    assert hints.data_ids == ("n", "label")
    assert json.loads(hints.start_example) == {"n": 1, "label": "start"}
    [go] = hints.events
    assert (go.name, go.data_keys, go.states) == ("go", ("n",), ("l1",))
    assert go.data_example == '{"n": …}'
    assert hints.accepted_in(["l2", "r1"]) == ()


def test_the_admin_pages_a_long_history_newest_first(
    admin_client: Client, execution: Execution
) -> None:
    for number in range(54):
        execution.send("go" if number == 0 else "nothing", {"n": number})
    assert execution.steps == 55
    url = reverse("admin:statecharts_execution_change", args=[execution.pk])

    def seqs(page: str) -> list[int]:
        rows = re.findall(r"<tr[^>]*>\s*<td>(\d+)</td>", page)
        return [int(seq) for seq in rows]

    first = admin_client.get(url).content.decode()
    assert seqs(first) == list(range(55, 5, -1))
    assert "History (55 inputs, newest first)" in first
    assert 'href="?history=2">older' in first
    second = admin_client.get(url, {"history": 2}).content.decode()
    assert seqs(second) == [5, 4, 3, 2, 1] and 'href="?history=1">' in second
    assert seqs(admin_client.get(url, {"history": "nope"}).content.decode()) == seqs(first)
