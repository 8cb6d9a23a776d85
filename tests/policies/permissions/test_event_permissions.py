"""Available events, per-event permissions and subjects at every door: Python, the API, the
admin and the management command (docs/permissions-and-available-events.md)."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.contrib.admin import site
from django.contrib.auth.models import Group, Permission, User
from django.core.checks import run_checks
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client, override_settings
from rest_framework.test import APIClient

from statecharts import stepper
from statecharts.admin import ExecutionsInline
from statecharts.models import Chart, Execution
from statecharts.policies.authorization import EventNotPermitted, decide

pytestmark = pytest.mark.django_db
NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0"'
LOAN = f"""<scxml {NS} name="loan" datamodel="ecmascript" initial="review">
  <datamodel><data id="amount" expr="5000"/><data id="limit" expr="10000"/></datamodel>
  <state id="review">
    <transition event="approve" cond="amount &lt;= limit" target="approved"/>
    <transition event="escalate" cond="amount &gt; limit" target="committee"/>
    <transition event="comment" cond="_event.data.text.length &gt; 0"/>
    <transition event="reject" target="rejected"/>
  </state>
  <state id="committee"><transition event="approve" target="approved"/></state>
  <final id="approved"/>
  <final id="rejected"/>
</scxml>"""
OPEN = f"""<scxml {NS} name="open" initial="a">
  <state id="a"><transition event="note.*"/><transition event="go" target="b"/></state>
  <state id="b"/>
</scxml>"""

RULES = {
    "EVENT_PERMISSIONS": {
        "loan": {
            "approve": "auth.approve_loan",
            "reject": {"permissions": ["auth.change_group"], "check": "same_group"},
        },
    },
    "EVENT_CHECKS": {"same_group": "tests.policies.permissions.rules.same_group"},
    "SUBJECT_MODELS": ["auth.group"],
}
OPERATE = ("statecharts.view_execution", "statecharts.change_execution",
           "statecharts.add_execution", "statecharts.view_chart")


def user_with(username: str, *perms: str) -> User:
    user = User.objects.create_user(username, password="pw")
    for perm in perms:
        app_label, codename = perm.split(".")
        permission, _ = Permission.objects.get_or_create(
            content_type=Permission.objects.filter(content_type__app_label=app_label)
            .first()
            .content_type,
            codename=codename,
            defaults={"name": codename},
        )
        user.user_permissions.add(permission)
    return User.objects.get(pk=user.pk)  # (no cached permissions)


@pytest.fixture
def rules() -> Any:
    with override_settings(STATECHARTS=RULES):
        yield


@pytest.fixture
def loan(rules: None) -> Execution:
    group = Group.objects.create(name="branch-1")
    return stepper.start(Chart.objects.load(LOAN), subject=group)


# ---- available events --------------------------------------------------------------------------


def test_available_events_from_python(loan: Execution) -> None:
    events = {event.name: event.availability.value for event in loan.available_events()}
    assert events == {
        "approve": "enabled", "escalate": "disabled", "comment": "conditional",
        "reject": "enabled",
    }
    # Nothing was written: no history entry, the same position.
    position = bytes(loan.position)
    loan.refresh_from_db()
    assert loan.steps == 1 and bytes(loan.position) == position


def test_available_events_for_a_user_leave_out_what_they_may_not_send(loan: Execution) -> None:
    clerk = user_with("clerk", *OPERATE)
    assert [e.name for e in loan.available_events(user=clerk)] == ["escalate", "comment"]
    manager = user_with("manager", *OPERATE, "auth.approve_loan", "auth.change_group")
    manager.groups.add(loan.subject)
    manager = User.objects.get(pk=manager.pk)
    assert [e.name for e in loan.available_events(user=manager)] == [
        "approve", "escalate", "comment", "reject",
    ]


def test_a_finished_execution_can_do_nothing(loan: Execution) -> None:
    loan.send("reject")
    assert loan.status == "completed"
    assert loan.available_events() == ()


# ---- permissions from Python -------------------------------------------------------------------


def test_python_without_a_user_is_trusted_and_with_one_is_checked(loan: Execution) -> None:
    clerk = user_with("clerk", *OPERATE)
    with pytest.raises(EventNotPermitted) as refused:
        stepper.send(loan, "approve", user=clerk)
    assert "auth.approve_loan" in str(refused.value)
    loan.refresh_from_db()
    assert loan.steps == 1 and loan.configuration == ["review"]  # nothing recorded
    result = stepper.send(loan, "approve")  # trusted code
    assert result.applied and result.execution.configuration == ["approved"]
    assert "sender" not in result.entry.input


def test_the_sender_is_recorded_in_the_history(loan: Execution) -> None:
    manager = user_with("manager", *OPERATE, "auth.approve_loan")
    result = loan.send("approve", user=manager)
    assert result.entry.input["sender"] == {
        "user_id": manager.pk,
        "username": "manager",
        "rule": "EVENT_PERMISSIONS['loan']['approve']",
    }
    assert loan.status == "completed"


def test_an_event_no_rule_names_needs_nothing_more(loan: Execution) -> None:
    clerk = user_with("clerk", *OPERATE)
    entry = stepper.send(loan, "escalate", user=clerk).entry
    assert entry.input["sender"] == {"user_id": clerk.pk, "username": "clerk"}


def test_a_named_check_runs_after_the_permissions(loan: Execution) -> None:
    outsider = user_with("outsider", *OPERATE, "auth.change_group")
    decision = decide(outsider, loan, "reject")
    assert not decision.allowed
    assert decision.reasons == (
        "'reject': the check 'same_group' said: only a member of branch-1",
    )
    insider = user_with("insider", *OPERATE, "auth.change_group")
    insider.groups.add(loan.subject)
    assert decide(insider, loan, "reject").allowed


def test_anonymous_users_may_send_nothing(loan: Execution) -> None:
    from django.contrib.auth.models import AnonymousUser

    with pytest.raises(EventNotPermitted):
        stepper.send(loan, "escalate", user=AnonymousUser())


def test_the_most_specific_descriptor_wins_and_star_applies_to_every_chart(rules: None) -> None:
    chart = Chart.objects.load(OPEN)
    execution = stepper.start(chart)
    settings = {
        "EVENT_PERMISSIONS": {
            "*": {"*": "auth.change_user"},
            "open": {"note": "auth.add_user", "note.private": "auth.delete_user"},
        }
    }
    user = user_with("u", "statecharts.change_execution", "auth.add_user")
    with override_settings(STATECHARTS=settings):
        assert decide(user, execution, "note.public").allowed  # open: note
        assert not decide(user, execution, "note.private.x").allowed  # open: note.private
        # "go" is not in "open"'s entry: the "*" chart's rule applies.
        assert decide(user, execution, "go").reasons == (
            "'go' needs the permission 'auth.change_user' (EVENT_PERMISSIONS['*']['*'])",
        )


# ---- the API -----------------------------------------------------------------------------------


def api(user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_api_detail_lists_available_events_for_the_user_and_the_subject(loan: Execution) -> None:
    clerk = user_with("clerk", *OPERATE)
    body = api(clerk).get(f"/api/executions/{loan.pk}/").json()
    assert [(e["name"], e["availability"]) for e in body["available_events"]] == [
        ("escalate", "disabled"), ("comment", "conditional"),
    ]
    comment = body["available_events"][1]["transitions"][0]
    assert comment["guard"] == "reads_event" and comment["cond"] == "_event.data.text.length > 0"
    assert body["subject"] == {"type": "auth.group", "id": str(loan.subject.pk),
                               "title": "branch-1"}


def test_api_send_refused_is_a_403_with_reasons_and_records_nothing(loan: Execution) -> None:
    clerk = user_with("clerk", *OPERATE)
    response = api(clerk).post(
        f"/api/executions/{loan.pk}/send/", {"name": "approve"}, format="json"
    )
    assert response.status_code == 403
    assert response.json()["reasons"] == [
        "'approve' needs the permission 'auth.approve_loan' (EVENT_PERMISSIONS['loan']"
        "['approve'])"
    ]
    loan.refresh_from_db()
    assert loan.steps == 1
    manager = user_with("manager", *OPERATE, "auth.approve_loan")
    response = api(manager).post(
        f"/api/executions/{loan.pk}/send/", {"name": "approve"}, format="json"
    )
    assert response.status_code == 200, response.json()
    assert loan.history.get(seq=2).input["sender"]["username"] == "manager"


def test_api_start_with_a_subject(rules: None) -> None:
    Chart.objects.load(LOAN)
    group = Group.objects.create(name="branch-2")
    client = api(user_with("starter", *OPERATE))
    response = client.post(
        "/api/executions/",
        {"chart": "loan", "subject": {"type": "auth.group", "id": str(group.pk)}},
        format="json",
    )
    assert response.status_code == 201, response.json()
    assert response.json()["subject"]["title"] == "branch-2"
    assert list(Execution.objects.for_subject(group).values_list("pk", flat=True)) == [
        response.json()["id"]
    ]
    # A model not listed, or an object that does not exist: 400 with the reason.
    for subject, problem in [
        ({"type": "auth.user", "id": "1"}, "is not a model executions may be about"),
        ({"type": "auth.group", "id": "999999"}, "there is no auth.group with id"),
        ({"type": "auth.group", "id": "not-a-number"}, "there is no auth.group with id"),
        ({"type": "auth.group", "id": "9" * 40}, "there is no auth.group with id"),
        ({"type": "auth.group", "id": "1\x00"}, "Null characters are not allowed"),
        ({"type": "nodot", "id": "1"}, "is not a model executions may be about"),
        ({"type": "auth.group"}, "required"),
    ]:
        response = client.post(
            "/api/executions/", {"chart": "loan", "subject": subject}, format="json"
        )
        assert response.status_code == 400
        assert problem in str(response.json()["subject"])


# ---- the admin ---------------------------------------------------------------------------------


def admin_client(user: User) -> Client:
    user.is_staff = True
    user.save()
    client = Client()
    client.force_login(user)
    return client


def test_admin_send_form_is_a_pick_list_of_what_the_user_may_send(loan: Execution) -> None:
    clerk = user_with("clerk", *OPERATE)
    page = admin_client(clerk).get(f"/admin/statecharts/execution/{loan.pk}/change/")
    html = page.content.decode()
    assert '<select name="name"' in html
    assert '<option value="escalate">escalate (disabled: the guard is false now)</option>' in html
    assert 'value="approve"' not in html.split('<select name="name"')[1].split("</select>")[0]
    assert "about:" in html and "branch-1" in html


def test_admin_send_refused_says_why_and_records_nothing(loan: Execution) -> None:
    clerk = user_with("clerk", *OPERATE)
    client = admin_client(clerk)
    page = client.post(
        f"/admin/statecharts/execution/{loan.pk}/send/", {"name": "approve"}, follow=True
    )
    assert "Not sent:" in page.content.decode() and "auth.approve_loan" in page.content.decode()
    loan.refresh_from_db()
    assert loan.steps == 1


def test_admin_free_name_when_the_chart_takes_a_family(rules: None) -> None:
    execution = stepper.start(Chart.objects.load(OPEN))
    superuser = User.objects.create_superuser("root", password="pw")
    client = Client()
    client.force_login(superuser)
    html = client.get(f"/admin/statecharts/execution/{execution.pk}/change/").content.decode()
    assert '<select name="name"' not in html
    assert "this execution also takes other names" in html
    client.post(f"/admin/statecharts/execution/{execution.pk}/send/", {"name": "note.x"})
    assert execution.history.get(seq=2).input["sender"]["username"] == "root"


def test_host_admin_inline_lists_the_executions_of_an_object(loan: Execution) -> None:
    superuser = User.objects.create_superuser("root", password="pw")
    request = type("R", (), {"user": superuser})()
    inline = ExecutionsInline(Group, site)
    assert list(inline.get_queryset(request).filter(subject_object_id=str(loan.subject.pk))) == [
        loan
    ]
    formset = inline.get_formset(request, loan.subject)(instance=loan.subject)
    assert [form.instance for form in formset.forms] == [loan]


# ---- the command -------------------------------------------------------------------------------


def test_command_as_user_is_checked_and_recorded(loan: Execution) -> None:
    user_with("clerk", *OPERATE)
    with pytest.raises(CommandError, match="not permitted: 'approve' needs the permission"):
        call_command("statechart", "send", str(loan.pk), "approve", "--as-user", "clerk")
    with pytest.raises(CommandError, match="no user 'nobody'"):
        call_command("statechart", "send", str(loan.pk), "approve", "--as-user", "nobody")
    call_command("statechart", "send", str(loan.pk), "escalate", "--as-user", "clerk",
                 stdout=io.StringIO())
    assert loan.history.get(seq=2).input["sender"]["username"] == "clerk"
    out = io.StringIO()
    call_command("statechart", "show", str(loan.pk), stdout=out)
    assert "can do now: approve, escalate (disabled), comment (conditional), reject" in (
        out.getvalue()
    )
    assert f"about: auth.group {loan.subject.pk} (branch-1)" in out.getvalue()
    out = io.StringIO()
    call_command("statechart", "show", str(loan.pk), "--json", stdout=out)
    document = json.loads(out.getvalue())
    assert document["subject"]["title"] == "branch-1"
    assert [e["name"] for e in document["available_events"]] == [
        "approve", "escalate", "comment", "reject",
    ]


def test_command_start_with_a_subject(rules: None) -> None:
    Chart.objects.load(LOAN)
    group = Group.objects.create(name="branch-3")
    call_command("statechart", "start", "loan", "--subject", f"auth.group:{group.pk}",
                 stdout=io.StringIO())
    assert Execution.objects.for_subject(group).count() == 1
    with pytest.raises(CommandError, match=r"--subject: .*app_label\.model:id"):
        call_command("statechart", "start", "loan", "--subject", "auth.group")


# ---- system checks -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("configured", "check_id"),
    [
        ({"EVENT_PERMISSIONS": {"loan": {"approve": "approve_loan"}}}, "statecharts.E043"),
        ({"EVENT_PERMISSIONS": {"loan": {"approve": {"check": "nope"}}}}, "statecharts.E044"),
        ({"EVENT_PERMISSIONS": {"loan": {"approve": {"perms": []}}}}, "statecharts.E043"),
        ({"EVENT_PERMISSIONS": ["loan"]}, "statecharts.E042"),
        ({"EVENT_CHECKS": {"x": "no.such.module.check"}}, "statecharts.E041"),
        ({"EVENT_CHECKS": "x"}, "statecharts.E040"),
        ({"SUBJECT_MODELS": ["shop.order"]}, "statecharts.E046"),
        ({"SUBJECT_MODELS": "auth.group"}, "statecharts.E045"),
    ],
)
def test_misconfigured_settings_are_reported(configured: dict[str, Any], check_id: str) -> None:
    with override_settings(STATECHARTS=configured):
        ids = {message.id for message in run_checks()}
    assert check_id in ids


def test_the_documented_settings_pass_the_checks() -> None:
    with override_settings(STATECHARTS=RULES):
        assert not [m for m in run_checks() if m.id and m.id.startswith("statecharts.")]


# ---- the document ------------------------------------------------------------------------------


def test_the_documents_examples_run_in_order(capsys: pytest.CaptureFixture[str]) -> None:
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[3] / "docs" /
            "permissions-and-available-events.md").read_text()
    import textwrap

    blocks = [textwrap.dedent(b) for b in re.findall(r"```python\n(.*?) *```", text, re.DOTALL)]
    namespace: dict[str, Any] = {}
    ran = 0
    for number, block in enumerate(blocks, 1):
        if "STATECHARTS = {" in block or "@admin.register" in block:
            continue  # a settings excerpt and a host's admin: not runnable here
        exec(compile(block, f"example {number}", "exec"), namespace)
        ran += 1
    assert ran == 3
    assert capsys.readouterr().out.split() == [
        "approve", "enabled", "escalate", "disabled", "comment", "conditional", "reject",
        "enabled",
    ]


# ---- the base permission, the timeline, replay and idempotency --------------------------------


def test_a_user_who_may_not_change_executions_may_send_nothing(loan: Execution) -> None:
    viewer = user_with("viewer", "statecharts.view_execution", "auth.approve_loan")
    assert decide(viewer, loan, "escalate").reasons == (
        "sending events needs the permission 'statecharts.change_execution'",
    )
    assert loan.available_events(user=viewer) == ()
    assert api(viewer).get(f"/api/executions/{loan.pk}/").json()["available_events"] == []
    with pytest.raises(CommandError, match=r"statecharts\.change_execution"):
        call_command("statechart", "send", str(loan.pk), "escalate", "--as-user", "viewer")


def test_the_sender_shows_in_the_timeline_and_replay_agrees(loan: Execution) -> None:
    manager = user_with("manager", *OPERATE, "auth.approve_loan")
    loan.send("approve", user=manager)
    out = io.StringIO()
    call_command("statechart", "show", str(loan.pk), stdout=out)
    assert "#2 event approve by manager: applied" in out.getvalue()
    replayed = io.StringIO()
    call_command("statechart", "replay", str(loan.pk), stdout=replayed)
    assert "replayed 2 step(s): every position matches" in replayed.getvalue()


def test_a_retried_send_with_the_same_key_and_user_is_applied_once(loan: Execution) -> None:
    clerk = user_with("clerk", *OPERATE)
    first = stepper.send(loan, "escalate", user=clerk, idempotency_key="k1")
    again = stepper.send(loan, "escalate", user=clerk, idempotency_key="k1")
    assert again.repeated and again.entry.seq == first.entry.seq == 2


@override_settings(ROOT_URLCONF="tests.policies.permissions.host_admin")
def test_both_ways_in_a_hosts_admin(loan: Execution) -> None:
    superuser = User.objects.create_superuser("root", password="pw")
    client = Client()
    client.force_login(superuser)
    group = loan.subject
    # From the object: its executions, each linked to the execution's page.
    html = client.get(f"/admin/auth/group/{group.pk}/change/").content.decode()
    assert "Executions about this object" in html
    assert f"/admin/statecharts/execution/{loan.pk}/change/" in html
    assert "review" in html  # where it stands
    # From the execution: what it is about, linked to the object's page.
    html = client.get(f"/admin/statecharts/execution/{loan.pk}/change/").content.decode()
    assert f'about: <a href="/admin/auth/group/{group.pk}/change/">branch-1</a>' in html


def test_a_check_that_raises_refuses_and_the_api_answers_403(
    loan: Execution, caplog: pytest.LogCaptureFixture
) -> None:
    settings = {
        **RULES,
        "EVENT_PERMISSIONS": {"loan": {"escalate": {"check": "broken"}}},
        "EVENT_CHECKS": {"broken": "tests.policies.permissions.rules.broken"},
    }
    clerk = user_with("clerk", *OPERATE)
    with override_settings(STATECHARTS=settings):
        response = api(clerk).post(
            f"/api/executions/{loan.pk}/send/", {"name": "escalate"}, format="json"
        )
    assert response.status_code == 403
    assert response.json()["reasons"] == [
        "'escalate': the check 'broken' said: it failed (KeyError), so the event is refused"
    ]
    assert "EVENT_CHECKS['broken'] failed" in caplog.text
    loan.refresh_from_db()
    assert loan.steps == 1


def test_api_list_filters_by_subject(loan: Execution) -> None:
    other = stepper.start(loan.chart, subject=Group.objects.create(name="branch-9"))
    client = api(user_with("reader", *OPERATE))
    found = client.get("/api/executions/", {"subject": f"auth.group:{loan.subject.pk}"}).json()
    assert [row["id"] for row in found["results"]] == [loan.pk]
    assert other.pk not in [row["id"] for row in found["results"]]
    for bad, problem in [
        ("auth.group", "write it as app_label.model:id"),
        ("nosuch.model:1", "is not an installed model"),
        ("auth.group:" + "9" * 65, "write it as app_label.model:id"),
        ("auth.group:1\x00", "Null characters are not allowed"),
    ]:
        response = client.get("/api/executions/", {"subject": bad})
        assert response.status_code == 400, bad
        assert problem in str(response.json()["subject"])


def test_admin_list_filters_by_the_subjects_model(loan: Execution) -> None:
    unrelated = stepper.start(Chart.objects.load(OPEN))
    superuser = User.objects.create_superuser("root", password="pw")
    client = Client()
    client.force_login(superuser)
    content_type = loan.subject_content_type
    page = client.get(
        "/admin/statecharts/execution/",
        {"subject_content_type__id__exact": content_type.pk},
    )
    shown = {row.pk for row in page.context["cl"].result_list}
    assert shown == {loan.pk} and unrelated.pk not in shown
    assert "By subject content type" in page.content.decode()
