"""The test helpers a host project gets (statecharts.testing): a clock it controls, and the
workbench that runs due work on it, with no django-q2 cluster and no waiting."""

from __future__ import annotations

from datetime import timedelta

import pytest

from statecharts.testing import StatechartsTestMixin, TestClock, Workbench

pytestmark = pytest.mark.django_db

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
ONBOARDING = f"""<scxml {NS} name="onboarding">
  <state id="waiting">
    <onentry><send id="nudge" event="nudge" delay="3d"/></onentry>
    <transition event="signed_up" target="done"/>
    <transition event="nudge" target="nudged"/>
  </state>
  <state id="nudged">
    <onentry><send id="again" event="nudge_again" delay="1d"/></onentry>
    <transition event="nudge_again" target="given_up"/>
    <transition event="signed_up" target="done"/>
  </state>
  <state id="given_up"/>
  <final id="done"/>
</scxml>"""


def test_a_three_day_timer_fires_when_the_clock_gets_there(statecharts: Workbench) -> None:
    signup = statecharts.start(ONBOARDING)
    statecharts.assert_in_state(signup, "waiting")
    (timer,) = statecharts.pending_timers(signup)
    assert timer.due == statecharts.now + timedelta(days=3)

    statecharts.advance(days=2, hours=23)
    statecharts.assert_in_state(signup, "waiting")  # not yet
    statecharts.advance(hours=1)
    statecharts.assert_in_state(signup, "nudged")
    statecharts.send(signup, "signed_up", {"email": "ada@example.com"})
    assert statecharts.refresh(signup).status == "completed"
    statecharts.assert_history(signup, "nudge", "signed_up")


def test_advancing_past_several_due_times_fires_each_at_its_time(statecharts: Workbench) -> None:
    start = statecharts.now
    signup = statecharts.start(ONBOARDING)
    statecharts.advance(days=10)  # the 3-day nudge, then the 1-day nudge it schedules
    statecharts.assert_in_state(signup, "given_up")
    fired = list(signup.history.filter(input__kind="event").order_by("seq"))
    assert [entry.created - start for entry in fired] == [timedelta(days=3), timedelta(days=4)]
    assert statecharts.now == start + timedelta(days=10)


def test_invoke_handlers_and_children_run_inline(statecharts: Workbench) -> None:
    chart = f"""<scxml {NS} initial="w">
      <datamodel><data id="r" expr="null"/></datamodel>
      <state id="w">
        <invoke id="t" type="task" src="double"><param name="amount" expr="4"/></invoke>
        <transition event="done.invoke.t" target="k"><assign location="r" expr="_event.data"/>
        </transition>
      </state>
      <state id="k">
        <invoke id="c" type="scxml"><content><scxml {NS}><final id="f"/></scxml></content>
        </invoke>
        <transition event="done.invoke.c" target="end"/>
      </state>
      <final id="end"/>
    </scxml>"""
    execution = statecharts.start(chart)  # (the test settings register the task "double")
    assert statecharts.refresh(execution).status == "completed"
    assert statecharts.datamodel(execution)["r"] == {"doubled": 8}


def test_assertions_say_what_they_saw(statecharts: Workbench) -> None:
    signup = statecharts.start(ONBOARDING)
    with pytest.raises(AssertionError, match="active states are \\['waiting'\\]"):
        statecharts.assert_in_state(signup, "done")
    with pytest.raises(AssertionError, match="events applied: \\[\\]"):
        statecharts.assert_history(signup, "nudge")


def test_the_clock_only_moves_forward() -> None:
    clock = TestClock()
    with pytest.raises(ValueError, match="does not go back"):
        clock.set(clock.now - timedelta(seconds=1))


def test_the_mixin_gives_a_django_test_case_a_workbench() -> None:
    import unittest

    class Case(StatechartsTestMixin, unittest.TestCase):
        def runTest(self) -> None:
            signup = self.statecharts.start(ONBOARDING)
            self.statecharts.advance(days=3)
            self.statecharts.assert_in_state(signup, "nudged")

    result = unittest.TestResult()
    Case().run(result)
    assert result.errors == [] and result.failures == [], result.errors + result.failures
