"""The durable stepper: each input is one transaction that loads, advances, performs, persists."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from functools import partial
from typing import Any

import pytest
from django.test import override_settings

from statecharts import signals, stepper
from statecharts.core import ChartError
from statecharts.core.effects import Effect
from statecharts.core.plan import Instruction, InstructionKind
from statecharts.core.position import ChartMismatchError, NotAPositionError, decode
from statecharts.exceptions import Halted, NeedsMigration, NeedsRepair
from statecharts.models import Chart, Execution, HistoryEntry, OutboxMessage
from statecharts.operations.replay import replay
from statecharts.stepper import StepContext
from statecharts.stepper import transaction as step_transaction

pytestmark = pytest.mark.django_db

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0"'

ORDER = f"""<scxml {NS} name="order" datamodel="ecmascript" initial="cart">
  <datamodel><data id="items" expr="[]"/><data id="sid" expr="_sessionid"/></datamodel>
  <state id="cart">
    <transition event="add"><assign location="items" expr="items.concat([_event.data])"/>
    </transition>
    <transition event="checkout" target="paying"/>
    <onexit><log label="leaving cart" expr="items.length"/></onexit>
  </state>
  <state id="paying">
    <onentry><send event="reminder" delay="1d" id="remind"/></onentry>
    <transition event="paid" target="shipped"/>
  </state>
  <final id="shipped"><donedata><param name="count" expr="items.length"/></donedata></final>
</scxml>"""

PING = f"""<scxml {NS} datamodel="ecmascript" initial="idle">
  <datamodel><data id="peer" expr="''"/></datamodel>
  <state id="idle">
    <transition event="go" target="waiting">
      <assign location="peer" expr="_event.data.peer"/>
    </transition>
  </state>
  <state id="waiting">
    <onentry><send event="ping" targetexpr="'#_scxml_' + peer"/></onentry>
    <transition event="pong" target="ok"/>
    <transition event="error.communication" target="lost"/>
  </state>
  <final id="ok"/><final id="lost"/>
</scxml>"""

PONG = f"""<scxml {NS} datamodel="ecmascript" initial="w">
  <datamodel><data id="pings" expr="0"/></datamodel>
  <state id="w">
    <transition event="ping" target="w">
      <assign location="pings" expr="pings + 1"/>
      <send event="pong" targetexpr="_event.origin"/>
    </transition>
    <transition event="stop" target="end"/>
  </state>
  <final id="end"/>
</scxml>"""


def load(source: str) -> Chart:
    return Chart.objects.load(source)


def datamodel(execution: Execution) -> dict[str, Any]:
    execution.refresh_from_db()
    state = decode(bytes(execution.position)).state
    return state.datamodel


# ---- charts ------------------------------------------------------------------------------------


def test_loading_the_same_source_twice_returns_the_same_chart() -> None:
    first = Chart.objects.load(ORDER, version="1")
    assert Chart.objects.load(ORDER.encode()) == first
    assert Chart.objects.count() == 1
    assert first.name == "order"  # taken from <scxml name> when not given
    assert first.content_hash == first.compiled().source_hash


def test_an_invalid_chart_is_refused_with_every_problem_and_nothing_stored() -> None:
    bad = f"""<scxml {NS} initial="nowhere">
      <state id="a"><transition target="b"/></state>
    </scxml>"""
    with pytest.raises(ChartError) as caught:
        Chart.objects.load(bad)
    assert len(caught.value.problems) == 2
    assert all(p.line >= 1 and p.column >= 1 for p in caught.value.problems)
    assert Chart.objects.count() == 0


def test_a_chart_that_is_not_utf8_is_refused() -> None:
    with pytest.raises(ChartError, match="1:8: byte 0xFF is not valid UTF-8"):
        Chart.objects.load(b"<scxml \xff/>")


# ---- the life of an execution -------------------------------------------------------------------


def test_start_runs_to_the_first_stable_configuration_and_records_it() -> None:
    execution = Execution.objects.start(load(ORDER), business_key="order-42")
    assert execution.status == "active"
    assert execution.configuration == ["cart"]
    assert execution.steps == 1
    assert datamodel(execution)["sid"] == execution.session_id  # _sessionid is the row's
    (entry,) = execution.history.all()
    assert (entry.seq, entry.input["kind"], entry.disposition) == (1, "start", "applied")
    assert entry.configuration_after == ["cart"]
    assert Execution.objects.for_key(execution.chart, "order-42").get() == execution


def test_events_advance_the_execution_until_it_completes_with_donedata() -> None:
    execution = Execution.objects.start(load(ORDER))
    finished: list[Execution] = []

    def on_finished(sender: Any, execution: Execution, **kwargs: Any) -> None:
        finished.append(execution)

    signals.execution_finished.connect(on_finished)
    try:
        execution.send("add", {"sku": "A"})
        execution.send("add", {"sku": "B"})
        result = execution.send("checkout")
        assert result.applied and execution.configuration == ["paying"]
        execution.send("paid")
    finally:
        signals.execution_finished.disconnect(on_finished)
    assert execution.status == "completed"
    assert execution.donedata == {"count": 2}
    assert execution.outcome == "final"
    assert execution.configuration == ["shipped"]
    assert execution.ended is not None
    assert [e.pk for e in finished] == [execution.pk]
    assert list(execution.history.values_list("seq", flat=True)) == [1, 2, 3, 4, 5]


def test_an_input_to_a_finished_execution_is_discarded_and_recorded() -> None:
    execution = Execution.objects.start(load(ORDER))
    execution.send("checkout")
    execution.send("paid")
    position = bytes(execution.position)
    discarded: list[HistoryEntry] = []

    def on_discarded(sender: Any, entry: HistoryEntry, **kwargs: Any) -> None:
        discarded.append(entry)

    signals.input_discarded.connect(on_discarded)
    try:
        result = execution.send("add", {"sku": "late"})
    finally:
        signals.input_discarded.disconnect(on_discarded)
    assert result.disposition == "discarded" and not result.applied
    assert bytes(execution.position) == position
    assert execution.status == "completed"
    assert [e.input["event"]["name"] for e in discarded] == ["add"]


def test_cancel_runs_onexit_and_ends_cancelled(caplog: pytest.LogCaptureFixture) -> None:
    execution = Execution.objects.start(load(ORDER))
    execution.send("add", {"sku": "A"})
    with caplog.at_level(logging.INFO, logger="statecharts.chart.order"):
        result = execution.cancel()
    assert execution.status == "cancelled"
    assert execution.outcome == "cancelled"
    logs = [e for e in result.effects if e.kind == "log"]
    assert [(e.data["label"], e.data["value"]) for e in logs] == [("leaving cart", 1)]
    assert any("leaving cart: 1" in r.getMessage() for r in caplog.records)


def test_a_cancel_with_a_reason_is_cancelled_and_keeps_the_reason_in_the_history() -> None:
    execution = Execution.objects.start(load(ORDER))
    result = stepper.cancel(execution, reason="the customer asked")
    execution.refresh_from_db()
    assert (execution.status, execution.outcome) == ("cancelled", "cancelled")
    assert result.entry.input == {"kind": "cancel", "reason": "the customer asked"}


def test_step_finished_carries_the_effects() -> None:
    execution = Execution.objects.start(load(ORDER))
    seen: list[tuple[int, tuple[Effect, ...]]] = []

    def on_step(sender: Any, entry: HistoryEntry, effects: tuple[Effect, ...], **kw: Any) -> None:
        seen.append((entry.seq, effects))

    signals.step_finished.connect(on_step)
    try:
        execution.send("checkout")
    finally:
        signals.step_finished.disconnect(on_step)
    ((seq, effects),) = seen
    assert seq == 2
    assert "send_delayed" in [e.kind for e in effects]


def test_the_injected_clock_stamps_every_row() -> None:
    fixed = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    with override_settings(STATECHARTS={"CLOCK": lambda: fixed}):
        execution = Execution.objects.start(load(ORDER))
        execution.send("checkout")
    assert execution.created == execution.updated == fixed
    assert {e.created for e in execution.history.all()} == {fixed}


# ---- instructions performed by other apps -------------------------------------------------------

CANCELLING = f"""<scxml {NS} datamodel="ecmascript" initial="a">
  <state id="a">
    <onentry><send event="later" delay="1h" id="t"/></onentry>
    <transition event="stop" target="b"><cancel sendid="t"/></transition>
  </state>
  <state id="b"/>
</scxml>"""


def test_an_instruction_without_performer_is_recorded_as_unhandled_never_dropped() -> None:
    execution = Execution.objects.start(load(CANCELLING))
    with override_settings(STATECHARTS={"PERFORMERS": {"cancel_timers": None}}):
        result = execution.send("stop")
    (cancel,) = [e for e in result.entry.effects if e["kind"] == "cancel"]
    assert cancel["unhandled"] is True and cancel["send_id"] == "t"
    assert [i.kind for i in result.instructions if i.kind == "cancel_timers"] == [
        InstructionKind.CANCEL_TIMERS
    ]


def test_with_no_timer_queue_a_delayed_send_is_error_communication_in_the_chart() -> None:
    """No performer for ``schedule`` (the timers app absent or disabled): the registered-types
    snapshot says so, and the core refuses the delayed send with error.communication while
    the <send> executes; it is recorded with the step, never silently dropped."""
    chart = f"""<scxml {NS} datamodel="ecmascript" initial="a">
      <state id="a">
        <transition event="go"><send event="later" delay="1s" id="t"/></transition>
        <transition event="error.communication" target="refused">
          <assign location="why" expr="_event.data.message"/>
        </transition>
      </state>
      <state id="refused"/>
      <datamodel><data id="why" expr="''"/></datamodel>
    </scxml>"""
    execution = Execution.objects.start(load(chart))
    with override_settings(STATECHARTS={"PERFORMERS": {"schedule": None}}):
        result = execution.send("go")
    assert execution.configuration == ["refused"]
    assert "timer queue" in datamodel(execution)["why"]
    assert not [e for e in result.entry.effects if e["kind"] == "send_delayed"]
    assert result.entry.registered_types["timers"] is False
    assert replay(execution).ok  # replay hands the recorded snapshot back


def test_a_performer_runs_inside_the_step_with_its_context() -> None:
    calls: list[tuple[StepContext, Instruction]] = []

    def performer(context: StepContext, instruction: Instruction) -> None:
        calls.append((context, instruction))

    execution = Execution.objects.start(load(ORDER))
    with override_settings(STATECHARTS={"PERFORMERS": {"schedule": performer}}):
        result = execution.send("checkout")
    ((context, instruction),) = calls
    assert context.execution.pk == execution.pk and context.seq == 2
    assert instruction.kind is InstructionKind.SCHEDULE
    assert instruction.event is not None and instruction.event.name == "reminder"
    assert instruction.target is not None and instruction.target.kind == "self"
    (delayed,) = [e for e in result.entry.effects if e["kind"] == "send_delayed"]
    assert "unhandled" not in delayed


def test_a_performer_in_place_of_a_built_in_one_finds_the_execution_row_written() -> None:
    """A step whose performers write nothing writes its execution row and history row
    together (one statement on PostgreSQL), after performing; a performer configured in place
    of a built-in one (here the observation's) may read the row, so the row is written first,
    as for every other performer."""
    seen: list[tuple[int, list[str]]] = []

    def observer(context: StepContext, instruction: Instruction) -> None:
        row = Execution.objects.get(pk=context.execution.pk)
        seen.append((row.steps, row.configuration))

    execution = Execution.objects.start(load(ORDER))
    plain = stepper.send(execution.pk, "add", {"sku": "A"})  # (an observation: the assign)
    assert plain.entry.seq == 2 and plain.entry.pk is not None
    assert [i.kind for i in plain.instructions] == [InstructionKind.OBSERVE]
    with override_settings(STATECHARTS={"PERFORMERS": {"observe": observer}}):
        stepper.send(execution.pk, "add", {"sku": "B"})
    assert seen == [(3, ["cart"])]
    assert list(execution.history.order_by("seq").values_list("seq", "status_after")) == [
        (1, "active"), (2, "active"), (3, "active")
    ]


def test_a_performer_that_raises_rolls_the_whole_step_back() -> None:
    def broken(context: StepContext, instruction: Instruction) -> None:
        raise RuntimeError("timer table is on fire")

    execution = Execution.objects.start(load(ORDER))
    before = (bytes(execution.position), execution.steps, execution.status)
    with (
        override_settings(STATECHARTS={"PERFORMERS": {"schedule": broken}}),
        pytest.raises(RuntimeError, match="on fire"),
    ):
        stepper.send(execution.pk, "checkout")
    execution.refresh_from_db()
    assert (bytes(execution.position), execution.steps, execution.status) == before
    assert execution.history.count() == 1


# ---- failures --------------------------------------------------------------------------------


def test_a_runaway_step_is_rolled_back_and_the_execution_halted_with_a_reason() -> None:
    loop = f"""<scxml {NS} initial="a">
      <state id="a"><transition event="go" target="b"/></state>
      <state id="b"><transition target="c"/></state>
      <state id="c"/>
    </scxml>"""
    loop = loop.replace('<state id="c"/>', '<state id="c"><transition target="b"/></state>')
    with override_settings(STATECHARTS={"ROUND_BUDGET": 50}):
        execution = Execution.objects.start(load(loop))
        with pytest.raises(Halted, match="rounds budget"):
            execution.send("go")
    execution.refresh_from_db()
    assert execution.status == "halted"
    assert execution.configuration == ["a"]  # the last committed configuration is kept
    assert "rounds budget (51 > 50)" in execution.failure_reason
    entry = execution.history.get(seq=2)
    assert (entry.disposition, entry.effects) == (
        "refused",
        [{"kind": "budget_exhausted", "budget": "rounds", "limit": 50, "used": 51}],
    )


def test_a_chart_that_keeps_sending_to_itself_halts_instead_of_holding_the_lock() -> None:
    chatter = f"""<scxml {NS} initial="a">
      <state id="a"><transition event="tick"><send event="tick"/></transition></state>
    </scxml>"""
    with override_settings(STATECHARTS={"SEND_BUDGET": 20}):
        execution = Execution.objects.start(load(chatter))
        with pytest.raises(Halted, match="sends budget"):
            execution.send("tick")
    execution.refresh_from_db()
    assert execution.status == "halted" and execution.steps == 2


def test_self_sends_are_drained_inside_the_same_step() -> None:
    chart = f"""<scxml {NS} initial="a">
      <state id="a"><transition event="go" target="b"><send event="next"/></transition></state>
      <state id="b"><transition event="next" target="c"/></state>
      <state id="c"/>
    </scxml>"""
    execution = Execution.objects.start(load(chart))
    execution.send("go")
    assert execution.configuration == ["c"]
    assert execution.steps == 2  # the self-send is part of the "go" step, not an input


# ---- identity and refusals --------------------------------------------------------------------


def test_an_execution_whose_chart_source_changed_is_refused_not_stepped() -> None:
    execution = Execution.objects.start(load(ORDER))
    position = bytes(execution.position)
    edited = ORDER.replace('target="paying"', 'target="shipped"')
    Chart.objects.filter(pk=execution.chart_id).update(source=edited)
    with pytest.raises(NeedsMigration) as caught:
        stepper.send(execution.pk, "checkout")
    assert isinstance(caught.value.__cause__, ChartMismatchError)
    execution.refresh_from_db()
    assert execution.status == "needs_migration"
    assert bytes(execution.position) == position
    assert list(execution.history.values_list("disposition", flat=True)) == ["applied", "refused"]
    with pytest.raises(NeedsMigration):  # and it stays refused
        stepper.send(execution.pk, "checkout")


def test_each_step_sees_its_chart_row_as_it_is_even_edited_twice_in_one_transaction() -> None:
    """The lock reads the chart row at every step (on PostgreSQL, only its row version, with
    the columns cached by it): an edit in place, even by an update that sends no signal, is
    seen by the next step, also when the same transaction edits the row again (the test's
    own transaction holds every edit here)."""
    execution = Execution.objects.start(load(ORDER))
    stepper.send(execution.pk, "add", {"sku": "A"})
    Chart.objects.filter(pk=execution.chart_id).update(folder="/first")
    assert stepper.send(execution.pk, "add", {"sku": "B"}).execution.chart.folder == "/first"
    Chart.objects.filter(pk=execution.chart_id).update(folder="/second")
    assert stepper.send(execution.pk, "add", {"sku": "C"}).execution.chart.folder == "/second"
    edited = ORDER.replace('target="paying"', 'target="shipped"')
    Chart.objects.filter(pk=execution.chart_id).update(source=edited)
    with pytest.raises(NeedsMigration):
        stepper.send(execution.pk, "add", {"sku": "D"})
    assert datamodel(execution)["items"] == [{"sku": "A"}, {"sku": "B"}, {"sku": "C"}]


def test_lock_many_sees_each_chart_row_as_it_is_even_edited_twice_in_one_transaction() -> None:
    """``lock_many`` too (on PostgreSQL it does not join the chart either: the row version)."""
    from django.db import transaction

    order = load(ORDER)
    executions = [Execution.objects.start(order) for _ in range(3)]
    pks = {execution.pk for execution in executions}
    with transaction.atomic():
        assert {e.chart.folder for e in stepper.lock_many(pks).values()} == {order.folder}
    for folder in ("/first", "/second"):
        Chart.objects.filter(pk=order.pk).update(folder=folder)
        with transaction.atomic():
            assert {e.chart.folder for e in stepper.lock_many(pks).values()} == {folder}


def test_a_damaged_position_is_refused_with_the_typed_error_and_needs_repair() -> None:
    execution = Execution.objects.start(load(ORDER))
    Execution.objects.filter(pk=execution.pk).update(position=b"\x80\x04pickle?")
    with pytest.raises(NeedsRepair) as caught:
        stepper.send(execution.pk, "checkout")
    assert isinstance(caught.value.__cause__, NotAPositionError)
    execution.refresh_from_db()
    assert execution.status == "needs_repair"
    assert execution.failure_reason.startswith("NotAPositionError")
    # The same input again is refused by the status, without decoding anything again.
    with pytest.raises(NeedsRepair):
        stepper.send(execution.pk, "checkout")
    assert [h.disposition for h in execution.history.order_by("seq")] == [
        "applied", "refused", "refused"
    ]


def test_a_business_key_is_unique_per_chart() -> None:
    chart = load(ORDER)
    Execution.objects.start(chart, business_key="42")
    with pytest.raises(stepper.BusinessKeyInUse):
        Execution.objects.start(chart, business_key="42")
    other = load(PONG)
    assert Execution.objects.start(other, business_key="42").business_key == "42"
    assert Execution.objects.start(chart).business_key is None  # no key: no constraint


# ---- sends between executions ------------------------------------------------------------------


def test_a_send_to_another_execution_goes_through_the_outbox_exactly_once() -> None:
    pong = Execution.objects.start(load(PONG))
    ping = Execution.objects.start(load(PING))
    ping.send("go", {"peer": pong.session_id})
    assert ping.status == "completed" and ping.configuration == ["ok"]
    assert datamodel(pong)["pings"] == 1
    assert set(OutboxMessage.objects.values_list("status", flat=True)) == {"delivered"}
    entry = ping.history.get(seq=2)
    assert entry.reachability == {pong.session_id: True}
    assert stepper.deliver_pending() == 0


def test_an_outbox_left_pending_by_a_dead_process_is_delivered_by_the_sweeper() -> None:
    pong = Execution.objects.start(load(PONG))
    ping = Execution.objects.start(load(PING))

    def die_after_commit(phase: str) -> None:
        if phase == "committed":
            raise SystemExit("process died between commit and delivery")

    step_transaction.fault_hook = die_after_commit
    try:
        with pytest.raises(SystemExit):
            stepper.send(ping.pk, "go", {"peer": pong.session_id})
    finally:
        step_transaction.fault_hook = None
    assert OutboxMessage.objects.pending().count() == 1
    assert datamodel(pong)["pings"] == 0
    assert stepper.deliver_pending() == 2  # the ping, then the pong it caused
    assert stepper.deliver_pending() == 0
    assert datamodel(pong)["pings"] == 1
    ping.refresh_from_db()
    assert ping.configuration == ["ok"]


def test_a_send_to_a_finished_execution_tells_the_sender() -> None:
    pong = Execution.objects.start(load(PONG))
    ping = Execution.objects.start(load(PING))
    step_transaction.fault_hook = lambda phase: (
        (_ for _ in ()).throw(SystemExit()) if (phase == "committed") else None
    )
    try:
        with pytest.raises(SystemExit):
            stepper.send(ping.pk, "go", {"peer": pong.session_id})
    finally:
        step_transaction.fault_hook = None
    pong.send("stop")  # the target finishes before the message is delivered
    assert stepper.deliver_pending() == 0
    message = OutboxMessage.objects.get()
    assert message.status == "undeliverable" and "completed" in message.reason
    ping.refresh_from_db()
    assert ping.configuration == ["lost"]  # error.communication reached the sender


def test_an_unknown_session_target_raises_error_communication_at_once() -> None:
    ping = Execution.objects.start(load(PING))
    ping.send("go", {"peer": "nobody"})
    assert ping.configuration == ["lost"]
    assert OutboxMessage.objects.count() == 0
    assert ping.history.get(seq=2).reachability == {"nobody": False}


# ---- replay ------------------------------------------------------------------------------------


def test_replay_reproduces_every_recorded_position() -> None:
    pong = Execution.objects.start(load(PONG))
    ping = Execution.objects.start(load(PING))
    ping.send("go", {"peer": pong.session_id})
    order = Execution.objects.start(load(ORDER))
    for sku in "ABC":
        order.send("add", {"sku": sku})
    order.send("checkout")
    for execution in (pong, ping, order):
        report = replay(execution.pk)
        assert report.ok, str(report)
        assert report.steps_replayed == execution.history.count()


def test_replay_reads_history_recorded_in_the_previous_position_format(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Steps recorded by a release that wrote position format 2 (their hashes are of version-2
    blobs), then steps of this release (version 3): each step still reads the stored
    position, and replay checks every recorded step, old and new, and the stored position."""
    from statecharts.core import position
    from statecharts.stepper import applying

    monkeypatch.setattr(applying, "encode", partial(position.encode, version=2))
    order = Execution.objects.start(load(ORDER))
    order.send("add", {"sku": "A"})
    order.refresh_from_db()
    assert json.loads(bytes(order.position))["version"] == 2
    assert replay(order.pk).ok
    monkeypatch.setattr(applying, "encode", position.encode)
    for sku in "BC":
        order.send("add", {"sku": sku})
    order.send("checkout")
    order.refresh_from_db()
    assert json.loads(bytes(order.position))["version"] == 3
    report = replay(order.pk)
    assert report.ok, str(report)
    assert report.steps_replayed == order.history.count() == 5
    # The old steps are checked, not skipped: a changed input of one is found.
    entry = order.history.get(seq=2)
    entry.input = {**entry.input, "event": {**entry.input["event"], "name": "checkout"}}
    entry.save()
    report = replay(order.pk)
    assert report.mismatch is not None and report.mismatch.seq == 2


def test_replay_reports_the_first_step_that_differs() -> None:
    order = Execution.objects.start(load(ORDER))
    for sku in "ABC":
        order.send("add", {"sku": sku})
    order.send("checkout")
    entry = order.history.get(seq=3)
    entry.input = {**entry.input, "event": {**entry.input["event"], "name": "checkout"}}
    entry.save()
    report = replay(order.pk)
    assert not report.ok
    assert report.mismatch is not None and report.mismatch.seq == 3
    assert "configuration recorded ['cart'], replayed ['paying']" in str(report)


@pytest.mark.parametrize(
    "data",
    [
        {"n": {"$sc": "bigint", "v": "zz"}},
        {"n": float("inf")},
        {"n": {"$sc": "teleport"}},
        {"n": {"$sc": "map", "v": [1]}},
    ],
    ids=["bad bigint", "infinity", "unknown tag", "bad map"],
)
def test_data_the_datamodel_cannot_take_is_refused_before_anything_is_written(
    data: dict[str, Any],
) -> None:
    chart = load(ORDER)
    with pytest.raises(ValueError, match=r"data\.n"):
        stepper.start(chart, data=data)
    assert Execution.objects.count() == 0
    execution = Execution.objects.start(chart)
    with pytest.raises(ValueError, match=r"data\.n"):
        stepper.send(execution.pk, "add", data)
    execution.refresh_from_db()
    assert (execution.status, execution.steps) == ("active", 1)


def test_the_lock_falls_back_to_the_orm_if_its_compiled_plan_cannot_be_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from statecharts.stepper import sql as statements

    def broken(self: object, conn: object) -> None:
        raise AttributeError("the compiler changed shape")

    execution = Execution.objects.start(load(ORDER))
    monkeypatch.setattr(statements._LockPlan, "__init__", broken)
    monkeypatch.setattr(statements.postgres.NarrowLock, "__init__", broken)  # (PostgreSQL's)
    monkeypatch.setattr(statements, "_lock_plans", statements.weakref.WeakKeyDictionary())
    execution.send("add", {"sku": "A"})
    assert isinstance(next(iter(statements._lock_plans.values())), statements._ORMLock)
    assert execution.steps == 2 and datamodel(execution)["items"] == [{"sku": "A"}]


# ---- lock_many ----------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 17])
def test_lock_many_locks_exactly_the_given_executions_with_their_charts_in_one_statement(
    size: int,
) -> None:
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    order, pong = load(ORDER), load(PONG)
    executions = [stepper.start(order if i % 2 else pong) for i in range(size + 2)]
    wanted = {execution.pk for execution in executions[1 : size + 1]}
    missing = max(e.pk for e in executions) + 1000  # no such execution: absent, not an error
    with transaction.atomic(), CaptureQueriesContext(connection) as first:
        stepper.lock_many(wanted | {missing})
    # One SELECT ... FOR UPDATE, whatever the size; on PostgreSQL a chart not seen yet on this
    # connection is read once more on its own (postgres.NarrowLock: the lock does not join it).
    lock = 'FROM "statecharts_execution"'
    assert sum(lock in q["sql"] for q in first.captured_queries) == 1
    others = [q["sql"] for q in first.captured_queries if lock not in q["sql"]]
    assert len(others) <= 2 and all('FROM "statecharts_chart"' in sql for sql in others)
    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        locked = stepper.lock_many(wanted | {missing})
    assert len(queries.captured_queries) == 1  # the charts' columns cached: the lock only
    assert set(locked) == wanted
    for pk, execution in locked.items():
        stored = Execution.objects.select_related("chart").get(pk=pk)
        assert execution.pk == pk and execution.chart_id == stored.chart_id
        assert execution.chart.content_hash == stored.chart.content_hash  # the chart is loaded
        assert execution.configuration == stored.configuration
        assert bytes(execution.position) == bytes(stored.position)
        assert execution.status == stored.status
    assert stepper.lock_many(set()) == {}


@pytest.mark.postgres
def test_a_full_chart_cache_evicts_its_oldest_entry_not_the_charts_a_lock_just_read() -> None:
    """The per-connection cache of chart rows (postgres.NarrowLock) is bounded; when full it
    drops its oldest entry. Clearing it all dropped the chart the same lock had just read, so
    a lock of two charts' executions read one chart twice, depending on what earlier work had
    left in the cache."""
    from django.db import connection, connections, transaction
    from django.test.utils import CaptureQueriesContext

    from statecharts.stepper import postgres

    order, pong = load(ORDER), load(PONG)
    executions = [stepper.start(order if i % 2 else pong) for i in range(6)]
    with transaction.atomic():
        stepper.lock_many({executions[0].pk})  # (makes the connection's cache)
    rows, _ = postgres._chart_rows[connections[stepper.database()]]
    rows.clear()
    for n in range(postgres._CHART_CACHE_SIZE - 1):  # one place left
        rows[(-1 - n, "stale")] = []
    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        locked = stepper.lock_many({e.pk for e in executions})
    lock = 'FROM "statecharts_execution"'
    chart_reads = [q for q in queries.captured_queries if lock not in q["sql"]]
    assert len(chart_reads) == 2  # each chart once, though the second read filled the cache
    assert len(rows) == postgres._CHART_CACHE_SIZE
    assert (-1, "stale") not in rows  # the oldest went
    assert {e.chart_id for e in locked.values()} == {order.pk, pong.pk}
    rows.clear()
