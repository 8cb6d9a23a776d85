"""The admin: pages render with their key content; actions go through the stepper."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client, override_settings
from django.urls import reverse

from statecharts.models import Chart, Execution
from timers.models import Timer

pytestmark = pytest.mark.django_db

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0"'
FLOW = f"""<scxml {NS} name="flow" datamodel="ecmascript" initial="idle">
  <datamodel><data id="total" expr="0"/></datamodel>
  <state id="idle">
    <onentry><send id="nudge" event="nudge" delay="1d"/></onentry>
    <transition event="pay" target="paid"><assign location="total" expr="_event.data.amount"/>
    </transition>
  </state>
  <state id="paid"><transition event="ship" target="shipped"/></state>
  <final id="shipped"/>
</scxml>"""


@pytest.fixture
def admin_client(client: Client) -> Client:
    user = User.objects.create_superuser("admin", "admin@example.com", "pw")
    client.force_login(user)
    return client


@pytest.fixture
def execution() -> Execution:
    return Execution.objects.start(Chart.objects.load(FLOW), business_key="order-7")


def test_every_changelist_renders(admin_client: Client, execution: Execution) -> None:
    for name in [
        "statecharts_chart",
        "statecharts_execution",
        "statecharts_historyentry",
        "statecharts_outboxmessage",
        "timers_timer",
    ]:
        response = admin_client.get(reverse(f"admin:{name}_changelist"))
        assert response.status_code == 200, name
    page = admin_client.get(reverse("admin:statecharts_execution_changelist"), {"q": "order-7"})
    assert "order-7" in page.content.decode()
    filtered = admin_client.get(
        reverse("admin:statecharts_execution_changelist"), {"status__exact": "completed"}
    )
    assert "order-7" not in filtered.content.decode()


def test_adding_an_invalid_chart_lists_every_problem(admin_client: Client) -> None:
    bad = (
        f'<scxml {NS} initial="nowhere">\n<state id="a"><transition target="b"/></state>\n</scxml>'
    )
    response = admin_client.post(
        reverse("admin:statecharts_chart_add"), {"source": bad, "name": "", "version": ""}
    )
    assert response.status_code == 200
    body = response.content.decode()
    assert "nowhere" in body and "2:" in body  # line:column of the bad transition
    assert Chart.objects.count() == 0


def test_adding_a_chart_then_starting_an_execution(admin_client: Client) -> None:
    response = admin_client.post(
        reverse("admin:statecharts_chart_add"), {"source": FLOW, "name": "", "version": "2"}
    )
    assert response.status_code == 302
    chart = Chart.objects.get()
    assert (chart.name, chart.version) == ("flow", "2")
    page = admin_client.get(reverse("admin:statecharts_chart_change", args=[chart.pk]))
    body = page.content.decode()
    assert page.status_code == 200
    assert 'data-state="idle"' in body and 'data-state="shipped"' in body  # the diagram
    assert "<svg" in body and "Start an execution" in body
    assert "initial=&quot;idle&quot;" in body  # the numbered source, escaped
    started = admin_client.post(
        reverse("admin:statecharts_chart_start", args=[chart.pk]),
        {"data": '{"total": 5}', "business_key": "k-1"},
    )
    execution = Execution.objects.get()
    assert started.status_code == 302
    assert started["Location"] == reverse("admin:statecharts_execution_change", args=[execution.pk])
    assert execution.business_key == "k-1"


def test_starting_with_bad_json_starts_nothing(admin_client: Client) -> None:
    chart = Chart.objects.load(FLOW)
    response = admin_client.post(
        reverse("admin:statecharts_chart_start", args=[chart.pk]),
        {"data": "[1,", "business_key": ""},
        follow=True,
    )
    assert "not valid JSON" in response.content.decode()
    assert Execution.objects.count() == 0


def test_the_execution_page_shows_where_it_stands(
    admin_client: Client, execution: Execution
) -> None:
    page = admin_client.get(reverse("admin:statecharts_execution_change", args=[execution.pk]))
    assert page.status_code == 200
    body = page.content.decode()
    assert ">status: active; in state idle<" in body  # the status is never mixed with a state
    assert "<svg" in body and 'data-state="idle"' in body
    assert "&quot;total&quot;: 0" in body  # the datamodel, pretty JSON (escaped)
    assert "nudge" in body and "pending" in body  # the pending timer
    assert "Send event" in body and "Cancel execution" in body


def test_sending_an_event_through_the_admin_steps_the_execution(
    admin_client: Client, execution: Execution
) -> None:
    url = reverse("admin:statecharts_execution_send", args=[execution.pk])
    response = admin_client.post(url, {"name": "pay", "data": '{"amount": 12}'}, follow=True)
    # The event name as it is spelled, the status apart from the state.
    assert "Sent pay: applied (status: active; in state paid)" in response.content.decode()
    execution.refresh_from_db()
    assert execution.configuration == ["paid"]
    assert Timer.objects.get().status == "pending"  # not cancelled: the chart does not cancel


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"name": "pay", "data": "{nope"}, "not valid JSON"),
        ({"name": "two words", "data": ""}, "one word"),
    ],
)
def test_bad_input_to_the_send_action_changes_nothing(
    admin_client: Client, execution: Execution, data: dict[str, str], message: str
) -> None:
    url = reverse("admin:statecharts_execution_send", args=[execution.pk])
    response = admin_client.post(url, data, follow=True)
    assert message in response.content.decode()
    execution.refresh_from_db()
    assert execution.steps == 1


def test_cancel_through_the_admin(admin_client: Client, execution: Execution) -> None:
    url = reverse("admin:statecharts_execution_cancel", args=[execution.pk])
    admin_client.post(url)
    execution.refresh_from_db()
    assert execution.status == "cancelled"
    page = admin_client.get(reverse("admin:statecharts_execution_change", args=[execution.pk]))
    assert "Send event" not in page.content.decode()  # a finished execution takes no actions


def test_the_send_and_cancel_views_answer_alike(admin_client: Client, execution: Execution) -> None:
    """The execution page's two step views (one helper, statecharts.admin.steps.step_view):
    POST only, a 404 for an unknown execution, the step's result as a message of its level,
    always back to the execution's page."""
    page = reverse("admin:statecharts_execution_change", args=[execution.pk])
    for view in ("send", "cancel"):
        url = reverse(f"admin:statecharts_execution_{view}", args=[execution.pk])
        assert admin_client.get(url).status_code == 405
        missing = reverse(f"admin:statecharts_execution_{view}", args=[execution.pk + 1000])
        assert admin_client.post(missing, {"name": "pay"}).status_code == 404

    def said(response: Any) -> list[tuple[str, str]]:
        assert response.redirect_chain == [(page, 302)]
        return [(m.level_tag, str(m)) for m in response.context["messages"]]

    send = reverse("admin:statecharts_execution_send", args=[execution.pk])
    unmatched = admin_client.post(send, {"name": "ship"}, follow=True)  # no transition in idle
    # (consumed, as SCXML says, and said to be: a warning)
    assert said(unmatched) == [
        ("warning", "Sent ship: applied, unhandled: no transition selected it "
         "(status: active; in state idle)")
    ]
    cancel = reverse("admin:statecharts_execution_cancel", args=[execution.pk])
    cancelled = admin_client.post(cancel, follow=True)
    assert said(cancelled) == [("success", "Cancel: applied (status: cancelled)")]
    # A finished execution discards its inputs: a warning for an event, not for a cancel.
    again = admin_client.post(cancel, follow=True)
    assert said(again) == [("success", "Cancel: discarded (status: cancelled)")]
    late = admin_client.post(send, {"name": "pay"}, follow=True)
    assert said(late) == [("warning", "Sent pay: discarded (status: cancelled)")]


def test_a_viewer_sees_the_execution_but_cannot_act(client: Client, execution: Execution) -> None:
    viewer = User.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_execution"))
    client.force_login(viewer)
    page = client.get(reverse("admin:statecharts_execution_change", args=[execution.pk]))
    assert page.status_code == 200 and "Send event" not in page.content.decode()
    url = reverse("admin:statecharts_execution_send", args=[execution.pk])
    assert client.post(url, {"name": "pay"}).status_code == 403
    assert (
        client.post(reverse("admin:statecharts_execution_cancel", args=[execution.pk])).status_code
        == 403
    )
    execution.refresh_from_db()
    assert execution.steps == 1


def test_machine_owned_rows_are_read_only(admin_client: Client, execution: Execution) -> None:
    timer = Timer.objects.get()
    assert admin_client.get(reverse("admin:timers_timer_add")).status_code == 403
    page = admin_client.get(reverse("admin:timers_timer_change", args=[timer.pk]))
    assert page.status_code == 200 and 'name="_save"' not in page.content.decode()
    assert admin_client.get(reverse("admin:statecharts_execution_add")).status_code == 403
    change = admin_client.get(reverse("admin:statecharts_execution_change", args=[execution.pk]))
    assert 'name="_save"' not in change.content.decode()
    delete = reverse("admin:statecharts_execution_delete", args=[execution.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 403
    assert Execution.objects.filter(pk=execution.pk).exists()


# ---- what a newcomer reads on the pages ------------------------------------------------------


def change_page(client: Client, execution: Execution) -> str:
    page = client.get(reverse("admin:statecharts_execution_change", args=[execution.pk]))
    assert page.status_code == 200
    return page.content.decode()


def test_an_execution_is_titled_by_its_chart_and_business_key_not_its_session_id(
    admin_client: Client, execution: Execution
) -> None:
    body = change_page(admin_client, execution)
    assert "<h2>flow v1 · order-7</h2>" in body
    assert "&rsaquo; flow v1 · order-7\n</div>" in body  # the breadcrumbs
    assert "<title>flow v1 · order-7 |" in body
    without_key = Execution.objects.start(execution.chart)
    assert f"<h2>flow v1 · execution {without_key.pk}</h2>" in change_page(
        admin_client, without_key
    )


def test_history_shows_data_as_json_and_effects_without_a_trailing_comma(
    admin_client: Client, execution: Execution
) -> None:
    execution.send("pay", {"amount": 12, "note": None})
    body = change_page(admin_client, execution)
    # Each JSON token in a span a line never breaks (statecharts.admin.display.json_tokens).
    data = re.findall(r'<td class="sc-data"><code>(.*?)</code></td>', body, re.S)
    assert data[0] == (
        '{<span class="sc-token">&quot;amount&quot;</span>: <span class="sc-token">12</span>, '
        '<span class="sc-token">&quot;note&quot;</span>: <span class="sc-token">null</span>}'
    )
    effects = re.findall(r'<td class="sc-effects">(.*?)</td>', body, re.S)
    # Newest first: the pay step changed only the datamodel; the start scheduled a timer.
    assert effects[0] == ""
    assert re.fullmatch(
        r'<span title="[^"]*"><span class="sc-token">send_delayed</span> '
        r'<span class="sc-token">nudge</span></span>',
        effects[1],
    )


@pytest.mark.parametrize(
    ("elapsed", "relative"),
    [(0, "in 8 s"), (5.2, "in 3 s"), (8, "due now"), (11, "3 s late"), (-3600 * 26, "in 1 d 2 h")],
)
def test_timer_due_times_show_seconds_and_how_far_off_they_are(
    admin_client: Client, elapsed: float, relative: str
) -> None:
    t0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
    chart = Chart.objects.load(FLOW.replace('delay="1d"', 'delay="8s"'))
    with override_settings(STATECHARTS={"CLOCK": lambda: t0}):
        execution = Execution.objects.start(chart)
    with override_settings(STATECHARTS={"CLOCK": lambda: t0 + timedelta(seconds=elapsed)}):
        body = change_page(admin_client, execution)
    assert "2030-01-01 12:00:08 UTC" in body
    assert f'<strong class="sc-relative">({relative})</strong>' in body


def test_the_send_form_offers_the_charts_events_and_the_data_they_read(
    admin_client: Client, execution: Execution
) -> None:
    body = change_page(admin_client, execution)
    datalist = re.search(r'<datalist id="statecharts-events">(.*?)</datalist>', body, re.S)
    assert datalist is not None
    assert re.findall(r'value="([^"]+)"', datalist.group(1)) == ["pay", "ship"]  # idle's first
    assert re.findall(r'class="button sc-pick" data-event="([^"]+)"', body) == ["pay"]
    assert 'placeholder="{&quot;amount&quot;: …}"' in body  # pay reads _event.data.amount
    assert "amount&quot;: 10}" not in body
    execution.send("pay", {"amount": 1})
    body = change_page(admin_client, execution)
    assert 'placeholder="optional"' in body  # ship reads no data


def test_the_start_form_suggests_the_charts_own_data(admin_client: Client) -> None:
    chart = Chart.objects.load(FLOW)
    page = admin_client.get(reverse("admin:statecharts_chart_change", args=[chart.pk]))
    body = page.content.decode()
    assert 'placeholder="{&quot;total&quot;: 0}"' in body
    assert "The chart's top-level data: total." in body
    started = admin_client.post(
        reverse("admin:statecharts_chart_start", args=[chart.pk]),
        {"data": "", "business_key": "k-9"},
        follow=True,
    )
    assert "Started flow v1 · k-9 (status: active; in state idle)" in started.content.decode()


def test_the_chart_page_shows_its_fields_first_and_the_close_bar_last(
    admin_client: Client,
) -> None:
    chart = Chart.objects.load(FLOW)
    body = admin_client.get(reverse("admin:statecharts_chart_change", args=[chart.pk]))
    text = body.content.decode()
    fields, diagram = text.index("Content hash:"), text.index("<h2>Diagram</h2>")
    source, close = text.index("<h2>Source</h2>"), text.index('class="submit-row"')
    assert fields < diagram < source < close
    assert text.count('class="submit-row"') == 1
    assert "Version:" in text  # a named chart always has a version (statecharts.versions)
    unnamed = Chart.objects.load(FLOW.replace(' name="flow"', "").replace('expr="0"', 'expr="2"'))
    text = admin_client.get(
        reverse("admin:statecharts_chart_change", args=[unnamed.pk])
    ).content.decode()
    assert "Version:" not in text  # no field of dashes for a chart without a version


def test_the_chart_list_names_each_chart_once_and_shows_versions_only_when_there_are_some(
    admin_client: Client,
) -> None:
    Chart.objects.load(FLOW.replace(' name="flow"', ""))  # unnamed: no version
    url = reverse("admin:statecharts_chart_changelist")
    body = admin_client.get(url).content.decode()
    headers = re.findall(r'<th scope="col" class="[^"]*column-(\w+)', body)
    assert headers == ["label", "short_hash", "execution_count", "created"]
    Chart.objects.load(FLOW.replace('expr="0"', 'expr="1"'), version="2")
    body = admin_client.get(url).content.decode()
    headers = re.findall(r'<th scope="col" class="[^"]*column-(\w+)', body)
    assert headers == ["label", "version_label", "short_hash", "execution_count", "created"]
    assert re.findall(r'<td class="field-version_label">([^<]*)</td>', body) == ["2", "(none)"]


def test_a_finished_execution_says_what_it_returned(admin_client: Client) -> None:
    chart = Chart.objects.load(
        FLOW.replace(
            '<final id="shipped"/>',
            '<final id="shipped"><donedata><param name="total" expr="total"/></donedata></final>',
        )
    )
    execution = Execution.objects.start(chart)
    execution.send("pay", {"amount": 12})
    execution.send("ship")
    body = change_page(admin_client, execution)
    assert ">status: completed; in state shipped<" in body
    assert "donedata: <code>{&quot;total&quot;: 12}</code>" in body
    assert "Send event" not in body


def test_the_execution_list_filters_by_the_state_an_execution_is_in(
    admin_client: Client,
) -> None:
    flow = Chart.objects.load(FLOW)
    idle = Execution.objects.start(flow, business_key="order-idle")
    paid = Execution.objects.start(flow, business_key="order-paid")
    paid.send("pay", {"amount": 3})
    changelist = reverse("admin:statecharts_execution_changelist")
    page = admin_client.get(changelist, {"chart__id__exact": flow.pk})
    body = page.content.decode()
    for state in ("idle", "paid", "shipped"):  # a choice per state of the chosen chart
        assert f"?chart__id__exact={flow.pk}&amp;in_state={state}" in body
    # With no chart chosen: the states of the charts that have executions.
    assert "?in_state=paid" in admin_client.get(changelist).content.decode()
    listed = admin_client.get(changelist, {"chart__id__exact": flow.pk, "in_state": "paid"})
    text = listed.content.decode()
    assert "order-paid" in text and "order-idle" not in text
    # A state no listed chart has (typed into the URL) still filters, and is shown as chosen.
    nowhere = admin_client.get(changelist, {"in_state": "nowhere"})
    assert nowhere.status_code == 200
    assert "order-paid" not in nowhere.content.decode()
    assert "order-idle" not in nowhere.content.decode()
    assert idle.pk != paid.pk


@pytest.mark.django_db(transaction=True)
def test_the_admin_steps_executions_with_atomic_requests_on(
    admin_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host with ATOMIC_REQUESTS: the stepper's durable transaction cannot nest in the
    request's, so the admin's views run outside it (the API's do too)."""
    from django.db import connection

    monkeypatch.setitem(connection.settings_dict, "ATOMIC_REQUESTS", True)
    execution = Execution.objects.start(Chart.objects.load(FLOW), business_key="order-8")
    url = reverse("admin:statecharts_execution_send", args=[execution.pk])
    response = admin_client.post(url, {"name": "pay", "data": '{"amount": 3}'}, follow=True)
    assert "Sent pay: applied" in response.content.decode()
    changelist = reverse("admin:statecharts_execution_changelist")
    admin_client.post(
        changelist,
        {"action": "cancel_selected", "_selected_action": [execution.pk], "post": "yes"},
    )
    execution.refresh_from_db()
    assert execution.status == "cancelled"
    assert [e.input["kind"] for e in execution.history.order_by("seq")] == [
        "start", "event", "cancel"
    ]
