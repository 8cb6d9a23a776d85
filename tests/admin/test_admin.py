"""The admin: pages render with their key content; actions go through the stepper."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
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
