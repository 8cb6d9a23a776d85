"""Start and cancel permissions at every door: Python ``user=``, the API (403 with reasons),
the admin and ``statechart start/cancel --as-user``; the user recorded in the history
(docs/permissions-and-available-events.md, "Who may start and cancel")."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser, Group, User
from django.core.checks import run_checks
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client, override_settings

from statecharts import stepper
from statecharts.models import Chart, Execution
from statecharts.policies.authorization import (
    CancelNotPermitted,
    NotPermitted,
    StartNotPermitted,
    decide_cancel,
    decide_start,
)
from tests.policies.permissions.test_event_permissions import LOAN, OPEN, OPERATE, api, user_with

pytestmark = pytest.mark.django_db

RULES = {
    "START_PERMISSIONS": {
        "loan": {"permissions": ["auth.open_loan"], "check": "member_of_subject"},
        "*": "auth.start_anything",
    },
    "CANCEL_PERMISSIONS": {
        "loan": {"permissions": ["auth.close_loan"], "check": "own_group"},
    },
    "START_CHECKS": {"member_of_subject": "tests.policies.permissions.rules.member_of_subject"},
    "CANCEL_CHECKS": {"own_group": "tests.policies.permissions.rules.cancel_in_own_group"},
    "SUBJECT_MODELS": ["auth.group"],
}
START_LOAN = "starting 'loan' needs the permission 'auth.open_loan' (START_PERMISSIONS['loan'])"


@pytest.fixture
def rules() -> Any:
    with override_settings(STATECHARTS=RULES):
        yield


@pytest.fixture
def chart(rules: None) -> Chart:
    return Chart.objects.load(LOAN)


@pytest.fixture
def branch() -> Group:
    return Group.objects.create(name="branch-1")


def officer(branch: Group, *extra: str) -> User:
    """A user allowed to start (and, with ``auth.close_loan``, cancel) loans of ``branch``."""
    user = user_with("officer", *OPERATE, "auth.open_loan", *extra)
    user.groups.add(branch)
    return User.objects.get(pk=user.pk)


# ---- Python ------------------------------------------------------------------------------------


def test_start_without_a_user_is_trusted_and_with_one_is_checked(
    chart: Chart, branch: Group
) -> None:
    clerk = user_with("clerk", *OPERATE)
    with pytest.raises(StartNotPermitted) as refused:
        stepper.start(chart, subject=branch, user=clerk)
    assert refused.value.decision.reasons == (START_LOAN,)
    assert isinstance(refused.value, NotPermitted)
    assert not Execution.objects.exists()  # nothing written
    trusted = stepper.start(chart, subject=branch)
    assert "sender" not in trusted.history.get(seq=1).input


def test_the_starter_is_recorded_in_the_history_and_caller_context(
    chart: Chart, branch: Group
) -> None:
    user = officer(branch)
    execution = Execution.objects.start(chart, subject=branch, user=user)
    entry = execution.history.get(seq=1)
    assert entry.input["sender"] == {
        "user_id": user.pk, "username": "officer", "rule": "START_PERMISSIONS['loan']",
    }
    assert entry.caller_context["user"] == {"id": user.pk, "username": "officer"}


def test_a_start_check_sees_the_subject(chart: Chart, branch: Group) -> None:
    outsider = user_with("outsider", *OPERATE, "auth.open_loan")
    decision = decide_start(outsider, chart, None, branch)
    assert not decision.allowed
    assert decision.reasons == (
        "starting 'loan': the check 'member_of_subject' said: only a member of the group it "
        "is about may start loan",
    )
    assert decide_start(officer(branch), chart, None, branch).allowed


def test_the_star_entry_applies_to_charts_without_their_own(rules: None) -> None:
    other = Chart.objects.load(OPEN)
    user = user_with("u", *OPERATE)
    assert decide_start(user, other).reasons == (
        "starting 'open' needs the permission 'auth.start_anything' (START_PERMISSIONS['*'])",
    )
    with override_settings(STATECHARTS={}):  # no rule: add_execution is enough
        assert decide_start(user, other).allowed


def test_start_needs_add_execution_and_an_active_user(chart: Chart, branch: Group) -> None:
    viewer = user_with("viewer", "statecharts.view_execution", "auth.open_loan")
    viewer.groups.add(branch)
    assert decide_start(viewer, chart, None, branch).reasons == (
        "starting executions needs the permission 'statecharts.add_execution'",
    )
    assert decide_start(AnonymousUser(), chart).reasons == (
        "an anonymous or inactive user may start nothing",
    )


def test_cancel_is_checked_refused_writes_nothing_allowed_is_recorded(
    chart: Chart, branch: Group
) -> None:
    execution = stepper.start(chart, subject=branch)
    clerk = user_with("clerk", *OPERATE)
    with pytest.raises(CancelNotPermitted) as refused:
        stepper.cancel(execution, user=clerk)
    assert refused.value.decision.reasons == (
        f"cancelling execution {execution.pk} needs the permission 'auth.close_loan' "
        "(CANCEL_PERMISSIONS['loan'])",
    )
    execution.refresh_from_db()
    assert execution.steps == 1 and execution.status == "active"
    outsider = user_with("outsider", *OPERATE, "auth.close_loan")
    assert decide_cancel(outsider, execution).reasons == (
        f"cancelling execution {execution.pk}: the check 'own_group' said: only a member of "
        "branch-1 may cancel it",
    )
    user = officer(branch, "auth.close_loan")
    result = execution.cancel(user=user, reason="duplicate")
    assert execution.status == "cancelled"
    assert result.entry.input["sender"] == {
        "user_id": user.pk, "username": "officer", "rule": "CANCEL_PERMISSIONS['loan']",
    }
    assert result.entry.input["reason"] == "duplicate"


def test_cancel_of_a_chart_no_rule_names_needs_change_execution_only(rules: None) -> None:
    execution = stepper.start(Chart.objects.load(OPEN))
    viewer = user_with("viewer", "statecharts.view_execution")
    with pytest.raises(CancelNotPermitted, match=r"statecharts\.change_execution"):
        stepper.cancel(execution.pk, user=viewer)
    clerk = user_with("clerk", *OPERATE)
    entry = stepper.cancel(execution.pk, user=clerk).entry
    assert entry.input["sender"] == {"user_id": clerk.pk, "username": "clerk"}


def test_a_start_check_that_raises_refuses(
    chart: Chart, branch: Group, caplog: pytest.LogCaptureFixture
) -> None:
    settings = {
        **RULES,
        "START_PERMISSIONS": {"loan": {"check": "broken"}},
        "START_CHECKS": {"broken": "tests.policies.permissions.rules.broken_start"},
    }
    with override_settings(STATECHARTS=settings):
        decision = decide_start(officer(branch), chart)
    assert decision.reasons == (
        "starting 'loan': the check 'broken' said: it failed (KeyError), so the start is "
        "refused",
    )
    assert "START_CHECKS['broken'] failed" in caplog.text


def test_a_retried_start_with_the_same_key_and_user_starts_once(
    chart: Chart, branch: Group
) -> None:
    user = officer(branch)
    first = stepper.start_result(chart, subject=branch, user=user, idempotency_key="s1")
    again = stepper.start_result(chart, subject=branch, user=user, idempotency_key="s1")
    assert again.repeated and again.execution.pk == first.execution.pk
    assert Execution.objects.count() == 1


# ---- the API -----------------------------------------------------------------------------------


def test_api_start_refused_is_a_403_with_reasons_and_starts_nothing(
    chart: Chart, branch: Group
) -> None:
    body = {"chart": "loan", "subject": {"type": "auth.group", "id": str(branch.pk)}}
    response = api(user_with("clerk", *OPERATE)).post("/api/executions/", body, format="json")
    assert response.status_code == 403
    assert response.json()["reasons"] == [START_LOAN]
    assert not Execution.objects.exists()
    response = api(officer(branch)).post("/api/executions/", body, format="json")
    assert response.status_code == 201, response.json()
    execution = Execution.objects.get(pk=response.json()["id"])
    assert execution.history.get(seq=1).input["sender"]["username"] == "officer"


def test_api_cancel_refused_is_a_403_with_reasons_and_records_nothing(
    chart: Chart, branch: Group
) -> None:
    execution = stepper.start(chart, subject=branch)
    response = api(user_with("clerk", *OPERATE)).post(f"/api/executions/{execution.pk}/cancel/")
    assert response.status_code == 403
    assert "CANCEL_PERMISSIONS['loan']" in response.json()["reasons"][0]
    execution.refresh_from_db()
    assert execution.steps == 1 and execution.status == "active"
    response = api(officer(branch, "auth.close_loan")).post(
        f"/api/executions/{execution.pk}/cancel/"
    )
    assert response.status_code == 200, response.json()
    assert execution.history.get(seq=2).input["sender"]["username"] == "officer"


# ---- the admin ---------------------------------------------------------------------------------


def staff(user: User) -> Client:
    user.is_staff = True
    user.save()
    client = Client()
    client.force_login(user)
    return client


def test_admin_start_form_shown_only_to_who_may_start_and_a_refused_start_says_why(
    chart: Chart, branch: Group
) -> None:
    clerk = staff(user_with("clerk", *OPERATE))
    page = clerk.get(f"/admin/statecharts/chart/{chart.pk}/change/").content.decode()
    assert "Start an execution" not in page
    page = clerk.post(f"/admin/statecharts/chart/{chart.pk}/start/", {"data": "{}"},
                      follow=True).content.decode()
    assert "Not started:" in page and "auth.open_loan" in page
    assert not Execution.objects.exists()
    # The admin's start form has no subject, so the loan's check refuses even the officer;
    # a chart under the "*" rule starts for a user with that permission, who is recorded.
    open_chart = Chart.objects.load(OPEN)
    starter = staff(user_with("starter", *OPERATE, "auth.start_anything"))
    page = starter.get(f"/admin/statecharts/chart/{open_chart.pk}/change/").content.decode()
    assert "Start an execution" in page
    starter.post(f"/admin/statecharts/chart/{open_chart.pk}/start/", {"data": "{}"})
    execution = Execution.objects.get(chart=open_chart)
    assert execution.history.get(seq=1).input["sender"]["username"] == "starter"


def test_admin_cancel_button_and_cancel_view_follow_the_rule(chart: Chart, branch: Group) -> None:
    execution = stepper.start(chart, subject=branch)
    clerk = staff(user_with("clerk", *OPERATE))
    change = f"/admin/statecharts/execution/{execution.pk}/change/"
    assert "Cancel execution" not in clerk.get(change).content.decode()
    page = clerk.post(f"/admin/statecharts/execution/{execution.pk}/cancel/", follow=True)
    assert "Not cancelled:" in page.content.decode()
    execution.refresh_from_db()
    assert execution.status == "active"
    user = staff(officer(branch, "auth.close_loan"))
    assert "Cancel execution" in user.get(change).content.decode()
    user.post(f"/admin/statecharts/execution/{execution.pk}/cancel/")
    execution.refresh_from_db()
    assert execution.status == "cancelled"
    assert execution.history.get(seq=2).input["sender"]["username"] == "officer"


def test_admin_bulk_cancel_cancels_only_what_the_user_may(chart: Chart, branch: Group) -> None:
    mine = stepper.start(chart, subject=branch)
    theirs = stepper.start(chart, subject=Group.objects.create(name="branch-2"))
    client = staff(officer(branch, "auth.close_loan"))
    page = client.post(
        "/admin/statecharts/execution/",
        {"action": "cancel_selected", "_selected_action": [mine.pk, theirs.pk], "post": "yes"},
        follow=True,
    )
    html = page.content.decode()
    assert "not cancelled: " in html and "only a member of branch-2 may cancel it" in html
    assert "1 applied, 1 not permitted" in html
    mine.refresh_from_db()
    theirs.refresh_from_db()
    assert (mine.status, theirs.status) == ("cancelled", "active")


# ---- the command -------------------------------------------------------------------------------


def test_command_start_as_user_is_checked_and_recorded(chart: Chart, branch: Group) -> None:
    user_with("clerk", *OPERATE)
    officer(branch)
    subject = f"auth.group:{branch.pk}"
    with pytest.raises(CommandError, match="not permitted: starting 'loan' needs the perm"):
        call_command("statechart", "start", "loan", "--subject", subject, "--as-user", "clerk")
    with pytest.raises(CommandError, match="no user 'nobody'"):
        call_command("statechart", "start", "loan", "--as-user", "nobody")
    assert not Execution.objects.exists()
    call_command("statechart", "start", "loan", "--subject", subject, "--as-user", "officer",
                 stdout=io.StringIO())
    execution = Execution.objects.get()
    assert execution.history.get(seq=1).input["sender"]["username"] == "officer"


def test_command_cancel_as_user_is_checked_recorded_and_replays(
    chart: Chart, branch: Group
) -> None:
    execution = Execution.objects.start(chart, subject=branch, user=officer(branch))
    user_with("clerk", *OPERATE).groups.add(branch)
    with pytest.raises(CommandError, match=r"not permitted: .*'auth\.close_loan'"):
        call_command("statechart", "cancel", str(execution.pk), "--as-user", "clerk")
    closer = user_with("closer", *OPERATE, "auth.close_loan")
    closer.groups.add(branch)
    call_command("statechart", "cancel", str(execution.pk), "--as-user", "closer",
                 stdout=io.StringIO())
    execution.refresh_from_db()
    assert execution.status == "cancelled"
    out = io.StringIO()
    call_command("statechart", "show", str(execution.pk), stdout=out)
    assert "#1 start by officer" in out.getvalue()
    assert "#2 cancel by closer" in out.getvalue()
    replayed = io.StringIO()
    call_command("statechart", "replay", str(execution.pk), stdout=replayed)
    assert "replayed 2 step(s): every position matches" in replayed.getvalue()


# ---- system checks -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("configured", "check_id"),
    [
        ({"START_CHECKS": "x"}, "statecharts.E047"),
        ({"CANCEL_CHECKS": {"x": "no.such.module.check"}}, "statecharts.E047"),
        ({"START_PERMISSIONS": ["loan"]}, "statecharts.E048"),
        ({"START_PERMISSIONS": {"loan": "open_loan"}}, "statecharts.E048"),
        ({"CANCEL_PERMISSIONS": {"loan": {"perms": []}}}, "statecharts.E048"),
        ({"CANCEL_PERMISSIONS": {"": "auth.close_loan"}}, "statecharts.E048"),
        ({"START_PERMISSIONS": {"loan": {"check": "nope"}}}, "statecharts.E049"),
        # A start rule naming an EVENT_CHECKS entry: each action has its own registry.
        ({"CANCEL_PERMISSIONS": {"loan": {"check": "e"}}, "EVENT_CHECKS": {
            "e": "tests.policies.permissions.rules.same_group"}}, "statecharts.E049"),
    ],
)
def test_misconfigured_settings_are_reported(configured: dict[str, Any], check_id: str) -> None:
    with override_settings(STATECHARTS=configured):
        ids = {message.id for message in run_checks()}
    assert check_id in ids


def test_the_rules_of_these_tests_pass_the_checks() -> None:
    with override_settings(STATECHARTS=RULES):
        assert not [m for m in run_checks() if m.id and m.id.startswith("statecharts.")]
