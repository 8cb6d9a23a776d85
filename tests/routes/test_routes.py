"""Routes, durably: immediate sends after the commit through the outbox and the delivery
ledger, the route's answers recorded for replay, failures back to the sender, scope overrides
refused at start, and the registry's system checks. (Delayed sends: test_route_timers.py.)"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from routes import delivering, registry
from routes.models import DeliveryStatus, RouteDelivery
from statecharts import stepper
from statecharts.models import Chart, Execution, OutboxMessage
from statecharts.models.outbox import OutboxStatus
from statecharts.operations.inspection import datamodel_of
from statecharts.operations.replay import Verdict, replay
from statecharts.policies.validation import InvalidInput
from tests.routes.recording import Recorder, settings_with

pytestmark = pytest.mark.django_db

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)

CHART = f"""<scxml {NS} initial="a">
  <datamodel><data id="errors" expr="[]"/></datamodel>
  <state id="a">
    <transition event="go">
      <send type="record" target="ada" event="hello" id="greet"><param name="n" expr="1"/></send>
    </transition>
    <transition event="content">
      <send type="urn:example:record" target="bob" event="doc"><content>{{"a": 1}}</content></send>
    </transition>
    <transition event="bad"><send type="record" target="bad-one" event="x"/></transition>
    <transition event="lost"><send type="record" event="x"/></transition>
    <transition event="fax"><send type="fax" target="1" event="x"/></transition>
    <transition event="error.*">
      <assign location="errors" expr="errors.concat([[_event.name, _event.sendid || null]])"/>
    </transition>
  </state>
</scxml>"""


def start(metadata: dict[str, Any] | None = None, name: str = "routed") -> Execution:
    return stepper.start(Chart.objects.load(CHART, name=name), metadata=metadata, now=T0)


def errors(execution: Execution) -> list[Any]:
    execution.refresh_from_db()
    datamodel = datamodel_of(execution)
    assert isinstance(datamodel, dict)
    return list(datamodel["errors"])


def test_an_immediate_send_is_delivered_after_the_commit_once_with_its_key(
    recorder: type[Recorder],
) -> None:
    execution = start()
    stepper.send(execution, "go", now=T0)
    assert len(recorder.deliveries) == 1
    config, message, key = recorder.deliveries[0]
    assert config == {"label": "settings", "fail": False}  # OPTIONS over the defaults
    assert (message.route, message.type, message.target) == ("record", "record", "ada")
    assert (message.name, message.data, message.payload) == ("hello", {"n": 1}, "params")
    assert (message.send_id, message.send_ordinal) == ("greet", 1)
    assert key == f"{execution.session_id}:1"  # the execution and the send's ordinal
    ledger = RouteDelivery.objects.get()
    assert (ledger.key, ledger.status, ledger.send_id) == (key, DeliveryStatus.DELIVERED, "greet")
    assert OutboxMessage.objects.get(kind=delivering.KIND).status == OutboxStatus.DELIVERED

    # The outbox sweeper finding the message again (as after a crash) delivers nothing more.
    OutboxMessage.objects.update(status=OutboxStatus.PENDING)
    stepper.deliver_pending()
    assert len(recorder.deliveries) == 1

    stepper.send(execution, "content", now=T0)
    message = recorder.deliveries[1][1]
    assert (message.type, message.data, message.payload) == (
        "urn:example:record", {"a": 1}, "content",
    )
    assert recorder.deliveries[1][2] == f"{execution.session_id}:2"


def test_a_send_in_a_step_that_rolls_back_is_never_delivered(recorder: type[Recorder]) -> None:
    from statecharts.signals import step_finished

    execution = start()

    def fail(**kwargs: Any) -> None:  # inside the step's transaction: it rolls back
        raise RuntimeError("the step fails after its route send was performed")

    step_finished.connect(fail, dispatch_uid="test.rollback")
    try:
        with pytest.raises(RuntimeError, match="after its route send"):
            stepper.send(execution, "go", now=T0)
    finally:
        step_finished.disconnect(dispatch_uid="test.rollback")
    stepper.deliver_pending()
    assert recorder.deliveries == []
    assert not OutboxMessage.objects.filter(kind=delivering.KIND).exists()
    assert not RouteDelivery.objects.exists()


def test_the_route_refuses_targets_while_the_send_executes_and_replay_gets_the_answers(
    recorder: type[Recorder],
) -> None:
    execution = start()
    for event in ("bad", "lost", "fax", "go"):
        stepper.send(execution, event, now=T0)
    assert errors(execution) == [
        ["error.execution", "send_1"],  # the route: an invalid target
        ["error.communication", "send_2"],  # the route: no target, it cannot be dispatched
        ["error.execution", "send_3"],  # no route serves "fax"
    ]
    entries = execution.history.order_by("seq")
    recorded = [e.registered_types.get("route_answers") for e in entries]
    assert recorded[0] is None  # (the start sent nothing: nothing asked, nothing recorded)
    assert recorded[1] == [["record", "record", "bad-one", "invalid: a bad target"]]
    assert recorded[2] == [["record", "record", None, "unreachable: no target"]]
    assert entries[1].registered_types["send"]["urn:example:record"] == "record"
    # Replay hands the recorded answers back: the same positions, whatever the route says now.
    with override_settings(STATECHARTS=settings_with(ROUTES={})):
        assert replay(execution).verdict is Verdict.MATCHES


def test_a_failed_delivery_comes_back_as_error_communication_with_the_send_id(
    recorder: type[Recorder],
) -> None:
    routes = {"record": {**settings_with()["ROUTES"]["record"], "OPTIONS": {"fail": True}}}
    with override_settings(STATECHARTS=settings_with(ROUTES=routes)):
        execution = start()
        stepper.send(execution, "go", now=T0)
    assert errors(execution) == [["error.communication", "greet"]]
    ledger = RouteDelivery.objects.get()
    assert ledger.status == DeliveryStatus.FAILED
    assert ledger.reason == "ConnectionError: the far side is down"
    cause = execution.history.order_by("-seq").first().cause  # type: ignore[union-attr]
    assert cause == {"route_delivery": ledger.pk}


def test_a_claim_whose_worker_died_is_in_doubt_and_never_retried(
    recorder: type[Recorder],
) -> None:
    execution = start()
    real = delivering.perform
    delivering.perform = lambda *args, **kwargs: True  # the worker "dies" after the claim
    try:
        stepper.send(execution, "go", now=T0)
    finally:
        delivering.perform = real
    ledger = RouteDelivery.objects.get()
    assert ledger.status == DeliveryStatus.CLAIMED
    OutboxMessage.objects.update(status=OutboxStatus.PENDING)  # the sweeper tries it again
    stepper.deliver_pending()
    assert recorder.deliveries == []  # at most once: the claimed key is not retried blindly
    later = ledger.created + timedelta(seconds=301)
    assert list(RouteDelivery.objects.in_doubt(later, 300)) == [ledger]
    assert not RouteDelivery.objects.in_doubt(ledger.created, 300).exists()


def test_a_scope_overrides_only_what_the_route_lets_it(recorder: type[Recorder]) -> None:
    execution = start(metadata={"routes": {"record": {"label": "mine"}}})
    stepper.send(execution, "go", now=T0)
    assert recorder.deliveries[0][0]["label"] == "mine"
    before = Execution.objects.count()
    with pytest.raises(InvalidInput, match=r"overrides \['fail'\].*overridable: label"):
        start(metadata={"routes": {"record": {"fail": True}}})
    with pytest.raises(InvalidInput, match="'email', which is not registered"):
        start(metadata={"routes": {"email": {"subject_prefix": "x"}}})
    assert Execution.objects.count() == before  # nothing written


def test_a_chart_scope_from_settings_and_its_system_check(recorder: type[Recorder]) -> None:
    scoped = settings_with(ROUTE_OVERRIDES={"routed": {"record": {"label": "chart"}}})
    with override_settings(STATECHARTS=scoped):
        execution = start()
        stepper.send(execution, "go", now=T0)
        call_command("check")
    assert recorder.deliveries[0][0]["label"] == "chart"
    bad = settings_with(ROUTE_OVERRIDES={"routed": {"record": {"fail": True}, "gone": {}}})
    with override_settings(STATECHARTS=bad), pytest.raises(SystemCheckError) as raised:
        call_command("check")
    assert "routes.E002" in str(raised.value) and "'gone', which is not registered" in str(
        raised.value
    )


@pytest.mark.parametrize(
    ("routes", "expected"),
    [
        ({"x": {"ROUTE": "no.such.Route", "TYPES": ["x"]}}, "cannot be imported"),
        ({"x": {"ROUTE": "statecharts.models.Chart", "TYPES": ["x"]}}, "not a routes.base"),
        (
            {
                "x": {"ROUTE": "tests.routes.recording.Recorder", "TYPES": ["record"]},
                "y": {"ROUTE": "tests.routes.recording.Recorder", "TYPES": ["record"]},
            },
            "which 'x' serves",
        ),
        ({"x": {"ROUTE": "tests.routes.recording.Recorder", "TYPES": "x"}}, "TYPES"),
    ],
)
def test_bad_route_settings_fail_the_system_check_and_register_nothing(
    routes: dict[str, Any], expected: str
) -> None:
    with override_settings(STATECHARTS=settings_with(ROUTES=routes)):
        with pytest.raises(SystemCheckError, match=expected):
            call_command("check")
        assert registry.routes() == {}
        assert stepper.registered_types().route_for("x") is None


def test_without_routes_a_route_type_is_error_execution() -> None:
    execution = start()
    stepper.send(execution, "go", now=T0)
    assert errors(execution) == [["error.execution", "greet"]]
