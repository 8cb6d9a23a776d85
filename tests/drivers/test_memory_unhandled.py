"""The memory driver notes the external events no transition took (``MemorySession.unhandled``),
as the durable stepper records them (``StepResult.handled``): on a direct send, on queued
events, and with a telemetry listener (the timed path) alike."""

from __future__ import annotations

from typing import Any

from statecharts.core import telemetry
from statecharts.drivers.memory import MemoryDriver

LIGHT = b"""<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" initial="off">
  <state id="off"><transition event="flip" target="on"/></state>
  <state id="on"><transition event="flip" target="off"/></state>
</scxml>"""


def test_a_sent_event_no_transition_takes_is_noted_and_consumed() -> None:
    driver = MemoryDriver()
    session = driver.start(driver.load(LIGHT))
    session.send("flip").send("bogus").send("flip").send("bogus.too")
    assert session.unhandled == ["bogus", "bogus.too"]
    assert session.configuration == {"off"}  # consumed: nothing changed


def test_queued_events_and_the_timed_path_note_them_too() -> None:
    driver = MemoryDriver()
    session = driver.start(driver.load(LIGHT))
    session.enqueue("nothing").enqueue("flip")
    driver.run_until_idle()
    assert session.unhandled == ["nothing"] and session.configuration == {"on"}

    def listen(event: Any, attributes: Any) -> None:
        pass

    telemetry.subscribe(listen)
    try:
        session.send("still.nothing")
    finally:
        telemetry.unsubscribe(listen)
    assert session.unhandled == ["nothing", "still.nothing"]
