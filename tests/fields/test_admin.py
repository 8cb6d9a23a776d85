"""``statecharts.admin.StatechartFieldAdminMixin``: the host model's admin shows the diagram
and a button per event the user can send now; each button is one step with the user
recorded, a refusal is the refusal table's message."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from statecharts.models import Chart, Execution
from tests.fields.hostapp.models import Order, Ticket
from tests.fields.test_statechart_field import ORDER

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client: Client) -> Client:
    client.force_login(User.objects.create_superuser("admin", "admin@example.com", "pw"))
    return client


@pytest.fixture
def order() -> Order:
    Chart.objects.load(ORDER)
    return Order.objects.create(number="42")


def _send_url(order: Order) -> str:
    return reverse("admin:fields_hostapp_order_statechart_send", args=[order.pk, "flow"])


def test_the_change_page_shows_the_diagram_and_the_available_events(
    admin_client: Client, order: Order
) -> None:
    page = admin_client.get(reverse("admin:fields_hostapp_order_change", args=[order.pk]))
    html = page.content.decode()
    assert page.status_code == 200
    assert "<svg" in html and "awaiting_payment" in html
    assert f'formaction="{_send_url(order)}"' in html
    assert 'name="statechart_event" value="pay"' in html
    assert 'value="ship"' not in html  # not available in awaiting_payment


def test_a_button_is_one_step_with_the_user_recorded(admin_client: Client, order: Order) -> None:
    change = reverse("admin:fields_hostapp_order_change", args=[order.pk])
    answer = admin_client.post(
        _send_url(order), {"statechart_event": "pay", "statechart_token": "t-1", "number": "x"}
    )
    assert answer.status_code == 302 and answer["Location"] == change
    order.flow.refresh_from_db()
    assert order.flow.in_state("paid")
    entry = order.flow.history.last()
    assert entry.input["event"]["name"] == "pay"
    assert entry.caller_context["user"]["username"] == "admin"
    assert entry.caller_context["door"] == "admin"
    Order.objects.filter(pk=order.pk).update(number="42")  # the form's other fields: ignored
    again = admin_client.post(
        _send_url(order), {"statechart_event": "pay", "statechart_token": "t-1"}, follow=True
    )
    assert "already posted" in again.content.decode()
    assert order.flow.history.count() == 2  # the start and one pay


def test_a_refused_send_answers_with_the_refusal_tables_message(
    client: Client, order: Order
) -> None:
    clerk = User.objects.create_user("clerk", password="pw", is_staff=True)
    clerk.user_permissions.add(
        *Permission.objects.filter(codename__in=["change_order", "view_order"])
    )
    client.force_login(clerk)
    page = client.get(reverse("admin:fields_hostapp_order_change", args=[order.pk])).content
    assert b'name="statechart_event"' not in page  # nothing this user may send
    answer = client.post(
        _send_url(order), {"statechart_event": "pay", "statechart_token": "t-2"}, follow=True
    )
    assert "Not sent" in answer.content.decode()
    order.flow.refresh_from_db()
    assert order.flow.in_state("awaiting_payment")


def test_a_user_who_cannot_change_the_object_cannot_press(client: Client, order: Order) -> None:
    viewer = User.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(*Permission.objects.filter(codename="view_order"))
    client.force_login(viewer)
    assert client.post(_send_url(order), {"statechart_event": "pay"}).status_code == 403
    order.flow.refresh_from_db()
    assert order.flow.in_state("awaiting_payment")


def test_adding_an_object_in_the_admin_starts_its_execution(admin_client: Client) -> None:
    Chart.objects.load(ORDER)
    answer = admin_client.post(
        reverse("admin:fields_hostapp_order_add"), {"number": "7", "total": "5"}
    )
    assert answer.status_code == 302
    assert Order.objects.get(number="7").flow.in_state("awaiting_payment")


def test_the_delete_page_lists_a_protected_live_execution(admin_client: Client) -> None:
    Chart.objects.load(ORDER)
    ticket = Ticket.objects.create(title="t")
    execution = ticket.flow
    page = admin_client.get(reverse("admin:fields_hostapp_ticket_delete", args=[ticket.pk]))
    assert f"its flow execution {execution.pk} is active" in page.content.decode()
    assert Execution.objects.filter(pk=execution.pk).exists()


def test_a_declared_fieldset_gets_the_statechart_panel(admin_client: Client) -> None:
    Chart.objects.load(ORDER)
    ticket = Ticket.objects.create(title="t")
    page = admin_client.get(reverse("admin:fields_hostapp_ticket_change", args=[ticket.pk]))
    assert "<svg" in page.content.decode() and "Statechart" in page.content.decode()
