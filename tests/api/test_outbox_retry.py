"""Retrying an undeliverable outbox message from every door: the admin's action
(tests/operations/test_operations_admin.py), ``POST /api/outbox/{id}/retry/`` and
``statechart deliver --retry``, each through ``stepper.retry_message``; the API's outbox
list shows the event's name, never its data."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from statecharts.models import Execution, OutboxMessage
from statecharts.models.outbox import OutboxStatus
from tests.operations.test_operations_admin import undeliverable_to_a_halted_listener

pytestmark = pytest.mark.django_db

READ = ("statecharts.view_outboxmessage",)
RETRY = (*READ, "statecharts.change_outboxmessage")


def client_with(*perms: str, name: str = "operator") -> APIClient:
    user = User.objects.create_user(name, password="pw")
    for perm in perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    client = APIClient()
    client.force_authenticate(user)
    return client


def retry(client: APIClient, message: OutboxMessage | int, reason: str = "target repaired") -> Any:
    pk = message if isinstance(message, int) else message.pk
    return client.post(f"/api/outbox/{pk}/retry/", {"reason": reason}, format="json")


def test_the_api_retries_an_undeliverable_message_once_its_target_is_back() -> None:
    sender, listener, message = undeliverable_to_a_halted_listener()
    client = client_with(*RETRY)
    still = retry(client, message)
    assert still.status_code == 200, still.content
    assert still.json() == {"id": message.pk, "outcome": "undeliverable"}

    Execution.objects.filter(pk=listener.pk).update(status="active")  # repaired
    done = retry(client, message)
    assert done.json() == {"id": message.pk, "outcome": "delivered"}
    assert listener.history.filter(input__event__name="hello").count() == 1
    told = sender.history.filter(input__event__name="error.communication").count()
    assert told == 1  # told when it first failed, not at each retry

    # Each retry is recorded in the sender's history: the reason and who asked.
    operated = list(sender.history.filter(disposition="operated").order_by("seq"))
    assert [e.input["action"] for e in operated] == ["outbox_retry", "outbox_retry"]
    assert operated[-1].input["row"]["message"] == message.pk
    assert operated[-1].reason == "target repaired"
    assert operated[-1].caller_context["door"] == "api"
    assert operated[-1].caller_context["user"]["username"] == "operator"

    again = retry(client, message)  # delivered: nothing to retry
    assert again.status_code == 409
    assert again.json() == {
        "detail": f"message {message.pk} is delivered: only undeliverable messages are retried",
        "reason": "refused",
    }
    assert listener.history.filter(input__event__name="hello").count() == 1


def test_the_api_retry_needs_its_permission_and_a_message() -> None:
    _, _, message = undeliverable_to_a_halted_listener()
    attempts = message.attempts
    assert retry(client_with(*READ), message).status_code == 403
    message.refresh_from_db()
    assert (message.status, message.attempts) == (OutboxStatus.UNDELIVERABLE, attempts)
    client = client_with(*RETRY, name="other")
    assert retry(client, 999999).status_code == 404
    assert client.post("/api/outbox/abc/retry/", {"reason": "r"}).status_code == 404
    for reason in ("", "   ", "a\x00b", "x" * 301):
        refused = retry(client, message, reason=reason)
        assert refused.status_code == 400 and "reason" in refused.json(), refused.content
    assert client.post(f"/api/outbox/{message.pk}/retry/").status_code == 400  # no reason
    message.refresh_from_db()
    assert (message.status, message.attempts) == (OutboxStatus.UNDELIVERABLE, attempts)
    assert not message.sender.history.filter(disposition="operated").exists()


def test_the_api_lists_messages_by_sender_and_status_without_their_data() -> None:
    sender, _, message = undeliverable_to_a_halted_listener()
    client = client_with(*READ)
    page = client.get("/api/outbox/", {"sender": sender.pk, "status": "undeliverable"})
    assert page.status_code == 200
    (row,) = page.json()["results"]
    assert row["id"] == message.pk and row["event_name"] == "hello"
    assert row["sender"] == sender.pk and "event" not in row
    assert client.get("/api/outbox/", {"status": "pending"}).json()["results"] == []
    assert client.get("/api/outbox/", {"status": "lost"}).status_code == 400
    assert client_with(name="nobody").get("/api/outbox/").status_code == 403


def run(*args: str) -> str:
    out = StringIO()
    call_command("statechart", "deliver", *args, stdout=out, stderr=StringIO())
    return out.getvalue().strip()


def test_the_command_retries_named_or_every_undeliverable_message() -> None:
    sender, listener, message = undeliverable_to_a_halted_listener()
    with pytest.raises(CommandError, match="--retry needs --reason"):
        run("--retry", str(message.pk))
    with pytest.raises(CommandError, match="--reason"):
        run("--retry", str(message.pk), "--reason", "  ")
    with pytest.raises(CommandError, match="--reason goes with --retry"):
        run("--reason", "why")
    assert not sender.history.filter(disposition="operated").exists()
    assert run("--retry", str(message.pk), "--reason", "r1") == "retry: 1 undeliverable"
    Execution.objects.filter(pk=listener.pk).update(status="active")
    said = run("--retry", "--reason", "r2", "--caller-context", '{"ticket": 5}')
    assert said == "retry: 1 delivered"
    operated = list(sender.history.filter(disposition="operated").order_by("seq"))
    assert [(e.reason, e.caller_context) for e in operated] == [
        ("r1", {"door": "command"}),
        ("r2", {"door": "command", "given": {"ticket": 5}}),
    ]
    message.refresh_from_db()
    assert message.status == OutboxStatus.DELIVERED
    assert run("--retry", "--reason", "r") == "retry: no undeliverable message"
    with pytest.raises(CommandError, match="only undeliverable messages are retried"):
        run("--retry", str(message.pk), "--reason", "r")
    with pytest.raises(CommandError, match="no outbox message 999999"):
        run("--retry", "999999", "--reason", "r")
    assert listener.history.filter(input__event__name="hello").count() == 1
