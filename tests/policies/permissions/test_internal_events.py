"""Internal events are not buttons (issue 36): the doors leave out what a chart only sends
itself, unless the user has ``statecharts.send_internal_events``; ``Execution.available_events``
tells the whole truth."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from rest_framework.test import APIClient

from statecharts import stepper
from statecharts.models import Chart, Execution
from statecharts.policies.availability import available_events

pytestmark = pytest.mark.django_db

REMINDER = """<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" name="reminder"
    datamodel="ecmascript" initial="waiting">
  <state id="waiting">
    <onentry><send event="nudge.due" delay="1d"/></onentry>
    <transition event="nudge.due" target="waiting"/>
    <transition event="pay" target="paid"/>
  </state>
  <state id="paid"/>
</scxml>"""


def user_with(name: str, *codenames: str) -> User:
    user = User.objects.create_user(name, password="pw", is_staff=True)
    for codename in codenames:
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label="statecharts", codename=codename)
        )
    return User.objects.get(pk=user.pk)  # (a fresh permission cache)


@pytest.fixture
def execution() -> Execution:
    return stepper.start(Chart.objects.load(REMINDER))


def names(events: tuple[object, ...]) -> list[str]:
    return [event.name for event in events]  # type: ignore[attr-defined]


def test_the_doors_leave_out_what_the_chart_only_sends_itself(execution: Execution) -> None:
    clerk = user_with("clerk", "view_execution", "change_execution")
    operator = user_with("operator", "view_execution", "change_execution", "send_internal_events")
    assert names(available_events(execution)) == ["pay"]
    assert names(available_events(execution, user=clerk)) == ["pay"]
    assert names(available_events(execution, user=operator)) == ["nudge.due", "pay"]
    assert names(execution.available_events()) == ["nudge.due", "pay"]
    assert names(execution.available_events(include_internal=False)) == ["pay"]


def test_the_api_lists_only_what_the_outside_may_send(execution: Execution) -> None:
    api = APIClient()
    api.force_authenticate(user_with("clerk", "view_execution", "change_execution"))
    listed = api.get(f"/api/executions/{execution.pk}/").json()["available_events"]
    assert [event["name"] for event in listed] == ["pay"]


@pytest.mark.parametrize(("codenames", "offered"), [
    (("view_execution", "change_execution"), ["pay"]),
    (("view_execution", "change_execution", "send_internal_events"), ["nudge.due", "pay"]),
])
def test_the_admins_send_form_offers_it_only_with_the_permission(
    client: Client, execution: Execution, codenames: tuple[str, ...], offered: list[str]
) -> None:
    client.force_login(user_with("someone", *codenames))
    page = client.get(f"/admin/statecharts/execution/{execution.pk}/change/")
    form = page.context["send_form"]
    assert sorted(hint.name for hint in form.events) == offered
    assert sorted(event.name for event in form.available) == offered
