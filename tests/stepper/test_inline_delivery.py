"""Inline delivery is bounded (issue 28 item 7): the process that ran a step delivers at most
INLINE_DELIVERIES outbox messages after it (a ping-pong between two executions no longer
keeps the caller of the first send waiting while it runs), the rest are left to the sweeper,
and per (sender, target) order is kept: a later inline delivery never overtakes a deferred
one."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from statecharts import stepper
from statecharts.conf import statecharts_settings
from statecharts.core.position import decode
from statecharts.models import Chart, Execution, OutboxMessage
from statecharts.models.outbox import OutboxStatus

pytestmark = pytest.mark.django_db

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
RALLY = f"""<scxml {NS} initial="play">
  <datamodel><data id="hits" expr="0"/><data id="limit" expr="60"/></datamodel>
  <state id="play">
    <transition event="serve">
      <send event="ball" targetexpr="'#_scxml_' + _event.data">
        <param name="back" expr="_sessionid"/><param name="n" expr="1"/>
      </send>
    </transition>
    <transition event="ball" cond="_event.data.n &lt; limit">
      <assign location="hits" expr="hits + 1"/>
      <send event="ball" targetexpr="'#_scxml_' + _event.data.back">
        <param name="back" expr="_sessionid"/><param name="n" expr="_event.data.n + 1"/>
      </send>
    </transition>
    <transition event="ball"><assign location="hits" expr="hits + 1"/></transition>
  </state>
</scxml>"""
SENDER = f"""<scxml {NS} initial="s">
  <state id="s">
    <transition event="two">
      <send event="e1" targetexpr="'#_scxml_' + _event.data"/>
      <send event="e2" targetexpr="'#_scxml_' + _event.data"/>
    </transition>
    <transition event="one"><send event="e3" targetexpr="'#_scxml_' + _event.data"/></transition>
  </state>
</scxml>"""
RECEIVER = f"""<scxml {NS} initial="w">
  <datamodel><data id="got" expr="[]"/></datamodel>
  <state id="w">
    <transition event="*"><assign location="got" expr="got.concat([_event.name])"/></transition>
  </state>
</scxml>"""


def datamodel(execution: Execution) -> dict[str, Any]:
    execution.refresh_from_db()
    return decode(bytes(execution.position)).state.datamodel


def delivered() -> int:
    return OutboxMessage.objects.filter(status=OutboxStatus.DELIVERED).count()


def rally() -> tuple[Execution, Execution]:
    chart = Chart.objects.load(RALLY)
    return stepper.start(chart), stepper.start(chart)


def test_a_ping_pong_returns_to_its_caller_after_the_inline_bound() -> None:
    assert statecharts_settings.INLINE_DELIVERIES <= 20  # "a small bound" by default
    a, b = rally()
    stepper.send(a, "serve", b.session_id)
    assert delivered() == statecharts_settings.INLINE_DELIVERIES  # not the whole rally
    assert OutboxMessage.objects.filter(status=OutboxStatus.PENDING).count() == 1
    hits = datamodel(a)["hits"] + datamodel(b)["hits"]
    assert hits == statecharts_settings.INLINE_DELIVERIES
    stepper.deliver_pending()  # the sweeper plays the rest (OUTBOX_BATCH a run)
    assert datamodel(a)["hits"] + datamodel(b)["hits"] == 60
    assert delivered() == 60


@override_settings(STATECHARTS={"INLINE_DELIVERIES": 3})
def test_the_bound_is_the_setting() -> None:
    a, b = rally()
    stepper.send(a, "serve", b.session_id)
    assert delivered() == 3
    stepper.deliver_pending()
    assert delivered() == 60


@override_settings(STATECHARTS={"INLINE_DELIVERIES": 1})
def test_a_later_inline_delivery_never_overtakes_a_deferred_one() -> None:
    receiver = stepper.start(Chart.objects.load(RECEIVER))
    other = stepper.start(Chart.objects.load(RECEIVER))
    sender = stepper.start(Chart.objects.load(SENDER))
    stepper.send(sender, "two", receiver.session_id)  # e1 inline, e2 deferred (the bound)
    assert datamodel(receiver)["got"] == ["e1"]
    stepper.send(sender, "one", receiver.session_id)  # e3 must not go before e2
    assert datamodel(receiver)["got"] == ["e1"]
    stepper.send(sender, "one", other.session_id)  # another target: not held back
    assert datamodel(other)["got"] == ["e3"]
    stepper.deliver_pending()
    assert datamodel(receiver)["got"] == ["e1", "e2", "e3"]
    assert not OutboxMessage.objects.filter(status=OutboxStatus.PENDING).exists()


def test_a_bad_bound_is_refused_by_the_system_check() -> None:
    from statecharts.checks import check_settings

    for bad in (0, -1, "20", True):
        with override_settings(STATECHARTS={"INLINE_DELIVERIES": bad}):
            ids = [problem.id for problem in check_settings()]
        assert "statecharts.E003" in ids, bad
