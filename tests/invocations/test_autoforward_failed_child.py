"""Autoforward to a child that failed to start (issue 28, item 8): the event is not forwarded
and the parent is told nothing (SCXML 6.4 defines no error for it); the drop is recorded as an
``autoforward.dropped`` telemetry event, by both drivers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from invocations.models import Invocation, InvocationStatus
from statecharts import stepper, telemetry
from statecharts.core.telemetry import TelemetryEvent
from statecharts.drivers.memory import MemoryDriver
from statecharts.models import Chart, HistoryEntry, OutboxMessage

pytestmark = pytest.mark.django_db(transaction=True)

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
# The child cannot start: it names a stored chart that does not exist. The parent counts the
# errors it is told of; before the fix each event it took gave it an error.communication.
PARENT = f"""<scxml {NS} name="forwarding" initial="waiting">
  <datamodel><data id="execution" expr="0"/><data id="communication" expr="0"/>
    <data id="got" expr="0"/></datamodel>
  <state id="waiting">
    <invoke id="kid" type="scxml" src="chart:no-such-chart" autoforward="true"/>
    <transition event="error.execution"><assign location="execution" expr="execution + 1"/>
    </transition>
    <transition event="error.communication">
      <assign location="communication" expr="communication + 1"/></transition>
    <transition event="ping"><assign location="got" expr="got + 1"/></transition>
  </state>
</scxml>"""


@pytest.fixture
def dropped() -> Iterator[list[dict[str, Any]]]:
    seen: list[dict[str, Any]] = []

    def receive(sender: TelemetryEvent, **attributes: Any) -> None:
        seen.append(attributes)

    telemetry.autoforward_dropped.connect(receive, weak=False, dispatch_uid="tests.af")
    yield seen
    telemetry.autoforward_dropped.disconnect(dispatch_uid="tests.af")


def test_an_event_autoforwarded_to_a_child_that_failed_to_start_is_dropped_silently(
    dropped: list[dict[str, Any]],
) -> None:
    parent = stepper.start(Chart.objects.load(PARENT))
    assert Invocation.objects.get(parent=parent).status == InvocationStatus.FAILED
    for _ in range(2):
        stepper.send(parent, "ping")
    values = stepper_data(parent)
    assert values == {"execution": 1, "communication": 0, "got": 2}
    assert not OutboxMessage.objects.filter(sender=parent, kind="event").exists()
    assert [(d["invokeid"], d["event_name"], d["execution_id"]) for d in dropped] == [
        ("kid", "ping", parent.pk)
    ] * 2
    assert all(d["reason"] == "the invocation is failed" for d in dropped)
    assert HistoryEntry.objects.filter(execution=parent).count() == 4  # start, error, 2 pings


def stepper_data(execution: Any) -> dict[str, Any]:
    from statecharts.core.datamodel import plain
    from statecharts.core.position import decode

    execution.refresh_from_db()
    found = plain(decode(bytes(execution.position)).state.datamodel)
    return {k: found[k] for k in ("execution", "communication", "got")}


def test_the_memory_driver_drops_it_too_and_says_so(dropped: list[dict[str, Any]]) -> None:
    driver = MemoryDriver()
    session = driver.start(driver.load(PARENT))
    session.send("ping")
    assert session.datamodel == {"execution": 1, "communication": 0, "got": 1}
    assert [d["driver"] for d in dropped] == ["memory"]
    assert dropped[0]["invokeid"] == "kid" and dropped[0]["event_name"] == "ping"
