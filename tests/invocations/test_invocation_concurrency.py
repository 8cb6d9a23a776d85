"""A parent and its child stepping at the same time, on PostgreSQL with real threads.

Lock order (docs/invocations.md): every transaction locks exactly one execution, the parent's
or the child's, never both; what crosses between them goes through the outbox and is applied
in the receiver's own step. So a parent sending to its child while the child sends to its
parent can never deadlock, and nothing is lost or applied twice.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection

from statecharts import stepper
from statecharts.core.position import decode
from statecharts.models import Chart, Execution

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]
NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
ROUNDS = 40

CHILD = f"""<scxml {NS} initial="w">
  <datamodel><data id="heard" expr="0"/></datamodel>
  <state id="w">
    <transition event="down"><assign location="heard" expr="heard + 1"/></transition>
    <transition event="poke"><send target="#_parent" event="up"/></transition>
  </state>
</scxml>"""
PARENT = f"""<scxml {NS} initial="p">
  <datamodel><data id="heard" expr="0"/></datamodel>
  <state id="p">
    <invoke id="kid" type="scxml"><content>{CHILD}</content></invoke>
    <transition event="push"><send target="#_kid" event="down"/></transition>
    <transition event="up"><assign location="heard" expr="heard + 1"/></transition>
  </state>
</scxml>"""


def heard(execution: Execution) -> Any:
    execution.refresh_from_db()
    return decode(bytes(execution.position)).state.datamodel["heard"]


def test_a_parent_and_its_child_sending_to_each_other_at_once_lose_nothing() -> None:
    parent = stepper.start(Chart.objects.load(PARENT))
    child = Execution.objects.get(parent=parent)
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def run(target: Execution, event: str) -> None:
        try:
            barrier.wait()
            for _ in range(ROUNDS):
                stepper.send(target, event)  # its step, then the delivery to the other
        except BaseException as exc:  # (reported below, not lost in the thread)
            errors.append(exc)
        finally:
            connection.close()

    threads = [
        threading.Thread(target=run, args=(parent, "push")),  # parent -> child
        threading.Thread(target=run, args=(child, "poke")),  # child -> parent
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "a sender is stuck"
    assert errors == []
    stepper.deliver_pending()  # anything a thread left (none expected: each delivers its own)
    assert heard(child) == ROUNDS
    assert heard(parent) == ROUNDS
    assert parent.history.filter(input__event__name="up").count() == ROUNDS
    assert child.history.filter(input__event__name="down").count() == ROUNDS
