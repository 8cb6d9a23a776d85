"""The scale-out invariant: each step writes only rows of its own execution.

Every durable transaction (a step: start, an event, a delivery, a timer fire, telling a sender
its message was undeliverable) is bracketed, and the rows it inserted, changed or deleted in
the project's tables are compared before and after: all of them must belong to one execution
(the execution row itself, its history, its outbox, its record of applied messages, its
timers). That is what makes the execution id a shard key (docs/architecture.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.test import override_settings

from statecharts import stepper
from statecharts.models import Chart, Execution
from timers.firing import fire_all_due

T0 = datetime(2031, 1, 1, tzinfo=UTC)

# The tables a step may write, and the column that says which execution owns a row.
OWNERS = {
    "statecharts_execution": "id",
    "statecharts_historyentry": "execution_id",
    "statecharts_outboxmessage": "sender_id",
    "statecharts_appliedmessage": "execution_id",
    "timers_timer": "execution_id",
}

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
PING = f"""<scxml {NS} initial="idle">
  <datamodel><data id="peer" expr="''"/></datamodel>
  <state id="idle">
    <transition event="go" target="waiting"><assign location="peer" expr="_event.data"/>
    </transition>
  </state>
  <state id="waiting">
    <onentry>
      <send event="ping" targetexpr="'#_scxml_' + peer"/>
      <send event="again" delay="1s" targetexpr="'#_scxml_' + peer"/>
      <send event="tick" delay="2s" id="tick"/>
      <send event="never" delay="3s" id="never"/>
    </onentry>
    <transition event="tick"><cancel sendid="never"/></transition>
    <transition event="error.communication" target="lost"/>
  </state>
  <final id="lost"/>
</scxml>"""
PONG = f"""<scxml {NS} initial="w">
  <datamodel><data id="n" expr="0"/></datamodel>
  <state id="w">
    <transition event="ping"><assign location="n" expr="n + 1"/>
      <send event="pong" targetexpr="_event.origin"/></transition>
    <transition event="again" target="end"/>
  </state>
  <final id="end"/>
</scxml>"""


def rows() -> dict[tuple[str, Any], tuple[Any, tuple[Any, ...]]]:
    """Every row of the owned tables: (table, id) -> (owner, the whole row)."""
    found: dict[tuple[str, Any], tuple[Any, tuple[Any, ...]]] = {}
    with connection.cursor() as cursor:
        for table, owner in OWNERS.items():
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            names = [column[0] for column in cursor.description]
            for row in cursor.fetchall():
                values = dict(zip(names, row, strict=True))
                found[(table, values["id"])] = (values[owner], tuple(map(repr, row)))
    return found


class Recorder:
    def __init__(self) -> None:
        self.transactions: list[set[Any]] = []  # the owners of the rows each one wrote

    @contextlib.contextmanager
    def watching(self, atomic: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
        before = rows()
        with atomic(*args, **kwargs) as inner:
            yield inner
        after = rows()
        changed = {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}
        owners = {(after.get(key) or before[key])[0] for key in changed}
        if owners:
            self.transactions.append(owners)


@pytest.mark.django_db(transaction=True)
def test_every_step_writes_only_rows_of_its_own_execution(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recorder = Recorder()
    real_atomic = transaction.atomic

    def atomic(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("durable"):  # a step (every step is one durable transaction)
            return recorder.watching(real_atomic, *args, **kwargs)
        return real_atomic(*args, **kwargs)

    monkeypatch.setattr(transaction, "atomic", atomic)
    with override_settings(STATECHARTS={"TIMER_FIRE_CHUNK": 1}):
        pong = stepper.start(Chart.objects.load(PONG), now=T0)
        ping = stepper.start(Chart.objects.load(PING), now=T0)
        lonely = stepper.start(Chart.objects.load(PING), now=T0)
        stepper.send(ping, "go", pong.session_id, now=T0)  # ping -> pong -> pong back
        for seconds in (1, 2, 3):  # "again" ends pong; "tick" cancels "never"
            fire_all_due(now=T0 + timedelta(seconds=seconds))
        stepper.send(lonely, "go", pong.session_id, now=T0)  # pong has finished
        stepper.deliver_pending()

    ping.refresh_from_db()
    lonely.refresh_from_db()
    assert Execution.objects.get(pk=pong.pk).status == "completed"
    assert lonely.configuration == ["lost"]  # told by error.communication, in its own step
    assert len(recorder.transactions) >= 10, recorder.transactions
    shared = [owners for owners in recorder.transactions if len(owners) != 1]
    assert shared == []


def test_the_recorder_sees_rows_of_two_executions(monkeypatch: pytest.MonkeyPatch) -> None:
    """(The check above could not pass by seeing nothing.)"""
    recorder = Recorder()
    snapshots = iter([{}, {("t", 1): (1, ()), ("t", 2): (2, ())}])
    monkeypatch.setattr(f"{__name__}.rows", lambda: next(snapshots))
    with recorder.watching(contextlib.nullcontext):
        pass
    assert recorder.transactions == [{1, 2}]
