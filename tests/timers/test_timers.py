"""Durable timers: rows written in the step's transaction, two keys, fire-time liveness."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import override_settings

from statecharts import stepper
from statecharts.core.effects import Effect
from statecharts.core.plan import Instruction, plan_one
from statecharts.core.position import decode
from statecharts.models import Chart, Execution, OutboxMessage
from statecharts.stepper import StepContext
from tests.timers.plans import query_plan
from timers import firing
from timers.models import Timer
from timers.pruning import prune

pytestmark = pytest.mark.django_db

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0"'
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
DAY = timedelta(days=1)

NUDGE = f"""<scxml {NS} datamodel="ecmascript" initial="waiting">
  <datamodel><data id="nudges" expr="0"/></datamodel>
  <state id="waiting">
    <onentry><send id="nudge" event="nudge" delay="3d"><param name="n" expr="7"/></send></onentry>
    <transition event="nudge" target="nudged">
      <assign location="nudges" expr="nudges + _event.data.n"/>
    </transition>
    <transition event="signed_up" target="done"/>
    <transition event="stop"><cancel sendid="nudge"/></transition>
  </state>
  <state id="nudged"><transition event="signed_up" target="done"/></state>
  <final id="done"/>
</scxml>"""

FOREACH = f"""<scxml {NS} datamodel="ecmascript" initial="s">
  <datamodel><data id="items" expr="[1, 2, 3]"/><data id="got" expr="[]"/></datamodel>
  <state id="s">
    <onentry>
      <foreach array="items" item="i">
        <send id="tick" event="tick" delayexpr="i + 's'"><param name="i" expr="i"/></send>
      </foreach>
    </onentry>
    <transition event="tick"><assign location="got" expr="got.concat([_event.data.i])"/>
    </transition>
    <transition event="stop"><cancel sendid="tick"/></transition>
    <transition event="again" target="s"/>
  </state>
</scxml>"""

INTERNAL = f"""<scxml {NS} datamodel="ecmascript" initial="s">
  <state id="s">
    <onentry><send event="later" target="#_internal" delay="1s"/></onentry>
    <transition event="later" cond="_event.type == 'internal'" target="ok"/>
    <transition event="later" target="wrong"/>
  </state>
  <final id="ok"/><final id="wrong"/>
</scxml>"""

PONG = f"""<scxml {NS} datamodel="ecmascript" initial="w">
  <datamodel><data id="pings" expr="0"/></datamodel>
  <state id="w"><transition event="ping"><assign location="pings" expr="pings + 1"/></transition>
  </state>
</scxml>"""

DELAYED_PING = f"""<scxml {NS} datamodel="ecmascript" initial="s">
  <datamodel><data id="peer" expr="''"/></datamodel>
  <state id="s">
    <transition event="go">
      <assign location="peer" expr="_event.data"/>
      <send event="ping" targetexpr="'#_scxml_' + peer" delay="1m"/>
    </transition>
  </state>
</scxml>"""


def start(source: str, **kwargs: Any) -> Execution:
    return stepper.start(Chart.objects.load(source), now=T0, **kwargs)


def datamodel(execution: Execution) -> dict[str, Any]:
    execution.refresh_from_db()
    return decode(bytes(execution.position)).state.datamodel


def fire_all(at: datetime) -> firing.FireReport:
    return firing.fire_all_due(now=at)


# ---- scheduling -------------------------------------------------------------------------------


def test_a_delayed_send_writes_one_timer_row_in_the_step() -> None:
    execution = start(NUDGE, caller_context={"request": "r-1"})
    (timer,) = Timer.objects.for_execution(execution)
    assert timer.status == "pending"
    assert timer.send_id == "nudge" and timer.ordinal == 1
    assert timer.due == T0 + 3 * DAY  # absolute, from the step's clock
    assert timer.event["name"] == "nudge" and timer.event["data"] == {"n": 7}
    assert timer.event["sendid"] == "nudge"  # the author wrote the id
    assert timer.event["origin"] == f"#_scxml_{execution.session_id}"
    assert timer.target == {"kind": "self", "session_id": execution.session_id}
    assert (timer.macrostep, timer.owner) == (1, "onentry:waiting:0")
    assert timer.context == {"request": "r-1"}
    assert list(Timer.objects.pending()) == [timer]


def test_no_timer_exists_for_a_step_that_rolled_back() -> None:
    def broken(context: StepContext, instruction: Instruction) -> None:
        raise RuntimeError("boom")

    chart = Chart.objects.load(NUDGE)
    with (
        override_settings(STATECHARTS={"PERFORMERS": {"finish": broken}}),
        pytest.raises(RuntimeError),
    ):
        execution = stepper.start(chart, now=T0)
        stepper.send(execution.pk, "signed_up", now=T0)  # done -> broken handler -> rollback
    execution = Execution.objects.get()
    assert Timer.objects.for_execution(execution).count() == 1  # the start's, committed
    assert execution.configuration == ["waiting"]


def test_the_same_timer_inserted_twice_is_a_no_op_even_after_it_fired() -> None:
    execution = start(NUDGE)
    fire_all(T0 + 3 * DAY)
    (timer,) = Timer.objects.all()
    assert timer.status == "fired"
    # Replaying the start step's effect (at-least-once redelivery) adds nothing.
    from timers.scheduling import schedule

    effect = Effect(
        "send_delayed",
        {
            "send_id": "nudge",
            "ordinal": 1,
            "event": timer.event,
            "target": timer.target,
            "delay_ms": 1000,
            "content_index": None,
            "owner": "x",
        },
        1,
        0,
        0,
    )
    state = decode(bytes(execution.position)).state
    schedule(StepContext(execution, state, T0, 1), plan_one(effect))
    assert Timer.objects.count() == 1
    assert Timer.objects.get().status == "fired"


def test_foreach_schedules_distinct_rows_and_one_cancel_cancels_them_all() -> None:
    execution = start(FOREACH)
    timers = list(Timer.objects.for_execution(execution).order_by("ordinal"))
    assert [t.send_id for t in timers] == ["tick"] * 3
    assert [t.ordinal for t in timers] == [1, 2, 3]
    assert [t.due - T0 for t in timers] == [timedelta(seconds=s) for s in (1, 2, 3)]
    other = start(FOREACH)  # another execution's rows under the same id
    stepper.send(execution.pk, "stop", now=T0)
    assert set(Timer.objects.for_execution(execution).values_list("status", flat=True)) == {
        "cancelled"
    }
    assert set(Timer.objects.for_execution(other).values_list("status", flat=True)) == {"pending"}
    assert fire_all(T0 + DAY).fired == 3  # only the other execution's
    assert datamodel(execution)["got"] == []
    assert datamodel(other)["got"] == [1, 2, 3]


def test_a_cancel_that_matches_nothing_is_a_no_op() -> None:
    execution = start(NUDGE)
    fire_all(T0 + 3 * DAY)  # fired and moved to "nudged"; nothing pending
    stepper.send(execution.pk, "stop", now=T0 + 3 * DAY)  # no transition in "nudged"
    assert Timer.objects.get().status == "fired"


# ---- firing -----------------------------------------------------------------------------------


def test_a_timer_fires_only_when_due_and_exactly_once() -> None:
    execution = start(NUDGE)
    assert fire_all(T0 + 3 * DAY - timedelta(seconds=1)).outcomes == {}
    report = fire_all(T0 + 3 * DAY)
    assert report.outcomes == {"fired": 1}
    execution.refresh_from_db()
    assert execution.configuration == ["nudged"]
    assert datamodel(execution)["nudges"] == 7
    assert fire_all(T0 + 30 * DAY).outcomes == {}
    timer = Timer.objects.get()
    assert (timer.status, timer.settled) == ("fired", T0 + 3 * DAY)
    entry = execution.history.get(seq=2)
    assert entry.input["event"]["name"] == "nudge"


def test_an_overdue_timer_fires_late_and_is_never_dropped() -> None:
    execution = start(NUDGE)
    assert fire_all(T0 + 365 * DAY).fired == 1
    execution.refresh_from_db()
    assert execution.configuration == ["nudged"]


def test_a_cancelled_timer_never_fires() -> None:
    execution = start(NUDGE)
    stepper.send(execution.pk, "stop", now=T0 + DAY)
    assert fire_all(T0 + 10 * DAY).outcomes == {}
    execution.refresh_from_db()
    assert execution.configuration == ["waiting"]
    timer = Timer.objects.get()
    assert timer.status == "cancelled" and "cancel" in timer.reason


def test_a_finished_executions_timers_are_discarded_in_the_finishing_step() -> None:
    execution = start(NUDGE)
    stepper.send(execution.pk, "signed_up", now=T0 + DAY)
    timer = Timer.objects.get()
    assert (timer.status, timer.settled) == ("discarded", T0 + DAY)
    assert timer.reason == "execution completed before the timer was due"
    assert fire_all(T0 + 3 * DAY).outcomes == {}
    execution.refresh_from_db()
    assert execution.steps == 2  # nothing was delivered


def test_fire_time_liveness_discards_a_timer_of_an_execution_that_is_no_longer_active() -> None:
    execution = start(NUDGE)
    # Finished behind the stepper's back (no step, no signal): firing still checks.
    Execution.objects.filter(pk=execution.pk).update(status="failed")
    assert fire_all(T0 + 3 * DAY).outcomes == {"discarded": 1}
    timer = Timer.objects.get()
    assert timer.status == "discarded" and "failed" in timer.reason
    execution.refresh_from_db()
    assert execution.steps == 1  # nothing was delivered


def test_a_missing_executions_timer_is_discarded() -> None:
    execution = start(NUDGE)
    execution.delete()
    assert fire_all(T0 + 3 * DAY).outcomes == {"discarded": 1}
    assert Timer.objects.get().reason == "execution missing"


def test_an_execution_that_needs_migration_snoozes_its_timer_without_spending_attempts() -> None:
    execution = start(NUDGE)
    Execution.objects.filter(pk=execution.pk).update(status="needs_migration")
    with override_settings(STATECHARTS={"TIMER_SNOOZE_SECONDS": 60}):
        assert fire_all(T0 + 3 * DAY).outcomes == {"snoozed": 1}
    timer = Timer.objects.get()
    assert (timer.status, timer.attempts) == ("pending", 0)
    assert timer.due == T0 + 3 * DAY + timedelta(seconds=60)


def test_an_undecodable_row_is_discarded_without_retries() -> None:
    start(NUDGE)
    Timer.objects.update(target={"kind": "teleport"})
    assert fire_all(T0 + 3 * DAY).outcomes == {"discarded": 1}
    timer = Timer.objects.get()
    assert timer.reason.startswith("undecodable") and timer.attempts == 0


def test_a_delivery_that_raises_is_retried_with_backoff_then_failed() -> None:
    def broken(context: StepContext, instruction: Instruction) -> None:
        raise RuntimeError("downstream is down")

    # The delivered nudge finishes this chart, and the "done" handler raises: the step
    # that delivers the timer fails every time.
    failing = start(NUDGE.replace('target="nudged"', 'target="done"'))
    at = T0 + 3 * DAY
    settings = {
        "PERFORMERS": {"finish": broken},
        "TIMER_MAX_ATTEMPTS": 3,
        "TIMER_RETRY_SECONDS": 10,
    }
    with override_settings(STATECHARTS=settings):
        assert fire_all(at).outcomes == {"retrying": 1}
        timer = Timer.objects.get(execution=failing)
        assert (timer.attempts, timer.due) == (1, at + timedelta(seconds=10))
        assert "downstream is down" in timer.last_error
        assert fire_all(at + timedelta(seconds=10)).outcomes == {"retrying": 1}
        assert Timer.objects.get(pk=timer.pk).due == at + timedelta(seconds=30)
        assert fire_all(at + timedelta(seconds=30)).outcomes == {"failed": 1}
    timer.refresh_from_db()
    assert (timer.status, timer.attempts) == ("failed", 3)
    failing.refresh_from_db()
    assert failing.status == "active" and failing.steps == 1  # every attempt rolled back


def test_a_delayed_internal_send_arrives_as_an_internal_event() -> None:
    execution = start(INTERNAL)
    assert fire_all(T0 + timedelta(seconds=1)).fired == 1
    execution.refresh_from_db()
    assert execution.configuration == ["ok"]


def test_a_delayed_send_to_another_execution_goes_through_the_outbox() -> None:
    pong = start(PONG)
    ping = start(DELAYED_PING)
    stepper.send(ping.pk, "go", pong.session_id, now=T0)
    (timer,) = Timer.objects.for_execution(ping)
    assert timer.target == {"kind": "session", "session_id": pong.session_id}
    assert fire_all(T0 + timedelta(minutes=1)).fired == 1
    assert datamodel(pong)["pings"] == 1
    assert OutboxMessage.objects.get().status == "delivered"


def test_claims_are_disjoint_and_expire() -> None:
    for _ in range(3):
        start(NUDGE)
    due = T0 + 3 * DAY
    first = firing.claim(due, 2, lease=timedelta(seconds=30))
    second = firing.claim(due, 2, lease=timedelta(seconds=30))
    assert len(first) == 2 and len(second) == 1 and not set(first) & set(second)
    assert firing.claim(due, 10) == []
    # A claim does not own the row: a dead firer only delays it until the lease ends.
    assert sorted(firing.claim(due + timedelta(seconds=31), 10)) == sorted(first + second)


def test_due_query_uses_the_partial_index_order() -> None:
    """``Timer.objects.due`` reads the partial index on pending rows (``timers_timer_due``,
    ``(due, id) WHERE status = 'pending'``) in its order: no sort, on either database."""
    for _ in range(3):
        start(NUDGE)
    Timer.objects.filter(pk=Timer.objects.first().pk).update(due=T0)  # type: ignore[union-attr]
    due = list(Timer.objects.due(T0 + 3 * DAY))
    assert due[0].due == T0 and len(due) == 3
    assert list(Timer.objects.due(T0 + DAY)) == due[:1]
    if connection.vendor == "postgresql":
        # Three rows: whether the planner prefers a bitmap scan (then a sort) depends on the
        # table's statistics of the moment. What is asserted is that the index can serve the
        # query in its order, so the scans that would not show that are turned off, for this
        # transaction only.
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL enable_bitmapscan = off")
            cursor.execute("SET LOCAL enable_seqscan = off")
    plan = query_plan(Timer.objects.due(T0 + 3 * DAY))
    if connection.vendor == "postgresql":
        assert "Index Scan using timers_timer_due" in plan and "Sort" not in plan, plan
    else:
        assert "USING INDEX timers_timer_due" in plan and "TEMP B-TREE" not in plan, plan


# ---- commands and pruning -----------------------------------------------------------------------


def test_fire_timers_once_fires_what_is_due() -> None:
    execution = start(NUDGE)
    out = io.StringIO()
    with override_settings(STATECHARTS={"CLOCK": lambda: T0 + 3 * DAY}):
        call_command("fire_timers", "--once", stdout=out)
    assert out.getvalue().strip() == "1 fired"
    execution.refresh_from_db()
    assert execution.configuration == ["nudged"]


def test_prune_keeps_the_rows_of_live_executions() -> None:
    live = start(NUDGE)
    finished = start(NUDGE)
    stepper.send(live.pk, "stop", now=T0)  # cancelled row, execution still active
    stepper.send(finished.pk, "stop", now=T0)
    stepper.send(finished.pk, "signed_up", now=T0)
    later = T0 + 100 * DAY
    assert prune(now=later, retention=timedelta(days=30)) == 1
    assert list(Timer.objects.values_list("execution_id", flat=True)) == [live.pk]
    assert prune(now=T0 + DAY, retention=timedelta(days=30)) == 0


def test_a_chunk_fired_in_one_transaction_gives_each_timer_its_own_outcome() -> None:
    def broken(context: StepContext, instruction: Instruction) -> None:
        raise RuntimeError("downstream is down")

    failed_exec = start(NUDGE)
    migrating = start(NUDGE)
    plain = start(NUDGE)
    several = start(FOREACH)  # three timers of one execution in the same chunk
    failing = start(NUDGE.replace('target="nudged"', 'target="done"'))  # its delivery raises
    Execution.objects.filter(pk=failed_exec.pk).update(status="failed")
    Execution.objects.filter(pk=migrating.pk).update(status="needs_migration")
    settings = {"PERFORMERS": {"finish": broken}, "TIMER_FIRE_CHUNK": 50}
    with override_settings(STATECHARTS=settings):
        report = firing.fire_due(now=T0 + 3 * DAY)
    assert report.outcomes == {"fired": 4, "discarded": 1, "snoozed": 1, "retrying": 1}
    assert datamodel(several)["got"] == [1, 2, 3]
    plain.refresh_from_db()
    assert plain.configuration == ["nudged"]
    timer = Timer.objects.get(execution=failing)
    assert (timer.status, timer.attempts) == ("pending", 1)  # only the failing one paid
    failing.refresh_from_db()
    assert failing.steps == 1


def test_a_step_in_a_chunk_that_cancels_a_later_timer_of_the_chunk_wins() -> None:
    chart = f"""<scxml {NS} datamodel="ecmascript" initial="s">
      <datamodel><data id="seen" expr="[]"/></datamodel>
      <state id="s">
        <onentry>
          <send id="first" event="first" delay="1s"/>
          <send id="second" event="second" delay="2s"/>
        </onentry>
        <transition event="first"><cancel sendid="second"/>
          <assign location="seen" expr="seen.concat(['first'])"/></transition>
        <transition event="second"><assign location="seen" expr="seen.concat(['second'])"/>
        </transition>
      </state>
    </scxml>"""
    execution = start(chart)
    report = firing.fire_due(now=T0 + DAY)
    assert report.outcomes == {"fired": 1, "skipped": 1}
    assert datamodel(execution)["seen"] == ["first"]
    statuses = dict(Timer.objects.values_list("send_id", "status"))
    assert statuses == {"first": "fired", "second": "cancelled"}
