"""An operator's record of an in-doubt route delivery's fate (routes.operating): mark
delivered / mark failed, through Python, the admin, the API and ``manage.py route_delivery``;
only a delivery in doubt, behind each mark's own permission, recorded in the execution's
history, nothing delivered again."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.auth.models import Permission, User
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from routes import ledger, operating
from routes.base import RouteMessage
from routes.models import DeliveryStatus, RouteDelivery
from statecharts import stepper
from statecharts.models import Chart, HistoryEntry
from statecharts.models.history import Disposition
from statecharts.policies import refusals
from tests.routes.recording import Recorder

pytestmark = pytest.mark.django_db

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="null"'
IDLE = f'<scxml {NS} initial="s"><state id="s"/></scxml>'


def claimed(ago: timedelta = timedelta(hours=1)) -> RouteDelivery:
    """A delivery claimed ``ago`` and never settled (a worker died mid-action)."""
    execution = stepper.start(Chart.objects.load(IDLE))
    message = RouteMessage(
        route="record", type="record", target="ada", name="nudge", data=None, payload=None,
        send_id="nudge", send_ordinal=1, session_id=execution.session_id,
        execution_id=execution.pk,
    )  # fmt: skip
    row = ledger.claim(message, f"{execution.session_id}:1", timezone.now() - ago)
    assert row is not None
    return row


def test_mark_records_the_fate_and_the_operator_and_delivers_nothing(
    recorder: type[Recorder],
) -> None:
    delivery = claimed()
    context = {"door": "command"}
    assert (
        operating.mark(
            delivery.pk,
            "mark_failed",
            reason="no such order at the far end",
            caller_context=context,
        )
        == "failed"
    )
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.FAILED
    assert delivery.reason == "marked failed by an operator: no such order at the far end"
    assert delivery.settled is not None
    entry = HistoryEntry.objects.get(disposition=Disposition.OPERATED)
    assert entry.input["row"] == {
        "route_delivery": delivery.pk, "key": delivery.key, "outcome": "failed"}  # fmt: skip
    assert (entry.reason, entry.caller_context) == ("no such order at the far end", context)
    assert recorder.deliveries == []
    with pytest.raises(operating.NotInDoubt) as again:
        operating.mark(delivery.pk, "mark_delivered", reason="changed my mind")
    refusal = refusals.refusal(again.value)
    assert refusal is not None and refusal.reason is refusals.Reason.REFUSED


def test_a_delivery_claimed_recently_may_still_be_in_flight_and_is_refused() -> None:
    delivery = claimed(ago=timedelta(seconds=1))
    with pytest.raises(operating.NotInDoubt, match="may still be in flight"):
        operating.mark(delivery.pk, "mark_delivered", reason="seen it")
    assert RouteDelivery.objects.get(pk=delivery.pk).status == DeliveryStatus.CLAIMED
    with pytest.raises(RouteDelivery.DoesNotExist):
        operating.mark(delivery.pk + 100, "mark_delivered", reason="x")


def user_with(*perms: str, name: str) -> User:
    user = User.objects.create_user(name, password="pw", is_staff=True)
    for perm in perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    return user


def test_each_door_marks_behind_its_permission() -> None:
    first, second, third = claimed(), claimed(), claimed()
    # The admin: a confirmation page with the reason, then a count per outcome.
    client = Client()
    client.force_login(user_with("routes.view_routedelivery",
                                 "routes.mark_delivered_routedelivery", name="admin"))  # fmt: skip
    changelist = reverse("admin:routes_routedelivery_changelist")

    def act(action: str, **extra: Any) -> Any:
        data = {"action": action, ACTION_CHECKBOX_NAME: [str(first.pk)], **extra}
        return client.post(changelist, data, follow=True)

    assert "No action selected" in act("mark_failed", post="yes", reason="x").content.decode()
    assert "Record 1 delivery(ies) in doubt as delivered?" in act("mark_delivered").content.decode()
    done = act("mark_delivered", post="yes", reason="the order exists")
    assert [str(m) for m in done.context["messages"]][-1] == "Mark delivered: 1 delivered."
    assert RouteDelivery.objects.get(pk=first.pk).status == DeliveryStatus.DELIVERED

    # The API.
    api = APIClient()
    api.force_authenticate(user_with("routes.mark_failed_routedelivery", name="api"))
    url = f"/api/route-deliveries/{second.pk}/mark-failed/"
    assert api.post(f"/api/route-deliveries/{second.pk}/mark-delivered/", {"reason": "x"},
                    format="json").status_code == 403  # fmt: skip
    assert api.post(url, {}, format="json").status_code == 400
    answer = api.post(url, {"reason": "bounced"}, format="json")
    assert (answer.status_code, answer.json()) == (200, {"id": second.pk, "outcome": "failed"})
    assert api.post(url, {"reason": "again"}, format="json").status_code == 409

    # The command.
    out = StringIO()
    call_command("route_delivery", "mark-delivered", "--in-doubt", "--reason", "ok", stdout=out)
    assert out.getvalue().strip() == "mark-delivered: 1 delivered"
    assert RouteDelivery.objects.get(pk=third.pk).status == DeliveryStatus.DELIVERED
    with pytest.raises(CommandError, match=f"route delivery {third.pk} is delivered"):
        call_command("route_delivery", "mark-failed", str(third.pk), "--reason", "x")
