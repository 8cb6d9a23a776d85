"""An operator's actions on an invoke handler's invocation (invocations.operating): retry a
waiting start now, cancel an open one (the parent told); each
recorded in the parent's history, refused in the refusal table's words otherwise; and
through the admin, the API and ``manage.py invocation_action``."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from invocations import operating
from invocations.models import Invocation
from statecharts.models import HistoryEntry
from statecharts.models.history import Disposition
from statecharts.policies import refusals
from tests.invocations.test_handlers import (  # noqa: F401 (the autouse fixture)
    PAYMENT,
    T0,
    Silent,
    calls,
    datamodel,
    failures,
    inline_cluster,
    start,
)

pytestmark = pytest.mark.django_db(transaction=True)

SILENT = PAYMENT.replace('type="task" src="charge"', 'type="silent" src="x"')


def test_retry_now_runs_a_start_waiting_for_its_retry_and_is_recorded() -> None:
    failures["left"] = 1
    execution = start()
    invocation = Invocation.objects.get(parent=execution)
    assert invocation.next_attempt_at is not None  # waiting 10 s for its retry
    outcome = operating.retry_now(invocation.pk, reason="provider is back", now=T0)
    assert outcome == "started"
    assert len(calls) == 2
    execution.refresh_from_db()
    assert execution.configuration == ["paid"]
    entry = HistoryEntry.objects.get(execution=execution, disposition=Disposition.OPERATED)
    assert entry.input["action"] == "invocation_retry_now"
    assert entry.reason == "provider is back"
    with pytest.raises(operating.NotActionable, match="is done") as refused:
        operating.retry_now(invocation.pk, reason="again", now=T0)
    refusal = refusals.refusal(refused.value)
    assert refusal is not None and refusal.reason is refusals.Reason.REFUSED


def test_retry_now_refuses_a_start_that_is_not_waiting() -> None:
    execution = start(SILENT)
    invocation = Invocation.objects.get(parent=execution)
    assert invocation.status == "active" and invocation.next_attempt_at is None
    with pytest.raises(operating.NotActionable, match="not waiting for a retry"):
        operating.retry_now(invocation.pk, reason="x", now=T0)


def test_cancel_tells_the_parent_and_calls_the_handlers_cancel() -> None:
    execution = start(SILENT)
    invocation = Invocation.objects.get(parent=execution)
    assert operating.cancel(invocation.pk, reason="stuck for a day", now=T0) == "cancelled"
    execution.refresh_from_db()
    assert execution.configuration == ["failed"]
    assert datamodel(execution)["why"] == "cancelled by an operator: stuck for a day"
    assert Silent.cancelled == [invocation.pk]  # the parent left the invoking state
    assert Invocation.objects.get(pk=invocation.pk).status == "failed"
    assert HistoryEntry.objects.filter(disposition=Disposition.OPERATED).count() == 1
    with pytest.raises(Invocation.DoesNotExist):
        operating.cancel(invocation.pk + 100, reason="x", now=T0)


def user_with(*perms: str, name: str) -> User:
    user = User.objects.create_user(name, password="pw", is_staff=True)
    for perm in perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    return user


def test_the_api_and_the_command_act_behind_each_actions_permission() -> None:
    first = Invocation.objects.get(parent=start(SILENT))
    second = Invocation.objects.get(parent=start(SILENT))
    api = APIClient()
    api.force_authenticate(user_with("invocations.cancel_invocation", name="api"))
    url = f"/api/invocations/{first.pk}/cancel/"
    assert api.post(f"/api/invocations/{first.pk}/retry-now/", {"reason": "x"},
                    format="json").status_code == 403  # fmt: skip
    assert api.post(url, {}, format="json").status_code == 400
    answer = api.post(url, {"reason": "stuck"}, format="json")
    assert (answer.status_code, answer.json()) == (200, {"id": first.pk, "outcome": "cancelled"})
    assert api.post(url, {"reason": "again"}, format="json").status_code == 409
    out = StringIO()
    call_command("invocation_action", "cancel", str(second.pk), "--reason", "stuck", stdout=out)
    assert out.getvalue().strip() == "cancel: 1 cancelled"
    with pytest.raises(CommandError, match=f"invocation {second.pk} is failed"):
        call_command("invocation_action", "retry-now", str(second.pk), "--reason", "x")
