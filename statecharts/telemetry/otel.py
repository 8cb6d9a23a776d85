"""The OpenTelemetry bridge: spans per step, metrics for steps, timers and the outbox.

Optional: it needs the ``opentelemetry`` extra (``opentelemetry-api``; the host project
chooses and configures the SDK and its exporters). Turn it on with
``STATECHARTS["OPENTELEMETRY"] = True`` (installed when the app is ready), or call
:func:`install` yourself (e.g. with your own providers).

It is one more listener of ``statecharts.core.telemetry`` (docs/telemetry.md), so it sees the
memory driver and the durable stepper alike, ``statecharts.driver`` telling them apart:

- **a span per step** (``statecharts.step``), made from the ``step`` event once the step is
  over, with the step's own start and end times: the durable stepper sends that event after
  its transaction commits, so **a span never spans two transactions** (nor one left open
  across a crash). Its parent is the caller's trace when the step's caller context carries a
  W3C ``traceparent`` (a dict ``{"traceparent": ...}``, as the API derives from a request),
  else the span current in this thread. The caller context itself is an attribute
  (``statecharts.caller_context``, as JSON). A refused input is a span with status ERROR.
- **metrics**: ``statecharts.step.duration`` (s), ``statecharts.lock.wait`` (s),
  ``statecharts.timer.lateness`` (s, per outcome), ``statecharts.timer.outcomes`` (per
  outcome), ``statecharts.outbox.outcomes`` and ``statecharts.outbox.lateness`` (s), and
  ``statecharts.executions`` (started / finished / halted, per status).
- **the apps' events** (``route.*``, ``route_timer.*``, ``invocation.*``: any family an app
  declares), handled alike, by their name ``<family>.<outcome>``: a counter
  ``statecharts.<family>.outcomes`` (per outcome), a histogram
  ``statecharts.<family>.lateness`` (s) when the event carries ``lateness_s`` and
  ``statecharts.<family>.duration`` (s) when it carries ``duration_s``. An event carrying
  ``duration_s`` stands for work done (a route's delivery, a child's start): it is also a span,
  ``statecharts.<family>``, with its own start and end times, whose parent is the trace of the
  caller context that caused the work (its ``traceparent``: for a delayed route send, the one
  recorded when the send was scheduled), else the span current in this thread; an event
  carrying ``error`` has status ERROR.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.trace import Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from statecharts.core import telemetry
from statecharts.core.telemetry import TelemetryEvent

INSTRUMENTATION = "statecharts"
SPAN_NAME = "statecharts.step"

# Step attributes copied onto the span, as statecharts.<name> (when not None).
_SPAN_ATTRIBUTES = (
    "driver",
    "session_id",
    "execution_id",
    "chart",
    "seq",
    "input_kind",
    "event_name",
    "disposition",
    "status",
    "effects",
    "lock_wait_s",
)
_EXECUTION_EVENTS = {
    TelemetryEvent.EXECUTION_STARTED: "started",
    TelemetryEvent.EXECUTION_FINISHED: "finished",
    TelemetryEvent.EXECUTION_HALTED: "halted",
}
_propagator = TraceContextTextMapPropagator()
# Attributes of an app event that become metric labels (bounded: a registered route's name,
# an invoke handler's type), as statecharts.<name>.
_APP_LABELS = ("route", "invoke_type")
_SCALARS = (str, int, float, bool)


@dataclass(frozen=True, slots=True)
class _Family:
    """The instruments of one app family of events."""

    outcomes: Any
    lateness: Any
    duration: Any


def _parent(caller_context: Any) -> Any:
    """The context of a caller context's W3C ``traceparent`` (None: the current span)."""
    if isinstance(caller_context, Mapping) and isinstance(caller_context.get("traceparent"), str):
        return _propagator.extract({"traceparent": caller_context["traceparent"]})
    return None


class Bridge:
    """The listener: make with the providers to use (None: the global ones)."""

    def __init__(self, tracer_provider: Any = None, meter_provider: Any = None) -> None:
        self.tracer = trace.get_tracer(INSTRUMENTATION, tracer_provider=tracer_provider)
        meter = metrics.get_meter(INSTRUMENTATION, meter_provider=meter_provider)
        self.step_duration = meter.create_histogram(
            "statecharts.step.duration", unit="s", description="How long one step took."
        )
        self.lock_wait = meter.create_histogram(
            "statecharts.lock.wait", unit="s", description="Waiting for an execution's lock."
        )
        self.timer_lateness = meter.create_histogram(
            "statecharts.timer.lateness",
            unit="s",
            description="How long after its due time a timer was handled.",
        )
        self.timer_outcomes = meter.create_counter(
            "statecharts.timer.outcomes", description="Timers scheduled, fired, snoozed, ..."
        )
        self.outbox_outcomes = meter.create_counter(
            "statecharts.outbox.outcomes", description="Outbox messages by outcome."
        )
        self.outbox_lateness = meter.create_histogram(
            "statecharts.outbox.lateness",
            unit="s",
            description="From writing an outbox message to its delivery.",
        )
        self.executions = meter.create_counter(
            "statecharts.executions", description="Executions started, finished, halted."
        )
        self.meter = meter
        self.families: dict[str, _Family] = {}

    def __call__(self, event: StrEnum, attributes: Mapping[str, Any]) -> None:
        driver = str(attributes.get("driver"))
        if not isinstance(event, TelemetryEvent):
            self._app_event(event, driver, attributes)
        elif event is TelemetryEvent.STEP:
            self._step(attributes)
        elif event in _EXECUTION_EVENTS:
            self.executions.add(
                1,
                {
                    "statecharts.driver": driver,
                    "statecharts.event": _EXECUTION_EVENTS[event],
                    "statecharts.status": str(attributes.get("status") or ""),
                },
            )
        elif event.value.startswith("timer."):
            outcome = event.value.removeprefix("timer.")
            labels = {"statecharts.driver": driver, "statecharts.outcome": outcome}
            self.timer_outcomes.add(int(attributes.get("count") or 1), labels)
            lateness = attributes.get("lateness_s")
            if lateness is not None and event is not TelemetryEvent.TIMER_SCHEDULED:
                self.timer_lateness.record(max(0.0, float(lateness)), labels)
            if attributes.get("lock_wait_s") is not None:
                self.lock_wait.record(float(attributes["lock_wait_s"]), labels)
        elif event.value.startswith("outbox."):
            outcome = event.value.removeprefix("outbox.")
            labels = {"statecharts.driver": driver, "statecharts.outcome": outcome}
            self.outbox_outcomes.add(1, labels)
            if attributes.get("lateness_s") is not None:
                self.outbox_lateness.record(max(0.0, float(attributes["lateness_s"])), labels)

    def _step(self, attributes: Mapping[str, Any]) -> None:
        duration = attributes.get("duration_s")
        now_ns = time.time_ns()
        started_ns = attributes.get("started_ns")
        if started_ns is None:
            started_ns = now_ns - int((duration or 0) * 1e9)
        ended_ns = started_ns + int(duration * 1e9) if duration is not None else now_ns
        span_attributes: dict[str, Any] = {
            f"statecharts.{name}": attributes[name]
            for name in _SPAN_ATTRIBUTES
            if attributes.get(name) is not None
        }
        caller_context = attributes.get("caller_context")
        parent = _parent(caller_context)
        if caller_context is not None:
            span_attributes["statecharts.caller_context"] = json.dumps(
                caller_context, default=str, sort_keys=True
            )
        counts = attributes.get("effect_counts") or {}
        for kind, n in counts.items():
            span_attributes[f"statecharts.effects.{kind}"] = n
        span = self.tracer.start_span(
            SPAN_NAME, context=parent, attributes=span_attributes, start_time=started_ns
        )
        if attributes.get("disposition") == "refused":
            span.set_status(Status(StatusCode.ERROR, "the input was refused"))
        span.end(end_time=ended_ns)
        labels = {
            "statecharts.driver": str(attributes.get("driver")),
            "statecharts.disposition": str(attributes.get("disposition")),
        }
        if duration is not None:
            self.step_duration.record(float(duration), labels)
        if attributes.get("lock_wait_s") is not None:
            self.lock_wait.record(float(attributes["lock_wait_s"]), labels)

    def _family(self, name: str) -> _Family:
        family = self.families.get(name)
        if family is None:
            family = self.families[name] = _Family(
                self.meter.create_counter(
                    f"statecharts.{name}.outcomes", description=f"{name} events by outcome."
                ),
                self.meter.create_histogram(
                    f"statecharts.{name}.lateness",
                    unit="s",
                    description=f"{name}: how long after it was due (or sent) it was handled.",
                ),
                self.meter.create_histogram(
                    f"statecharts.{name}.duration",
                    unit="s",
                    description=f"{name}: how long the work (a delivery, a start) took.",
                ),
            )
        return family

    def _app_event(self, event: StrEnum, driver: str, attributes: Mapping[str, Any]) -> None:
        """An app's event (module docstring): metrics by family and outcome, and a span when
        it stands for work done (it carries ``duration_s``)."""
        name, outcome = telemetry.family(event)
        family = self._family(name)
        labels = {"statecharts.driver": driver, "statecharts.outcome": outcome}
        for label in _APP_LABELS:
            if attributes.get(label) is not None:
                labels[f"statecharts.{label}"] = str(attributes[label])
        family.outcomes.add(int(attributes.get("count") or 1), labels)
        lateness = attributes.get("lateness_s")
        if lateness is not None:
            family.lateness.record(max(0.0, float(lateness)), labels)
        duration = attributes.get("duration_s")
        if duration is None:
            return
        family.duration.record(max(0.0, float(duration)), labels)
        started_ns = attributes.get("started_ns")
        if started_ns is None:
            started_ns = time.time_ns() - int(duration * 1e9)
        span_attributes: dict[str, Any] = {
            f"statecharts.{key}": value
            for key, value in attributes.items()
            if isinstance(value, _SCALARS) and key not in ("started_ns", "caller_context")
        }
        span_attributes["statecharts.event"] = event.value
        span_attributes["statecharts.outcome"] = outcome
        caller_context = attributes.get("caller_context")
        if caller_context is not None:
            span_attributes["statecharts.caller_context"] = json.dumps(
                caller_context, default=str, sort_keys=True
            )
        span = self.tracer.start_span(
            f"statecharts.{name}",
            context=_parent(caller_context),
            attributes=span_attributes,
            start_time=started_ns,
        )
        if attributes.get("error"):
            span.set_status(Status(StatusCode.ERROR, str(attributes["error"])[:200]))
        span.end(end_time=started_ns + int(duration * 1e9))


_installed: Bridge | None = None


def install(tracer_provider: Any = None, meter_provider: Any = None) -> Bridge:
    """Subscribe a :class:`Bridge` (replacing one installed before); returns it."""
    global _installed
    uninstall()
    _installed = Bridge(tracer_provider, meter_provider)
    telemetry.subscribe(_installed)
    return _installed


def uninstall() -> None:
    global _installed
    if _installed is not None:
        telemetry.unsubscribe(_installed)
        _installed = None
