"""Charts and a small world of executions shared by the retention, erasure and health tests."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from django.test import override_settings

from statecharts import stepper
from statecharts.models import Chart, Execution

T0 = datetime(2031, 5, 1, 12, 0, tzinfo=UTC)
NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
# What a person gave: searched for in every row after an erasure.
EMAIL = "ada.lovelace@example.com"

# A sign-up: a nudge timer carrying the e-mail, a message carrying it to a peer, donedata.
SIGNUP = f"""<scxml {NS} name="signup" initial="waiting">
  <datamodel><data id="email" expr="''"/></datamodel>
  <state id="waiting">
    <onentry><send id="nudge" event="nudge" delay="1d"><param name="email" expr="email"/></send>
    </onentry>
    <transition event="tell">
      <send event="hello" targetexpr="'#_scxml_' + _event.data.peer">
        <param name="email" expr="email"/></send>
    </transition>
    <transition event="stop"><cancel sendid="nudge"/></transition>
    <transition event="nudge" target="nudged"/>
    <transition event="signed_up" target="done"/>
  </state>
  <state id="nudged"><transition event="signed_up" target="done"/></state>
  <final id="done"><donedata><param name="email" expr="email"/></donedata></final>
</scxml>"""

PEER = f"""<scxml {NS} name="peer" initial="listening">
  <datamodel><data id="heard" expr="[]"/></datamodel>
  <state id="listening">
    <transition event="hello"><assign location="heard" expr="heard.concat([_event.data])"/>
    </transition>
    <transition event="stop" target="stopped"/>
  </state>
  <final id="stopped"/>
</scxml>"""


def signup(key: str | None = None, *, email: str = EMAIL) -> Execution:
    return stepper.start(
        Chart.objects.load(SIGNUP), data={"email": email}, business_key=key, now=T0
    )


def peer(session_id: str | None = None) -> Execution:
    return stepper.start(Chart.objects.load(PEER), session_id=session_id, now=T0)


@dataclass
class World:
    peer: Execution
    finished: Execution  # told the peer, signed up: completed at T0
    live: Execution  # active, its nudge cancelled (settled) at T0
    halted: Execution  # may still step
    holding_timer: Execution  # finished, but a timer of it is still pending
    holding_message: Execution  # finished, but a message of it is still pending


def world() -> World:
    """Executions of every kind, all with rows settled at T0 (the clock says T0 throughout)."""
    with override_settings(STATECHARTS={"CLOCK": lambda: T0}):
        return _world()


def _world() -> World:
    listener = peer()
    finished = signup("finished")
    stepper.send(finished, "tell", {"peer": listener.session_id}, now=T0)
    stepper.send(finished, "signed_up", now=T0)
    live = signup("live")
    stepper.send(live, "stop", now=T0)
    stepper.send(live, "tell", {"peer": listener.session_id}, now=T0)
    halted = signup("halted")
    stepper.send(halted, "stop", now=T0)
    Execution.objects.filter(pk=halted.pk).update(status="halted", failure_reason="budget")
    holding_timer = signup("holding timer")
    stepper.send(holding_timer, "signed_up", now=T0)
    holding_message = signup("holding message")
    stepper.send(holding_message, "tell", {"peer": listener.session_id}, now=T0)
    stepper.send(holding_message, "signed_up", now=T0)
    return World(listener, finished, live, halted, holding_timer, holding_message)
