"""The apps' own telemetry events (docs/telemetry.md): route deliveries and route timers
(``routes.telemetry.RouteEvent``) and the invocation lifecycle
(``invocations.telemetry.InvocationEvent``), declared by each app and sent through the same
contract as the core's events: one Django signal per event, the DEBUG log record, and the
OpenTelemetry bridge (checked with OpenTelemetry's own in-memory exporter and reader). Each
event is sent once at its point, after the commit; a receiver that raises changes nothing; a
span for a delayed delivery or a child's start joins the trace of the step that caused it;
with nothing listening nothing is built. The clock is injected; nothing waits."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.test import override_settings
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import invocations.telemetry as invocation_telemetry
import routes.telemetry as route_telemetry
from invocations import operating as invocation_operating
from invocations import tasks
from invocations.handlers import HandlerInvocation
from invocations.models import Invocation
from invocations.telemetry import InvocationEvent
from routes import delivering
from routes.models import DeliveryStatus, RouteDelivery
from routes.telemetry import RouteEvent
from statecharts import conf, stepper, telemetry
from statecharts.conf import Declaration
from statecharts.core import telemetry as core
from statecharts.models import Chart, Execution, OutboxMessage
from statecharts.models.outbox import OutboxStatus
from tests.telemetry.otel_harness import metric_points
from timers import firing
from timers.models import RouteTimer

pytestmark = pytest.mark.django_db(transaction=True)

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
T0 = datetime(2031, 5, 1, 9, 0, tzinfo=UTC)
S = timedelta(seconds=1)
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
ROOT = Path(__file__).resolve().parents[2]

# The injected clock (STATECHARTS["CLOCK"]): what the platform reads as "now".
NOW = {"t": T0}


def clock() -> datetime:
    return NOW["t"]


ROUTED = f"""<scxml {NS} name="routed" initial="a">
  <state id="a">
    <transition event="go"><send id="now" type="record" target="ada" event="hello"/></transition>
    <transition event="later">
      <send id="nudge" type="record" target="ada" event="nudge" delay="3s"/></transition>
    <transition event="drop"><cancel sendid="nudge"/></transition>
    <transition event="error.*" target="broken"/>
  </state>
  <state id="broken"/>
</scxml>"""

PAYMENT = f"""<scxml {NS} name="payment" initial="paying">
  <state id="paying">
    <invoke id="pay" type="task" src="charge"><param name="amount" expr="42"/></invoke>
    <transition event="done.invoke.pay" target="paid"/>
    <transition event="error.communication.invoke.pay" target="failed"/>
    <transition event="give_up" target="abandoned"/>
  </state>
  <final id="paid"/><state id="failed"/><state id="abandoned"/>
</scxml>"""
SILENT = PAYMENT.replace('type="task" src="charge"', 'type="silent"').replace(
    'name="payment"', 'name="silent"'
)

CHILD = f"""<scxml {NS} initial="work">
  <state id="work"><transition event="finish" target="end"/></state>
  <final id="end"/>
</scxml>"""
PARENT = f"""<scxml {NS} name="parent" initial="waiting">
  <state id="waiting">
    <invoke id="kid" type="scxml"><content>{CHILD}</content></invoke>
    <transition event="done.invoke.kid" target="done"/>
    <transition event="abandon" target="elsewhere"/>
  </state>
  <state id="elsewhere"/>
  <final id="done"/>
</scxml>"""

failures = {"left": 0}


def charge(amount: int) -> dict[str, Any]:
    if failures["left"] > 0:
        failures["left"] -= 1
        raise ConnectionError("the payment provider is down")
    return {"charged": amount}


class Silent:
    """A handler that never answers."""

    def start(self, invocation: HandlerInvocation) -> None:
        return None

    def cancel(self, invocation: HandlerInvocation) -> None:
        return None


def app_settings(**extra: Any) -> dict[str, Any]:
    route = {"ROUTE": "tests.routes.recording.Recorder", "TYPES": ["record"], "OPTIONS": {}}
    return {
        **settings.STATECHARTS,
        "CLOCK": f"{__name__}.clock",
        "ROUTES": {"record": route},
        "TASKS": {"charge": f"{__name__}.charge"},
        "INVOKERS": {"task": "invocations.handlers.TaskInvoker", "silent": f"{__name__}.Silent"},
        "INVOKE_HANDLER_QUEUE": "inline",
        "INVOKE_HANDLER_MAX_ATTEMPTS": 2,
        "INVOKE_HANDLER_RETRY_SECONDS": 10,
        "INVOKE_HANDLER_TIMEOUT_SECONDS": 300,
        **extra,
    }


@pytest.fixture(autouse=True)
def configured() -> Iterator[None]:
    from tests.routes.recording import Recorder

    NOW["t"] = T0
    failures["left"] = 0
    Recorder.deliveries.clear()
    with override_settings(STATECHARTS=app_settings()):
        yield
    Recorder.deliveries.clear()


class Recorder:
    """Receives every telemetry signal, the apps' included; notes where each arrived."""

    def __init__(self) -> None:
        self.events: list[tuple[StrEnum, dict[str, Any]]] = []
        self.in_transaction: list[bool] = []

    def __call__(self, sender: StrEnum, **attributes: Any) -> None:
        attributes.pop("signal", None)
        self.events.append((sender, attributes))
        self.in_transaction.append(connection.in_atomic_block)

    def of(self, event: StrEnum) -> list[dict[str, Any]]:
        return [a for e, a in self.events if e is event]

    def names(self, family: str) -> list[str]:
        return [e.value for e, _ in self.events if core.family(e)[0] == family]


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    recording = Recorder()
    signals = telemetry.all_signals()
    for signal in signals.values():
        signal.connect(recording, weak=False, dispatch_uid="tests.app_events")
    yield recording
    for signal in signals.values():
        signal.disconnect(dispatch_uid="tests.app_events")


def load(source: str) -> Chart:
    return Chart.objects.load(source)


# ---- declared by the apps -------------------------------------------------------------------


def test_each_app_declares_its_events_and_each_event_has_one_signal() -> None:
    declared = telemetry.declared_events()
    assert set(RouteEvent) <= set(declared) and set(InvocationEvent) <= set(declared)
    assert not set(core.TelemetryEvent) & set(declared)  # the core's enum is not extended
    # The signal the app exposes by name is the one statecharts.telemetry has for the event.
    assert route_telemetry.route_delivered is telemetry.signal_for(RouteEvent.DELIVERED)
    assert route_telemetry.route_timer_fired is telemetry.signal_for(RouteEvent.TIMER_FIRED)
    assert invocation_telemetry.invocation_started is telemetry.signal_for(InvocationEvent.STARTED)
    signals = telemetry.all_signals()
    assert (
        len({id(s) for s in signals.values()})
        == len(signals)
        == len(core.TelemetryEvent) + len(declared)
    )


class Clashing(StrEnum):
    FIRED = "timer.fired"  # the core's


class Unnamed(StrEnum):
    OOPS = "oops"


@pytest.mark.parametrize(
    ("path", "problem"),
    [(f"{__name__}.Clashing", "declared by"), (f"{__name__}.Unnamed", "<family>.<outcome>")],
)
def test_a_declared_event_must_be_named_by_its_family_and_not_taken(
    monkeypatch: pytest.MonkeyPatch, path: str, problem: str
) -> None:
    installed = conf.declarations()
    bad = Declaration(app="tests", telemetry_events=(path,))
    monkeypatch.setattr(conf, "declarations", lambda: [*installed, bad])
    with pytest.raises(ImproperlyConfigured, match=problem):
        telemetry.declared_events()


def test_every_declared_event_is_documented_with_its_signal() -> None:
    page = (ROOT / "docs" / "telemetry.md").read_text(encoding="utf-8")
    for event in telemetry.declared_events():
        signal = event.value.replace(".", "_")
        assert f"| `{event.value}` | `{signal}` |" in page, event
        module = type(event).__module__
        assert getattr(__import__(module, fromlist=[signal]), signal) is telemetry.signal_for(event)


def test_a_receiver_on_an_app_signal_subscribes_the_bridge_and_its_removal_unsubscribes_it() -> (
    None
):
    assert telemetry.bridge not in core.listeners
    recording = Recorder()
    route_telemetry.route_failed.connect(recording, weak=False)
    try:
        assert telemetry.bridge in core.listeners
    finally:
        route_telemetry.route_failed.disconnect(recording)
    assert telemetry.bridge not in core.listeners


# ---- route deliveries ------------------------------------------------------------------------


def test_an_immediate_delivery_is_one_route_delivered_event_after_the_commit(
    recorder: Recorder,
) -> None:
    execution = stepper.start(load(ROUTED), now=T0)
    NOW["t"] = T0 + 2 * S
    stepper.send(execution.pk, "go", now=T0, caller_context={"request_id": "r-9"})
    (delivered,) = recorder.of(RouteEvent.DELIVERED)
    row = RouteDelivery.objects.get()
    assert delivered["delivery_id"] == row.pk and delivered["key"] == row.key
    assert (delivered["route"], delivered["send_id"], delivered["event_name"]) == (
        "record",
        "now",
        "hello",
    )
    assert delivered["execution_id"] == execution.pk
    assert delivered["session_id"] == execution.session_id
    assert delivered["driver"] == "durable" and delivered["delayed"] is False
    assert delivered["caller_context"] == {"request_id": "r-9"}  # the sending step's
    assert delivered["lateness_s"] == 2.0  # from writing the send to the route's call
    assert delivered["duration_s"] >= 0 and delivered["started_ns"] > 0
    assert recorder.names("route") == ["route.delivered"]
    assert not any(recorder.in_transaction)


def test_a_route_that_raises_is_one_route_failed_event_with_the_error(recorder: Recorder) -> None:
    failing = {"ROUTE": "tests.routes.recording.Recorder", "TYPES": ["record"]}
    with override_settings(
        STATECHARTS=app_settings(ROUTES={"record": {**failing, "OPTIONS": {"fail": True}}})
    ):
        execution = stepper.start(load(ROUTED), now=T0)
        stepper.send(execution.pk, "go", now=T0)
    (failed,) = recorder.of(RouteEvent.FAILED)
    assert "the far side is down" in failed["error"]
    assert failed["delivery_id"] == RouteDelivery.objects.get(status=DeliveryStatus.FAILED).pk
    assert failed["duration_s"] >= 0 and failed["key"] == f"{execution.session_id}:1"
    assert recorder.names("route") == ["route.failed"]
    execution.refresh_from_db()
    assert execution.configuration == ["broken"]  # the sender was told, as before


def test_a_delivery_finding_its_key_claimed_and_never_settled_is_route_in_doubt(
    recorder: Recorder,
) -> None:
    execution = stepper.start(load(ROUTED), now=T0)
    stepper.send(execution.pk, "go", now=T0)
    message = OutboxMessage.objects.get(kind=delivering.KIND)

    # The message found again after its key was settled: decided, nothing to report.
    OutboxMessage.objects.filter(pk=message.pk).update(status=OutboxStatus.PENDING)
    stepper.deliver([message.pk])
    assert recorder.of(RouteEvent.IN_DOUBT) == []

    # As if the attempt had died between the claim and the settle.
    RouteDelivery.objects.update(status=DeliveryStatus.CLAIMED, settled=None)
    OutboxMessage.objects.filter(pk=message.pk).update(status=OutboxStatus.PENDING)
    stepper.deliver([message.pk])
    (doubt,) = recorder.of(RouteEvent.IN_DOUBT)
    assert doubt["key"] == f"{execution.session_id}:1"
    assert doubt["delivery_id"] == RouteDelivery.objects.get().pk
    assert "never settled" in doubt["reason"]
    from tests.routes.recording import Recorder as Route

    assert len(Route.deliveries) == 1  # at most once: not called again
    from routes import telemetry as route_telemetry

    assert route_telemetry.report_in_doubt(T0 + timedelta(days=1)) == 0  # reported already
    assert len(recorder.of(RouteEvent.IN_DOUBT)) == 1

    # An operator records its fate: the key ends in one route.delivered after all.
    from routes import operating

    later = T0 + timedelta(hours=1)
    operating.mark(doubt["delivery_id"], "mark_delivered", reason="seen at the far end", now=later)
    first, marked = recorder.of(RouteEvent.DELIVERED)
    assert "marked_by_operator" not in first
    assert marked["marked_by_operator"] is True and marked["reason"] == "seen at the far end"
    assert marked["delivery_id"] == doubt["delivery_id"]
    assert marked["session_id"] == execution.session_id


def test_a_delayed_delivery_left_claimed_is_reported_in_doubt_once_by_the_minutely_report(
    recorder: Recorder,
) -> None:
    """A delayed send's key claimed by a worker that died in the route's call: nothing sees
    that key again, so the every-minute report sends route.in_doubt once it has been claimed
    longer than ROUTE_IN_DOUBT_SECONDS, once per delivery; a delivery already reported when
    its redelivery found it claimed is not reported again."""
    from routes import telemetry as route_telemetry
    from routes.conf import route_settings

    execution = stepper.start(load(ROUTED), now=T0)
    stepper.send(execution.pk, "go", now=T0)
    stepper.send(execution.pk, "go", now=T0)
    first, second = RouteDelivery.objects.order_by("pk")
    claimed_at = T0 + timedelta(minutes=5)
    RouteDelivery.objects.update(
        status=DeliveryStatus.CLAIMED, settled=None, delayed=True, created=claimed_at
    )
    doubt_after = timedelta(seconds=route_settings.ROUTE_IN_DOUBT_SECONDS)

    assert route_telemetry.report_in_doubt(claimed_at + doubt_after) == 0  # not yet
    assert recorder.of(RouteEvent.IN_DOUBT) == []
    later = claimed_at + doubt_after + timedelta(seconds=1)
    assert route_telemetry.report_in_doubt(later) == 2
    reported = recorder.of(RouteEvent.IN_DOUBT)
    assert sorted(e["delivery_id"] for e in reported) == [first.pk, second.pk]
    assert all(e["session_id"] == execution.session_id for e in reported)
    assert all(e["delayed"] is True and "never settled" in e["reason"] for e in reported)
    assert route_telemetry.report_in_doubt(later + timedelta(minutes=1)) == 0  # once each
    assert len(recorder.of(RouteEvent.IN_DOUBT)) == 2

    # Nothing listening: nothing read, nothing marked (a listener later still hears it).
    RouteDelivery.objects.filter(pk=second.pk).update(doubt_reported=None)
    for signal in telemetry.all_signals().values():
        signal.disconnect(dispatch_uid="tests.app_events")
    assert route_telemetry.report_in_doubt(later) == 0
    assert RouteDelivery.objects.get(pk=second.pk).doubt_reported is None


# ---- route timers ----------------------------------------------------------------------------


def test_route_timer_scheduled_fired_and_its_delayed_delivery(recorder: Recorder) -> None:
    execution = stepper.start(load(ROUTED), now=T0)
    stepper.send(execution.pk, "later", now=T0, caller_context={"traceparent": TRACEPARENT})
    row = RouteTimer.objects.get()
    assert row.context == {"traceparent": TRACEPARENT}  # kept from the scheduling step
    (scheduled,) = recorder.of(RouteEvent.TIMER_SCHEDULED)
    assert (scheduled["key"], scheduled["send_id"], scheduled["delay_ms"]) == (
        row.key,
        "nudge",
        3000,
    )
    assert scheduled["caller_context"] == {"traceparent": TRACEPARENT}
    assert scheduled["session_id"] == execution.session_id
    NOW["t"] = T0 + 5 * S
    assert firing.fire_all_due(now=T0 + 5 * S).outcomes == {"fired": 1}
    (fired,) = recorder.of(RouteEvent.TIMER_FIRED)
    assert fired["route_timer_id"] == row.pk and fired["lateness_s"] == 2.0
    assert fired["key"] == row.key and fired["session_id"] == execution.session_id
    (delivered,) = recorder.of(RouteEvent.DELIVERED)
    assert delivered["delayed"] is True and delivered["key"] == row.key
    assert delivered["caller_context"] == {"traceparent": TRACEPARENT}
    assert delivered["lateness_s"] == 2.0  # from its due time
    assert recorder.names("route_timer") == ["route_timer.scheduled", "route_timer.fired"]
    assert not any(recorder.in_transaction)


def test_route_timer_cancelled_discarded_and_snoozed(recorder: Recorder) -> None:
    cancelled = stepper.start(load(ROUTED), now=T0)
    stepper.send(cancelled.pk, "later", now=T0)
    stepper.send(cancelled.pk, "drop", now=T0)
    (cancel,) = recorder.of(RouteEvent.TIMER_CANCELLED)
    assert cancel["execution_id"] == cancelled.pk and "<cancel>" in cancel["reason"]

    finished = stepper.start(load(ROUTED), now=T0)
    stepper.send(finished.pk, "later", now=T0)
    stepper.cancel(finished.pk, now=T0)
    held = stepper.start(load(ROUTED), now=T0)
    stepper.send(held.pk, "later", now=T0)
    with override_settings(STATECHARTS=app_settings(ROUTES={})):
        # The finished execution's row is discarded; the other's route is not registered
        # here (a deployment fact): snoozed. (Both in one chunk.)
        assert firing.fire_all_due(now=T0 + 4 * S).outcomes == {"discarded": 1, "snoozed": 1}
    (discarded,) = recorder.of(RouteEvent.TIMER_DISCARDED)
    assert discarded["execution_id"] == finished.pk and "cancelled" in discarded["reason"]
    assert discarded["lateness_s"] == 1.0
    (snoozed,) = recorder.of(RouteEvent.TIMER_SNOOZED)
    assert snoozed["execution_id"] == held.pk and "not registered" in snoozed["reason"]
    assert recorder.of(RouteEvent.TIMER_FIRED) == recorder.of(RouteEvent.DELIVERED) == []


def test_a_receiver_that_raises_breaks_no_delivery(caplog: pytest.LogCaptureFixture) -> None:
    from tests.routes.recording import Recorder as Route

    def broken(sender: Any, **attributes: Any) -> None:
        raise RuntimeError("receiver bug")

    signals = [route_telemetry.route_delivered, route_telemetry.route_timer_fired]
    for signal in signals:
        signal.connect(broken, weak=False)
    try:
        execution = stepper.start(load(ROUTED), now=T0)
        stepper.send(execution.pk, "go", now=T0)
        stepper.send(execution.pk, "later", now=T0)
        assert firing.fire_all_due(now=T0 + 3 * S).outcomes == {"fired": 1}
    finally:
        for signal in signals:
            signal.disconnect(broken)
    assert [message.name for _, message, _ in Route.deliveries] == ["hello", "nudge"]
    statuses = set(RouteDelivery.objects.values_list("status", flat=True))
    assert statuses == {DeliveryStatus.DELIVERED}
    logged = [r for r in caplog.records if r.name == "statecharts.telemetry"]
    assert sum("receiver bug" in r.getMessage() for r in logged) == 3


# ---- invocations -----------------------------------------------------------------------------


def test_a_handler_started_and_answered(recorder: Recorder) -> None:
    execution = stepper.start(load(PAYMENT), now=T0, caller_context={"request_id": "r-1"})
    invocation = Invocation.objects.get(parent=execution)
    (started,) = recorder.of(InvocationEvent.STARTED)
    assert started["invocation_id"] == invocation.pk and started["invokeid"] == "pay"
    assert (started["invoke_type"], started["attempts"], started["ordinal"]) == ("task", 1, 1)
    assert started["execution_id"] == execution.pk
    assert started["session_id"] == execution.session_id
    assert started["caller_context"] == {"request_id": "r-1"}
    assert started["duration_s"] >= 0
    (answered,) = recorder.of(InvocationEvent.ANSWERED)
    assert (answered["answer_kind"], answered["key"]) == ("done", "start")
    assert recorder.names("invocation") == ["invocation.started", "invocation.answered"]
    assert not any(recorder.in_transaction)


def test_a_failing_start_is_retried_then_failed_once(recorder: Recorder) -> None:
    failures["left"] = 5
    execution = stepper.start(load(PAYMENT), now=T0)
    (retried,) = recorder.of(InvocationEvent.RETRIED)
    assert retried["attempts"] == 1 and "provider is down" in retried["error"]
    tasks.sweep(T0 + 11 * S, run_inline=True)
    (failed,) = recorder.of(InvocationEvent.FAILED)
    assert "failed 2 times" in failed["error"] and failed["attempts"] == 2
    assert recorder.names("invocation") == ["invocation.retried", "invocation.failed"]
    execution.refresh_from_db()
    assert execution.configuration == ["failed"]


def test_a_handler_timed_out_is_timed_out_not_failed(recorder: Recorder) -> None:
    stepper.start(load(SILENT), now=T0)
    assert tasks.sweep(T0 + 301 * S)["timed_out"] == 1
    (timed_out,) = recorder.of(InvocationEvent.TIMED_OUT)
    assert "timed out" in timed_out["reason"]
    assert recorder.names("invocation") == ["invocation.started", "invocation.timed_out"]


def test_cancelled_by_the_parent_leaving_and_by_an_operator(recorder: Recorder) -> None:
    left = stepper.start(load(SILENT), now=T0)
    stepper.send(left.pk, "give_up", now=T0)
    (by_parent,) = recorder.of(InvocationEvent.CANCELLED)
    assert by_parent["execution_id"] == left.pk
    assert by_parent["reason"] == "the invoking state was exited"

    operated = stepper.start(load(SILENT), now=T0)
    invocation = Invocation.objects.get(parent=operated)
    invocation_operating.cancel(invocation.pk, reason="stuck for a day", now=T0)
    cancelled = recorder.of(InvocationEvent.CANCELLED)
    assert len(cancelled) == 2 and "stuck for a day" in cancelled[1]["reason"]
    assert recorder.of(InvocationEvent.FAILED) == []


def test_a_child_chart_started_answered_failed_and_cancelled(recorder: Recorder) -> None:
    parent = stepper.start(load(PARENT), now=T0)
    invocation = Invocation.objects.get(parent=parent)
    (started,) = recorder.of(InvocationEvent.STARTED)
    assert started["invoke_type"] == "scxml" and started["invocation_id"] == invocation.pk
    assert started["child_execution_id"] == invocation.child_id and started["duration_s"] >= 0
    stepper.send(invocation.child_id, "finish", now=T0)
    (answered,) = recorder.of(InvocationEvent.ANSWERED)
    assert answered["answer_kind"] == "done" and answered["invocation_id"] == invocation.pk
    assert answered["event_name"] == "done.invoke.kid"
    parent.refresh_from_db()
    assert parent.status == "completed"

    abandoned = stepper.start(load(PARENT), now=T0)
    stepper.send(abandoned.pk, "abandon", now=T0)
    (cancelled,) = recorder.of(InvocationEvent.CANCELLED)
    assert cancelled["execution_id"] == abandoned.pk

    nowhere = PARENT.replace(
        f'type="scxml"><content>{CHILD}</content></invoke>',
        'type="scxml" srcexpr="\'file:nowhere.scxml\'"/>',
    ).replace('name="parent"', 'name="orphan"')
    refused = stepper.start(load(nowhere), now=T0)
    (failed,) = recorder.of(InvocationEvent.FAILED)
    assert failed["execution_id"] == refused.pk and failed["count"] == 1
    assert "external documents are disabled" in failed["error"]
    assert len(recorder.of(InvocationEvent.STARTED)) == 2


# ---- logging, OpenTelemetry, nothing listening -------------------------------------------------


def test_an_app_event_is_a_debug_log_record_of_the_same_shape(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = logging.getLogger("statecharts.telemetry")
    with caplog.at_level(logging.DEBUG, logger="statecharts.telemetry"):
        telemetry.install()
        try:
            execution = stepper.start(load(ROUTED), now=T0)
            stepper.send(execution.pk, "go", now=T0)
        finally:
            logger.setLevel(logging.NOTSET)
            caplog.handler.setLevel(logging.NOTSET)
    telemetry.install()
    records = [
        r.telemetry  # type: ignore[attr-defined]
        for r in caplog.records
        if r.name == "statecharts.telemetry" and r.telemetry["telemetry_event"] == "route.delivered"  # type: ignore[attr-defined]
    ]
    (record,) = records
    assert record["session_id"] == execution.session_id and record["driver"] == "durable"
    assert record["route"] == "record" and record["delayed"] is False
    assert telemetry.bridge not in core.listeners


def in_trace(span: Any, traceparent: str) -> bool:
    _, trace_id, span_id, _ = traceparent.split("-")
    return (
        span.parent is not None
        and format(span.context.trace_id, "032x") == trace_id
        and format(span.parent.span_id, "016x") == span_id
    )


def test_a_delayed_delivery_span_joins_the_trace_of_the_step_that_scheduled_it(
    otel: tuple[InMemorySpanExporter, InMemoryMetricReader],
) -> None:
    exporter, reader = otel
    execution = stepper.start(load(ROUTED), now=T0)
    stepper.send(execution.pk, "later", now=T0, caller_context={"traceparent": TRACEPARENT})
    NOW["t"] = T0 + 4 * S
    firing.fire_all_due(now=T0 + 4 * S)
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "statecharts.route"]
    assert in_trace(span, TRACEPARENT)
    assert span.attributes["statecharts.outcome"] == "delivered"
    assert span.attributes["statecharts.delayed"] is True
    assert span.attributes["statecharts.key"] == RouteDelivery.objects.get().key
    assert TRACEPARENT in span.attributes["statecharts.caller_context"]
    assert span.end_time >= span.start_time
    timers = {
        p.attributes["statecharts.outcome"]: p.value
        for p in metric_points(reader, "statecharts.route_timer.outcomes")
    }
    assert timers == {"scheduled": 1, "fired": 1}
    (delivered,) = metric_points(reader, "statecharts.route.outcomes")
    assert delivered.value == 1 and delivered.attributes["statecharts.route"] == "record"
    (lateness,) = metric_points(reader, "statecharts.route.lateness")
    assert (lateness.count, lateness.sum) == (1, 1.0)
    (duration,) = metric_points(reader, "statecharts.route.duration")
    assert duration.count == 1


def test_a_failed_delivery_span_has_status_error_in_the_senders_trace(
    otel: tuple[InMemorySpanExporter, InMemoryMetricReader],
) -> None:
    exporter, _ = otel
    failing = {"ROUTE": "tests.routes.recording.Recorder", "TYPES": ["record"]}
    with override_settings(
        STATECHARTS=app_settings(ROUTES={"record": {**failing, "OPTIONS": {"fail": True}}})
    ):
        execution = stepper.start(load(ROUTED), now=T0)
        stepper.send(execution.pk, "go", now=T0, caller_context={"traceparent": TRACEPARENT})
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "statecharts.route"]
    assert in_trace(span, TRACEPARENT) and span.attributes["statecharts.outcome"] == "failed"
    assert span.status.status_code.name == "ERROR"


def test_a_child_start_span_joins_the_trace_of_the_parents_invoking_step(
    otel: tuple[InMemorySpanExporter, InMemoryMetricReader],
) -> None:
    exporter, reader = otel
    stepper.start(load(PARENT), now=T0, caller_context={"traceparent": TRACEPARENT})
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "statecharts.invocation"]
    assert in_trace(span, TRACEPARENT)
    assert span.attributes["statecharts.outcome"] == "started"
    assert span.attributes["statecharts.invoke_type"] == "scxml"
    (started,) = metric_points(reader, "statecharts.invocation.outcomes")
    assert started.attributes["statecharts.outcome"] == "started"
    assert started.attributes["statecharts.invoke_type"] == "scxml"


def test_nothing_is_built_when_nothing_listens(monkeypatch: pytest.MonkeyPatch) -> None:
    assert core.listeners == []  # no receiver, logging quiet, no bridge
    built: list[str] = []

    def spy(name: str, real: Any) -> Any:
        def called(*args: Any, **kwargs: Any) -> Any:
            built.append(name)
            return real(*args, **kwargs)

        return called

    for module, names in (
        (route_telemetry, ("Attempt", "_delivery", "_timer", "_session", "after_commit")),
        (invocation_telemetry, ("Began", "_emit", "_session_of")),
    ):
        for name in names:
            monkeypatch.setattr(module, name, spy(name, getattr(module, name)))
    monkeypatch.setattr(core, "emit", spy("emit", core.emit))

    execution = stepper.start(load(ROUTED), now=T0)
    stepper.send(execution.pk, "go", now=T0)
    stepper.send(execution.pk, "later", now=T0)
    assert firing.fire_all_due(now=T0 + 3 * S).outcomes == {"fired": 1}
    stepper.start(load(PAYMENT), now=T0)
    stepper.start(load(PARENT), now=T0)
    silent = stepper.start(load(SILENT), now=T0)
    stepper.send(silent.pk, "give_up", now=T0)

    from tests.routes.recording import Recorder as Route

    assert len(Route.deliveries) == 2
    assert Execution.objects.get(pk=silent.pk).configuration == ["abandoned"]
    assert built == []


def test_a_route_timer_keeps_its_caller_context_across_an_export_and_import() -> None:
    from statecharts.models import HistoryEntry
    from statecharts.operations.transfer import export_execution, import_execution

    execution = stepper.start(load(ROUTED), now=T0)
    stepper.send(execution.pk, "later", now=T0, caller_context={"traceparent": TRACEPARENT})
    document = export_execution(execution)
    (waiting,) = document["parts"]["route_timers"]
    assert waiting["context"] == {"traceparent": TRACEPARENT}
    redacted = export_execution(execution, redact=True)
    assert TRACEPARENT not in str(redacted["parts"]["route_timers"][0]["context"])
    # As if in another database: its rows deleted here, then imported.
    RouteTimer.objects.filter(execution=execution).delete()
    HistoryEntry.objects.filter(execution=execution).delete()
    Execution.objects.filter(pk=execution.pk).delete()
    imported = import_execution(document, now=T0)
    assert RouteTimer.objects.get(execution=imported).context == {"traceparent": TRACEPARENT}
