"""The admin's operations actions: cancel and erase executions in bulk, retry failed timers and
undeliverable messages; each with a confirmation page and its permission."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from statecharts import stepper
from statecharts.models import Execution, HistoryEntry, OutboxMessage
from statecharts.models.outbox import OutboxStatus
from statecharts.stepper import transaction as step_transaction
from tests.operations.world import T0, peer, signup
from timers.models import Timer, TimerStatus

pytestmark = pytest.mark.django_db

EXECUTIONS = "admin:statecharts_execution_changelist"
TIMERS = "admin:timers_timer_changelist"
OUTBOX = "admin:statecharts_outboxmessage_changelist"


def client_with(*perms: str, name: str = "operator") -> Client:
    user = User.objects.create_user(name, password="pw", is_staff=True)
    for perm in perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    client = Client()
    client.force_login(user)
    return client


def act(client: Client, changelist: str, action: str, pks: list[int], **extra: Any) -> Any:
    return client.post(
        reverse(changelist),
        {"action": action, ACTION_CHECKBOX_NAME: [str(pk) for pk in pks], **extra},
        follow=True,
    )


def messages_of(response: Any) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def test_bulk_cancel_confirms_first_then_cancels_each_in_its_own_step() -> None:
    client = client_with("statecharts.view_execution", "statecharts.change_execution")
    running = [signup(f"k{n}") for n in range(3)]
    finished = signup("done")
    stepper.send(finished, "signed_up")
    pks = [e.pk for e in [*running, finished]]

    page = act(client, EXECUTIONS, "cancel_selected", pks)
    body = page.content.decode()
    assert "Cancel 3 execution(s)?" in body and "completed: nothing to cancel" in body
    assert all(e.status == "active" for e in Execution.objects.filter(pk__in=pks[:3]))

    done = act(client, EXECUTIONS, "cancel_selected", [e.pk for e in running], post="yes")
    assert messages_of(done) == ["Cancel: 3 applied."]
    for execution in running:
        execution.refresh_from_db()
        assert execution.status == "cancelled"
        last = execution.history.order_by("-seq").first()
        assert last is not None and last.input["kind"] == "cancel"  # a step of its own
    # Cancelling again: each is recorded as discarded, not cancelled twice.
    again = act(client, EXECUTIONS, "cancel_selected", [running[0].pk], post="yes")
    assert messages_of(again) == ["Cancel: nothing was cancelled."]


def test_bulk_actions_need_their_permissions() -> None:
    viewer = client_with("statecharts.view_execution", name="viewer")
    execution = signup("k")
    listing = viewer.get(reverse(EXECUTIONS)).content.decode()
    assert "cancel_selected" not in listing and "erase_selected" not in listing
    refused = act(viewer, EXECUTIONS, "cancel_selected", [execution.pk], post="yes")
    assert refused.status_code == 200  # the admin answers "no action selected"
    execution.refresh_from_db()
    assert execution.status == "active"
    operator = client_with("statecharts.view_execution", "statecharts.change_execution")
    listing = operator.get(reverse(EXECUTIONS)).content.decode()
    assert "cancel_selected" in listing and "erase_selected" not in listing
    erased = act(operator, EXECUTIONS, "erase_selected", [execution.pk], post="yes")
    assert Execution.objects.get(pk=execution.pk).erased is None
    assert erased.status_code == 200


def test_bulk_erase_shows_what_goes_asks_for_a_reason_and_records_who() -> None:
    client = client_with("statecharts.view_execution", "statecharts.erase_execution")
    finished = signup("user-1")
    stepper.send(finished, "signed_up")
    running = signup("user-2")

    page = act(client, EXECUTIONS, "erase_selected", [finished.pk, running.pk])
    body = page.content.decode()
    assert "Erase the personal data of 2 execution(s)" in body
    assert "cannot be undone" in body and "1 of them are still running" in body
    assert 'name="reason"' in body and 'name="cancel_running"' in body

    refused = act(
        client, EXECUTIONS, "erase_selected", [finished.pk, running.pk], post="yes", reason="r"
    )
    assert any("Nothing was erased" in m for m in messages_of(refused))
    assert not Execution.objects.filter(erased__isnull=False).exists()

    done = act(
        client,
        EXECUTIONS,
        "erase_selected",
        [finished.pk, running.pk],
        post="yes",
        reason="ticket 12",
        cancel_running="on",
    )
    (said,) = messages_of(done)
    assert said.startswith("Erasure: erased 2 execution(s), 1 cancelled first (")
    marker = HistoryEntry.objects.get(execution=running, disposition="erased")
    assert marker.reason == "personal data erased by operator: ticket 12"
    assert marker.caller_context is not None and marker.caller_context["door"] == "admin"
    assert marker.caller_context["user"]["username"] == "operator"
    bad = act(client, EXECUTIONS, "erase_selected", [finished.pk], post="yes", reason="x" * 1001)
    assert "at most 1000 characters" in bad.content.decode()  # the form, shown again


def test_retrying_failed_timers_puts_them_back_due_now() -> None:
    client = client_with("timers.view_timer", "timers.change_timer")
    live = signup("live")
    finished = signup("finished")
    Timer.objects.update(status=TimerStatus.FAILED, settled=T0, attempts=5, last_error="boom")
    stepper.send(finished, "signed_up")
    live_timer = Timer.objects.get(execution=live)
    finished_timer = Timer.objects.get(execution=finished)

    page = act(client, TIMERS, "retry_selected", [live_timer.pk, finished_timer.pk])
    assert "Retry 2 failed timer(s)?" in page.content.decode()
    assert Timer.objects.get(pk=live_timer.pk).status == TimerStatus.FAILED

    done = act(client, TIMERS, "retry_selected", [live_timer.pk, finished_timer.pk], post="yes")
    assert messages_of(done) == ["Retry: 1 execution finished, 1 retried."]
    retried = Timer.objects.get(pk=live_timer.pk)
    assert (retried.status, retried.attempts, retried.settled) == ("pending", 0, None)
    assert retried.last_error == "boom" and retried.reason == "retried by operator"
    assert Timer.objects.get(pk=finished_timer.pk).status == TimerStatus.FAILED
    # The retried timer fires like any due one.
    from timers.firing import fire_all_due

    assert fire_all_due().fired == 1
    live.refresh_from_db()
    assert live.configuration == ["nudged"]


def undeliverable_to_a_halted_listener() -> tuple[Execution, Execution, OutboxMessage]:
    """A message written while its target was active, which halted before the delivery."""
    listener = peer()
    sender = signup("sender")

    def die(phase: str) -> None:
        if phase == "committed":
            raise SystemExit("died after the commit")

    step_transaction.fault_hook = die
    try:
        with pytest.raises(SystemExit):
            stepper.send(sender, "tell", {"peer": listener.session_id})
    finally:
        step_transaction.fault_hook = None
    Execution.objects.filter(pk=listener.pk).update(status="halted", failure_reason="budget")
    stepper.deliver_pending()
    (message,) = OutboxMessage.objects.all()
    return sender, listener, message


def test_retrying_undeliverable_messages_delivers_them_once_the_target_is_back() -> None:
    client = client_with("statecharts.view_outboxmessage", "statecharts.change_outboxmessage")
    sender, listener, message = undeliverable_to_a_halted_listener()
    assert message.status == OutboxStatus.UNDELIVERABLE
    page = act(client, OUTBOX, "retry_selected", [message.pk])
    assert "Deliver 1 undeliverable message(s) again?" in page.content.decode()
    assert 'name="reason"' in page.content.decode()
    blank = act(client, OUTBOX, "retry_selected", [message.pk], post="yes", reason="")
    assert messages_of(blank) == [] and 'name="reason"' in blank.content.decode()  # asked again
    still = act(client, OUTBOX, "retry_selected", [message.pk], post="yes", reason="try it")
    assert messages_of(still) == ["Retried 1 message(s): 0 delivered, 1 still undeliverable."]

    Execution.objects.filter(pk=listener.pk).update(status="active")  # repaired
    done = act(client, OUTBOX, "retry_selected", [message.pk], post="yes", reason="repaired")
    assert messages_of(done) == ["Retried 1 message(s): 1 delivered, 0 still undeliverable."]
    message.refresh_from_db()
    assert message.status == OutboxStatus.DELIVERED
    assert listener.history.filter(input__event__name="hello").count() == 1
    # The sender was told error.communication once, when it first failed, not at each retry.
    told = sender.history.filter(input__event__name="error.communication").count()
    assert told == 1
    operated = sender.history.filter(disposition="operated").order_by("seq")
    assert [(e.input["action"], e.reason) for e in operated] == [
        ("outbox_retry", "try it"),
        ("outbox_retry", "repaired"),
    ]
    assert operated[0].caller_context["door"] == "admin"
    viewer = client_with("statecharts.view_outboxmessage", name="viewer")
    assert "retry_selected" not in viewer.get(reverse(OUTBOX)).content.decode()
