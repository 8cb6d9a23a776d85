"""The built-in routes: ``email`` (send_mail to an allow-list of domains, Django's locmem
backend) and ``task`` (a function registered by name in TASKS). The attacks: an address off
the allow-list (also from event data), an override of the allow-list by a scope: refused, and
nothing sent."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core import mail
from django.test import override_settings

from routes.models import DeliveryStatus, RouteDelivery
from statecharts import stepper
from statecharts.models import Chart, Execution
from statecharts.operations.inspection import datamodel_of
from statecharts.policies.validation import InvalidInput
from tests.routes import task_functions
from timers import firing

pytestmark = pytest.mark.django_db

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)

ROUTES: dict[str, Any] = {
    "email": {
        "ROUTE": "routes.builtins.EmailRoute",
        "TYPES": ["email"],
        "OPTIONS": {"allowed_domains": ["example.com"], "from_email": "robot@example.com"},
    },
    "task": {
        "ROUTE": "routes.builtins.TaskRoute", "TYPES": ["task"], "OPTIONS": {"queue": "inline"},
    },
}

CHART = f"""<scxml {NS} initial="a">
  <datamodel><data id="errors" expr="[]"/></datamodel>
  <state id="a">
    <transition event="mail">
      <send type="email" targetexpr="_event.data.to" event="welcome" id="m">
        <param name="subject" expr="'Welcome'"/>
        <param name="body" expr="'Hello ' + _event.data.to"/>
      </send>
    </transition>
    <transition event="note">
      <send type="email" target="ada@example.com" event="note"><content>just a body</content></send>
    </transition>
    <transition event="nobody"><send type="email" event="x"/></transition>
    <transition event="run"><send type="task" target="remember" event="run" delay="1s">
      <param name="n" expr="7"/></send></transition>
    <transition event="unknown_task"><send type="task" target="os.system" event="x"/></transition>
    <transition event="error.*">
      <assign location="errors" expr="errors.concat([[_event.name, _event.sendid || null]])"/>
    </transition>
  </state>
</scxml>"""


@pytest.fixture(autouse=True)
def builtins() -> Iterator[None]:
    from django.conf import settings

    configured = {
        **settings.STATECHARTS,
        "ROUTES": ROUTES,
        "TASKS": {
            **settings.STATECHARTS.get("TASKS", {}),
            "remember": "tests.routes.task_functions.remember",
        },
    }
    task_functions.CALLS.clear()
    with override_settings(
        STATECHARTS=configured, EMAIL_BACKEND="django.core.mail.backends.locmem.EmailBackend"
    ):
        yield


def start(metadata: dict[str, Any] | None = None) -> Execution:
    return stepper.start(Chart.objects.load(CHART, name="mailer"), metadata=metadata, now=T0)


def errors(execution: Execution) -> list[Any]:
    execution.refresh_from_db()
    datamodel = datamodel_of(execution)
    assert isinstance(datamodel, dict)
    return list(datamodel["errors"])


def test_the_email_route_sends_to_an_allowed_domain() -> None:
    execution = start()
    stepper.send(execution, "mail", {"to": "ada@mail.example.com"}, now=T0)  # a subdomain
    stepper.send(execution, "note", now=T0)
    assert [(m.to, m.subject, m.body, m.from_email) for m in mail.outbox] == [
        (["ada@mail.example.com"], "Welcome", "Hello ada@mail.example.com", "robot@example.com"),
        (["ada@example.com"], "note", "just a body", "robot@example.com"),
    ]
    assert set(RouteDelivery.objects.values_list("status", flat=True)) == {
        DeliveryStatus.DELIVERED
    }
    assert errors(execution) == []


@pytest.mark.parametrize(
    "address",
    ["eve@evil.test", "eve@example.com.evil.test", "eve@notexample.com", "a@b@example.com",
     "eve@example.com\nBcc: x@evil.test", "eve@example.com\n", "not an address"],
)
def test_an_address_off_the_allow_list_is_error_execution_and_nothing_is_sent(
    address: str,
) -> None:
    execution = start()
    stepper.send(execution, "mail", {"to": address}, now=T0)
    assert errors(execution) == [["error.execution", "m"]]
    assert mail.outbox == [] and not RouteDelivery.objects.exists()


def test_no_address_is_error_communication() -> None:
    execution = start()
    stepper.send(execution, "nobody", now=T0)
    assert errors(execution) == [["error.communication", "send_1"]]
    assert mail.outbox == []


def test_a_scope_cannot_widen_the_allow_list() -> None:
    with pytest.raises(InvalidInput, match="allowed_domains"):
        start(metadata={"routes": {"email": {"allowed_domains": ["evil.test"]}}})
    assert not Execution.objects.exists()
    # The one option it may override by default:
    execution = start(metadata={"routes": {"email": {"subject_prefix": "[acme] "}}})
    stepper.send(execution, "note", now=T0)
    assert mail.outbox[0].subject == "[acme] note"


def test_the_task_route_calls_the_registered_function_when_due() -> None:
    execution = start()
    stepper.send(execution, "run", now=T0)
    assert task_functions.CALLS == []
    firing.fire_all_due(now=T0 + timedelta(seconds=1))
    assert task_functions.CALLS == [{"n": 7}]
    assert RouteDelivery.objects.get().status == DeliveryStatus.DELIVERED
    assert errors(execution) == []


def test_the_task_route_refuses_a_function_not_registered_by_name() -> None:
    execution = start()
    stepper.send(execution, "unknown_task", now=T0)
    assert errors(execution) == [["error.execution", "send_1"]]
    assert task_functions.CALLS == [] and not RouteDelivery.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_real_cluster_runs_the_task_of_a_task_route_send(
    qcluster: Any, wait_for_cluster: Any
) -> None:
    """The default queue (django-q2): the route enqueues after the commit, a worker process
    of a real cluster calls the function registered by name (the test settings' "double")."""
    from django.conf import settings
    from django_q.models import Success

    routes = {"task": {"ROUTE": "routes.builtins.TaskRoute", "TYPES": ["task"]}}
    chart = f"""<scxml {NS} initial="a"><state id="a"><onentry>
      <send type="task" target="double" event="calc"><param name="amount" expr="21"/></send>
    </onentry></state></scxml>"""
    with override_settings(STATECHARTS={**settings.STATECHARTS, "ROUTES": routes}):
        execution = stepper.start(Chart.objects.load(chart), now=T0)
    key = f"{execution.session_id}:1"
    assert RouteDelivery.objects.get().status == DeliveryStatus.DELIVERED  # enqueued

    def ran() -> bool:
        return Success.objects.filter(name=f"route {key}"[:100]).exists()

    with tempfile.TemporaryFile("w+") as log, qcluster(log) as cluster:
        wait_for_cluster(ran, cluster, log, "the task route's task")
    assert Success.objects.get(name=f"route {key}"[:100]).result == {"doubled": 42}
