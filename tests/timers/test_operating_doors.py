"""The operator's timer actions (timers.operating) through each door: the admin (single and
bulk, a reason to type, a result per row), the API (``/api/timers/{id}/fire-now/`` ...,
``/api/route-timers/...``) and ``manage.py timer_action``; each behind its own permission,
refused in the refusal table's words."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.auth.models import Permission, User
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from statecharts import stepper
from statecharts.models import Chart, Execution, HistoryEntry
from statecharts.models.history import Disposition
from tests.timers.test_operating import WAITER
from timers.models import Timer, TimerStatus

pytestmark = pytest.mark.django_db

TIMERS = "admin:timers_timer_changelist"


def user_with(*perms: str, name: str = "operator") -> User:
    user = User.objects.create_user(name, password="pw", is_staff=True)
    for perm in perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    return user


def admin_client(*perms: str, name: str = "operator") -> Client:
    client = Client()
    client.force_login(user_with("timers.view_timer", *perms, name=name))
    return client


def act(client: Client, action: str, pks: list[int], **extra: Any) -> Any:
    return client.post(
        reverse(TIMERS),
        {"action": action, ACTION_CHECKBOX_NAME: [str(pk) for pk in pks], **extra},
        follow=True,
    )


def messages_of(response: Any) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def pending_timers(count: int) -> list[Timer]:
    chart = Chart.objects.load(WAITER)
    executions = [stepper.start(chart) for _ in range(count)]
    return [Timer.objects.get(execution=execution) for execution in executions]


def operated(timer: Timer) -> HistoryEntry:
    return HistoryEntry.objects.get(
        execution_id=timer.execution_id, disposition=Disposition.OPERATED
    )


def test_admin_bulk_cancel_confirms_with_a_reason_then_answers_per_row() -> None:
    first, second = pending_timers(2)
    Timer.objects.filter(pk=second.pk).update(status=TimerStatus.FIRED)
    client = admin_client("timers.cancel_timer")
    page = act(client, "cancel_selected", [first.pk, second.pk])
    assert "Cancel 2 timer(s)?" in page.content.decode()
    assert Timer.objects.get(pk=first.pk).status == TimerStatus.PENDING
    again = act(client, "cancel_selected", [first.pk, second.pk], post="yes", reason="")
    assert "This field is required" in again.content.decode()  # the form, shown again
    done = act(client, "cancel_selected", [first.pk, second.pk], post="yes", reason="dup")
    said = messages_of(done)
    assert said[-1] == "Cancel: 1 cancelled, 1 refused."
    assert any(f"timer {second.pk} is fired" in line for line in said)
    assert Timer.objects.get(pk=first.pk).status == TimerStatus.CANCELLED
    entry = operated(first)
    assert entry.reason == "dup"
    assert entry.caller_context["door"] == "admin"
    assert entry.caller_context["user"]["username"] == "operator"


def test_admin_fire_now_and_reschedule_each_need_their_own_permission() -> None:
    (timer,) = pending_timers(1)
    cancel_only = admin_client("timers.cancel_timer", name="canceller")
    refused = act(cancel_only, "fire_now_selected", [timer.pk], post="yes", reason="x")
    assert refused.status_code == 200 and "No action selected" in refused.content.decode()
    assert Timer.objects.get(pk=timer.pk).status == TimerStatus.PENDING

    client = admin_client("timers.fire_timer", "timers.reschedule_timer")
    moved = act(client, "reschedule_selected", [timer.pk], post="yes", reason="later",
                due="2031-01-01 12:00:00")  # fmt: skip
    assert messages_of(moved)[-1] == "Reschedule: 1 rescheduled."
    assert Timer.objects.get(pk=timer.pk).due.year == 2031
    fired = act(client, "fire_now_selected", [timer.pk], post="yes", reason="now")
    assert messages_of(fired)[-1] == "Fire now: 1 fired."
    assert Execution.objects.get(pk=timer.execution_id).configuration == ["nudged"]


def api_as(*perms: str, name: str = "operator") -> APIClient:
    client = APIClient()
    client.force_authenticate(user_with("timers.view_timer", *perms, name=name))
    return client


def test_api_actions_need_their_permission_a_reason_and_answer_refusals() -> None:
    first, second = pending_timers(2)
    url = f"/api/timers/{first.pk}/cancel/"
    assert api_as(name="viewer").post(url, {"reason": "x"}, format="json").status_code == 403
    client = api_as("timers.cancel_timer", "timers.fire_timer", "timers.reschedule_timer")
    assert client.post(url, {}, format="json").status_code == 400  # no reason
    done = client.post(url, {"reason": "dup"}, format="json", HTTP_X_REQUEST_ID="req-1")
    assert (done.status_code, done.json()) == (200, {"id": first.pk, "outcome": "cancelled"})
    assert operated(first).caller_context["request_id"] == "req-1"
    again = client.post(url, {"reason": "dup"}, format="json")
    assert again.status_code == 409 and again.json()["reason"] == "refused"
    missing = client.post("/api/timers/999999/cancel/", {"reason": "x"}, format="json")
    assert missing.status_code == 404
    moved = client.post(
        f"/api/timers/{second.pk}/reschedule/",
        {"reason": "later", "due": "2031-01-01T12:00:00Z"},
        format="json",
    )
    assert moved.json()["outcome"] == "rescheduled"
    fired = client.post(f"/api/timers/{second.pk}/fire-now/", {"reason": "now"}, format="json")
    assert fired.json() == {"id": second.pk, "outcome": "fired"}


def test_the_command_acts_on_ids_or_a_filter_and_answers_refusals_in_one_line() -> None:
    first, second, third = pending_timers(3)
    out = StringIO()
    call_command("timer_action", "cancel", str(first.pk), "--reason", "dup", stdout=out)
    assert out.getvalue().strip() == "cancel: 1 cancelled"
    assert operated(first).caller_context["door"] == "command"
    with pytest.raises(CommandError, match=f"timer {first.pk} is cancelled"):
        call_command("timer_action", "fire-now", str(first.pk), "--reason", "x")
    with pytest.raises(CommandError, match="reschedule needs --due"):
        call_command("timer_action", "reschedule", str(second.pk), "--reason", "x")
    out = StringIO()
    call_command(
        "timer_action", "reschedule", "--execution", str(second.execution_id),
        "--due", "2031-01-01T00:00:00+00:00", "--reason", "later", stdout=out,
    )  # fmt: skip
    assert out.getvalue().strip() == "reschedule: 1 rescheduled"
    viewer = user_with("timers.view_timer", name="viewer")
    with pytest.raises(CommandError, match="not permitted"):
        call_command("timer_action", "fire-now", str(third.pk), "--reason", "x",
                     "--as-user", viewer.username)  # fmt: skip
    out = StringIO()
    call_command("timer_action", "fire-now", "--send-id", "nudge", "--reason", "now", stdout=out)
    assert out.getvalue().strip() == "fire-now: 2 fired"
