"""Telemetry (docs/telemetry.md): one contract across the memory driver and the durable
stepper (the driver's name on every event), the storage family for timers and the outbox,
Django signals and logging, and the OpenTelemetry bridge tested with OpenTelemetry's own
in-memory exporter and reader. The clock is injected; nothing waits."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from statecharts import stepper, telemetry
from statecharts.core import telemetry as core
from statecharts.core.events import Event
from statecharts.core.telemetry import TelemetryEvent
from statecharts.drivers.durable import Input
from statecharts.drivers.memory import MemoryDriver
from statecharts.exceptions import Halted
from statecharts.models import Chart
from statecharts.stepper.stepping import feed_step
from tests.telemetry.otel_harness import metric_points
from timers import firing

# Real commits: the durable stepper sends its events after its transaction commits (a
# test wrapped in one transaction would never see them).
pytestmark = pytest.mark.django_db(transaction=True)

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
T0 = datetime(2031, 3, 1, 9, 0, tzinfo=UTC)
DUE = T0 + timedelta(seconds=10)
S = timedelta(seconds=1)

CHART = f"""<scxml {NS} name="telemetry" initial="a">
  <state id="a">
    <transition event="go" target="b"><log label="going" expr="1"/></transition>
  </state>
  <state id="b"><transition event="stop" target="done"/></state>
  <final id="done"/>
</scxml>"""

TIMED = f"""<scxml {NS} name="timed" initial="a">
  <state id="a">
    <onentry><send id="nudge" event="nudge" delay="10s"/></onentry>
    <transition event="nudge" target="b"/>
    <transition event="drop"><cancel sendid="nudge"/></transition>
    <transition event="spin" target="x"/>
  </state>
  <state id="b"/>
  <state id="x"><transition target="y"/></state>
  <state id="y"><transition target="x"/></state>
</scxml>"""

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


class Recorder:
    """Receives every telemetry signal; ``in_transaction`` notes where each arrived."""

    def __init__(self) -> None:
        self.events: list[tuple[TelemetryEvent, dict[str, Any]]] = []
        self.in_transaction: list[bool] = []

    def __call__(self, sender: TelemetryEvent, **attributes: Any) -> None:
        attributes.pop("signal", None)
        self.events.append((sender, attributes))
        self.in_transaction.append(connection.in_atomic_block)

    def names(self, prefix: str = "") -> list[str]:
        return [e.value for e, _ in self.events if e.value.startswith(prefix)]

    def of(self, event: TelemetryEvent) -> list[dict[str, Any]]:
        return [a for e, a in self.events if e is event]


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    recording = Recorder()
    for signal in telemetry.SIGNALS.values():
        signal.connect(recording, weak=False, dispatch_uid="tests.telemetry")
    yield recording
    for signal in telemetry.SIGNALS.values():
        signal.disconnect(dispatch_uid="tests.telemetry")


def start(source: str, **kwargs: Any) -> Any:
    return stepper.start(Chart.objects.load(source), now=T0, **kwargs)


# ---- one contract, two drivers -----------------------------------------------------------------

# A self-send (consumed inside the step: never reported), a timer scheduled and cancelled, a
# log, the end.
BUSY = f"""<scxml {NS} name="busy" initial="a">
  <state id="a">
    <onentry>
      <send event="ping"/>
      <send id="t" event="later" delay="5s"/>
    </onentry>
    <transition event="ping" target="done">
      <cancel sendid="t"/><log label="p" expr="1"/>
    </transition>
  </state>
  <final id="done"/>
</scxml>"""


def test_both_drivers_report_a_busy_chart_alike(recorder: Recorder) -> None:
    MemoryDriver().start(BUSY)
    in_memory = list(recorder.events)
    recorder.events.clear()
    start(BUSY)
    durable = [(e, a) for e, a in recorder.events if not e.value.startswith(("timer.", "outbox."))]

    def shape(events: list[tuple[TelemetryEvent, dict[str, Any]]]) -> list[tuple[str, Any]]:
        return [(e.value, a.get("effect") or a.get("input_kind")) for e, a in events]

    def without_steps(events: list[tuple[TelemetryEvent, dict[str, Any]]]) -> list[Any]:
        return [item for item in shape(events) if item[0] != "step"]

    # The one difference: the memory driver takes a self-send as a step of its own; the
    # durable stepper drains it inside the step that sent it (docs/telemetry.md).
    assert without_steps(in_memory) == without_steps(durable)
    assert [a["input_kind"] for e, a in in_memory if e is TelemetryEvent.STEP] == [
        "start",
        "event",
    ]
    assert [a["input_kind"] for e, a in durable if e is TelemetryEvent.STEP] == ["start"]
    assert ("effect.performed", "send_delayed") in shape(durable)
    assert ("effect.performed", "cancel") in shape(durable)
    assert ("effect.performed", "send") not in shape(durable)  # the self-send


def test_memory_and_durable_drivers_emit_the_same_events_with_their_driver_name(
    recorder: Recorder,
) -> None:
    session = MemoryDriver().start(CHART)
    session.send("go")
    session.send("stop")
    in_memory = [(e, a) for e, a in recorder.events]
    recorder.events.clear()

    execution = start(CHART)
    stepper.send(execution.pk, "go", now=T0)
    stepper.send(execution.pk, "stop", now=T0)
    durable = list(recorder.events)

    def shape(events: list[tuple[TelemetryEvent, dict[str, Any]]]) -> list[tuple[str, Any]]:
        return [(e.value, a.get("input_kind") or a.get("effect")) for e, a in events]

    assert (
        shape(in_memory)
        == shape(durable)
        == [
            ("execution.started", None),
            ("step", "start"),
            ("effect.performed", "log"),
            ("step", "event"),
            ("effect.performed", "done"),
            ("step", "event"),
            ("execution.finished", None),
        ]
    )
    assert {a["driver"] for _, a in in_memory} == {"memory"}
    assert {a["driver"] for _, a in durable} == {"durable"}
    memory_steps = [a for e, a in in_memory if e is TelemetryEvent.STEP]
    durable_steps = [a for e, a in durable if e is TelemetryEvent.STEP]
    for mine, theirs in zip(memory_steps, durable_steps, strict=True):
        for key in (
            "input_kind",
            "event_name",
            "disposition",
            "effects",
            "effect_counts",
            "status",
        ):
            assert mine[key] == theirs[key], key
        assert mine["duration_s"] >= 0 and theirs["duration_s"] >= 0
        assert theirs["session_id"] == execution.session_id and theirs["chart"] == "telemetry"
    assert durable_steps[1]["effect_counts"]["log"] == 1
    assert [a["status"] for a in durable_steps] == ["active", "active", "completed"]
    finished = recorder.of(TelemetryEvent.EXECUTION_FINISHED)
    assert finished[0]["status"] == "completed" and finished[0]["outcome"] == "final"


def test_durable_events_arrive_after_the_commit_never_inside_the_step(recorder: Recorder) -> None:
    execution = start(CHART)
    stepper.send(execution.pk, "go", now=T0)
    assert recorder.events and not any(recorder.in_transaction)
    step = recorder.of(TelemetryEvent.STEP)[-1]
    assert step["execution_id"] == execution.pk and step["seq"] == 2
    assert step["lock_wait_s"] is not None and step["lock_wait_s"] >= 0


def test_a_halted_step_is_a_refused_step_and_an_execution_halted_event(recorder: Recorder) -> None:
    with override_settings(STATECHARTS={"ROUND_BUDGET": 50}):
        execution = start(TIMED)
        with pytest.raises(Halted):
            stepper.send(execution.pk, "spin", now=T0)
    step = recorder.of(TelemetryEvent.STEP)[-1]
    assert (step["disposition"], step["status"], step["event_name"]) == (
        "refused",
        "halted",
        "spin",
    )
    (halted,) = recorder.of(TelemetryEvent.EXECUTION_HALTED)
    assert halted["budget"]["budget"] == "rounds" and halted["driver"] == "durable"


def test_the_caller_context_rides_on_the_step_event(recorder: Recorder) -> None:
    execution = start(CHART)
    stepper.send(execution.pk, "go", now=T0, caller_context={"request_id": "r-1"})
    assert recorder.of(TelemetryEvent.STEP)[-1]["caller_context"] == {"request_id": "r-1"}


# ---- the storage family -------------------------------------------------------------------------


def test_timer_events_scheduled_fired_with_lateness_cancelled_discarded(recorder: Recorder) -> None:
    fired = start(TIMED)
    cancelled = start(TIMED)
    stepper.send(cancelled.pk, "drop", now=T0)
    finished = start(TIMED)
    stepper.cancel(finished.pk, now=T0)
    firing.fire_all_due(now=DUE + 3 * S)
    assert len(recorder.of(TelemetryEvent.TIMER_SCHEDULED)) == 3
    (scheduled, *_) = recorder.of(TelemetryEvent.TIMER_SCHEDULED)
    assert scheduled["timer_id"] is not None and scheduled["delay_ms"] == 10_000
    (fire,) = recorder.of(TelemetryEvent.TIMER_FIRED)
    assert fire["execution_id"] == fired.pk and fire["session_id"] == fired.session_id
    assert fire["lateness_s"] == 3.0 and fire["lock_wait_s"] >= 0
    (cancel,) = recorder.of(TelemetryEvent.TIMER_CANCELLED)
    assert (cancel["execution_id"], cancel["count"], cancel["send_id"]) == (
        cancelled.pk,
        1,
        "nudge",
    )
    (discard,) = recorder.of(TelemetryEvent.TIMER_DISCARDED)
    assert discard["execution_id"] == finished.pk and "cancelled" in discard["reason"]
    assert {a["driver"] for _, a in recorder.events} == {"durable"}


def test_timer_events_snoozed_retried_and_failed(recorder: Recorder) -> None:
    settings = {
        "TIMER_DELIVERIES": {"default": "tests.timers.deliveries.AnswerDelivery"},
        "TIMER_MAX_ATTEMPTS": 2,
        "TIMER_RETRY_SECONDS": 1,
    }
    from tests.timers import deliveries

    with override_settings(STATECHARTS=settings):
        start(TIMED)
        deliveries.answer.update(value="not an answer", perform=False)
        try:
            assert firing.fire_all_due(now=DUE).outcomes == {"retrying": 1}
            assert firing.fire_all_due(now=DUE + 5 * S).outcomes == {"failed": 1}
        finally:
            deliveries.answer.update(value=None, perform=False)
        start(TIMED)
    with override_settings(STATECHARTS={"TIMER_DELIVERIES": {}}):
        assert firing.fire_all_due(now=DUE).outcomes == {"snoozed": 1}
    (retried,) = recorder.of(TelemetryEvent.TIMER_RETRIED)
    assert retried["attempts"] == 1 and "InvalidAnswer" in retried["error"]
    (failed,) = recorder.of(TelemetryEvent.TIMER_FAILED)
    # (lateness from the due time the row had: the retry moved it 1 s later)
    assert failed["attempts"] == 2 and failed["lateness_s"] == 4.0
    (snoozed,) = recorder.of(TelemetryEvent.TIMER_SNOOZED)
    assert "not in TIMER_DELIVERIES" in snoozed["reason"] and snoozed["seconds"] == 300


def test_outbox_events_delivered_and_undeliverable(recorder: Recorder) -> None:
    sender_chart = f"""<scxml {NS} name="sender" initial="a">
      <state id="a">
        <transition event="tell"><send event="hello" targetexpr="'#_scxml_' + _event.data.to"/>
        </transition>
      </state>
    </scxml>"""
    start(CHART, session_id="peer")
    gone = start(CHART, session_id="gone")
    sender = start(sender_chart)
    stepper.send(sender.pk, "tell", {"to": "peer"}, now=T0)
    outbox: list[int] = []  # written, not delivered yet: its target is cancelled meanwhile
    feed_step(sender.pk, Input.external(Event("tell", data={"to": "gone"})), T0, outbox)
    stepper.cancel(gone.pk, now=T0)
    stepper.deliver(outbox)
    (delivered,) = recorder.of(TelemetryEvent.OUTBOX_DELIVERED)
    assert delivered["sender_id"] == sender.pk and delivered["target_session_id"] == "peer"
    assert delivered["event_name"] == "hello" and delivered["lateness_s"] is not None
    (lost,) = recorder.of(TelemetryEvent.OUTBOX_UNDELIVERABLE)
    assert lost["sender_id"] == sender.pk and lost["reason"] == "session 'gone' is cancelled"
    assert lost["session_id"] == sender.session_id


# ---- signals, logging, and nothing listening ----------------------------------------------------


def test_nothing_is_subscribed_when_no_signal_has_a_receiver_and_logging_is_quiet() -> None:
    assert telemetry.bridge not in core.listeners
    recording = Recorder()
    telemetry.step.connect(recording, weak=False)
    try:
        assert telemetry.bridge in core.listeners
    finally:
        telemetry.step.disconnect(recording)
    assert telemetry.bridge not in core.listeners


def test_log_records_at_debug_carry_the_attributes(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("statecharts.telemetry")
    with caplog.at_level(logging.DEBUG, logger="statecharts.telemetry"):
        telemetry.install()  # (reads whether DEBUG records are wanted)
        try:
            MemoryDriver().start(CHART).send("go")
        finally:
            logger.setLevel(logging.NOTSET)
            caplog.handler.setLevel(logging.NOTSET)
    telemetry.install()
    records = [r for r in caplog.records if r.name == "statecharts.telemetry"]
    steps = [r.telemetry for r in records if r.telemetry["telemetry_event"] == "step"]  # type: ignore[attr-defined]
    assert [s["input_kind"] for s in steps] == ["start", "event"]
    assert steps[0]["driver"] == "memory"
    assert telemetry.bridge not in core.listeners


def test_a_failing_receiver_is_logged_and_never_reaches_the_step(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(sender: Any, **attributes: Any) -> None:
        raise RuntimeError("receiver bug")

    telemetry.step.connect(broken, weak=False)
    try:
        execution = start(CHART)
        stepper.send(execution.pk, "go", now=T0)
    finally:
        telemetry.step.disconnect(broken)
    execution.refresh_from_db()
    assert execution.steps == 2
    assert any("receiver bug" in r.getMessage() for r in caplog.records)


# ---- the OpenTelemetry bridge -------------------------------------------------------------------


def test_the_bridge_makes_one_span_per_step_under_the_callers_trace(
    otel: tuple[InMemorySpanExporter, InMemoryMetricReader],
) -> None:
    exporter, reader = otel
    execution = start(CHART)
    stepper.send(execution.pk, "go", now=T0, caller_context={"traceparent": TRACEPARENT})
    MemoryDriver().start(CHART)
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == ["statecharts.step"] * 3
    durable_start, durable_go, memory_start = spans
    assert durable_go.attributes["statecharts.driver"] == "durable"
    assert durable_go.attributes["statecharts.event_name"] == "go"
    assert durable_go.attributes["statecharts.execution_id"] == execution.pk
    assert durable_go.attributes["statecharts.effects.log"] == 1
    assert TRACEPARENT in durable_go.attributes["statecharts.caller_context"]
    # Its parent is the caller's span, from the traceparent; the start had no caller.
    assert durable_go.parent is not None
    assert format(durable_go.context.trace_id, "032x") == TRACEPARENT.split("-")[1]
    assert format(durable_go.parent.span_id, "016x") == TRACEPARENT.split("-")[2]
    assert durable_start.parent is None
    assert memory_start.attributes["statecharts.driver"] == "memory"
    assert all(s.end_time >= s.start_time for s in spans)
    durations = metric_points(reader, "statecharts.step.duration")
    assert sum(p.count for p in durations) == 3


def test_the_bridge_records_timer_lateness_and_outcomes(
    otel: tuple[InMemorySpanExporter, InMemoryMetricReader],
) -> None:
    _, reader = otel
    start(TIMED)
    start(TIMED)
    firing.fire_all_due(now=DUE + 2 * S)
    outcomes = {
        p.attributes["statecharts.outcome"]: p.value
        for p in metric_points(reader, "statecharts.timer.outcomes")
    }
    assert outcomes == {"scheduled": 2, "fired": 2}
    (lateness,) = metric_points(reader, "statecharts.timer.lateness")
    assert lateness.attributes["statecharts.outcome"] == "fired"
    assert (lateness.count, lateness.sum) == (2, 4.0)
