"""The status table, durably: what inputs, timers and cancels do in each status, and the step
budgets that halt a runaway (statecharts.statuses, statecharts.core.budget)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import override_settings

from statecharts import stepper
from statecharts.core.position import decode
from statecharts.exceptions import Halted, NeedsMigration, NeedsRepair, StartRefused
from statecharts.models import Chart, Execution, HistoryEntry
from statecharts.operations.replay import replay
from statecharts.statuses import TABLE, CancelRule, ExecutionStatus, InputRule, TimerRule, rules
from timers.firing import fire_all_due
from timers.models import Timer

T0 = datetime(2032, 1, 1, tzinfo=UTC)
NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'

# "spin" enters an eventless loop that never settles; "nudge" is a timer due in 10 s.
RUNAWAY = f"""<scxml {NS} initial="idle">
  <datamodel><data id="spins" expr="0"/></datamodel>
  <state id="idle">
    <onentry><send event="nudge" delay="10s"/></onentry>
    <onexit><log label="leaving idle" expr="spins"/></onexit>
    <transition event="spin" target="b"><assign location="spins" expr="spins + 1"/></transition>
    <transition event="nudge" target="nudged"/>
  </state>
  <state id="b"><transition target="c"/></state>
  <state id="c"><transition target="b"/></state>
  <state id="nudged"/>
</scxml>"""

pytestmark = pytest.mark.django_db


def start(source: str) -> Execution:
    return stepper.start(Chart.objects.load(source), now=T0)


def datamodel(execution: Execution) -> dict[str, Any]:
    execution.refresh_from_db()
    return decode(bytes(execution.position)).state.datamodel


def test_the_table_covers_every_status_with_its_rules() -> None:
    assert set(TABLE) == set(ExecutionStatus)
    assert rules("active").inputs is InputRule.APPLY
    assert {s for s, r in TABLE.items() if r.timers is TimerRule.SNOOZE} == {
        "halted", "needs_migration", "needs_repair"
    }
    assert rules("needs_repair").cancel is CancelRule.WITHOUT_CHART_CODE
    assert rules("no such status") is TABLE[ExecutionStatus.NEEDS_REPAIR]  # a damaged row


def test_a_halted_execution_refuses_inputs_holds_its_timers_and_cancels_with_onexit() -> None:
    execution = start(RUNAWAY)
    with override_settings(STATECHARTS={"ROUND_BUDGET": 40}), pytest.raises(Halted):
        stepper.send(execution, "spin", now=T0)
    execution.refresh_from_db()
    assert (execution.status, execution.configuration) == ("halted", ["idle"])
    assert datamodel(execution)["spins"] == 0  # the runaway step was rolled back whole

    # Inputs are refused and recorded (feeding them would re-run the runaway).
    with pytest.raises(Halted):
        stepper.send(execution, "nudge", now=T0)
    assert execution.history.get(seq=3).disposition == "refused"

    # Its timer is held: snoozed with the status as the reason, no attempt spent.
    assert fire_all_due(now=T0 + timedelta(seconds=11)).outcomes == {"snoozed": 1}
    timer = Timer.objects.get(execution=execution)
    assert (timer.status, timer.attempts, timer.reason) == (
        "pending", 0, "execution halted: snoozed"
    )

    # Cancel runs onexit in the configuration it kept; then its timers are discarded.
    result = stepper.cancel(execution, now=T0)
    assert [e["label"] for e in result.entry.effects if e["kind"] == "log"] == ["leaving idle"]
    execution.refresh_from_db()
    assert execution.status == "cancelled"
    assert Timer.objects.get(execution=execution).status == "discarded"
    assert replay(execution).ok  # the refused steps are not re-run


def test_the_time_budget_halts_a_step_whose_guard_never_settles() -> None:
    """An eventless transition whose cond loops: each evaluation stops at the per-evaluation
    limit, and the step stops at the first check after its deadline (an injected clock that
    advances one second per reading; nothing sleeps)."""
    chart = f"""<scxml {NS} initial="a">
      <state id="a"><transition event="go" target="b"/></state>
      <state id="b"><transition cond="(function(){{ return false; }})()" target="a"/>
        <transition target="c"/></state>
      <state id="c"><transition target="b"/></state>
    </scxml>"""
    ticks = iter(range(10_000))
    with override_settings(
        STATECHARTS={"STEP_CLOCK": lambda: float(next(ticks)), "STEP_TIME_BUDGET_MS": 5_000}
    ):
        execution = start(chart)
        with pytest.raises(Halted, match="time_ms budget"):
            stepper.send(execution, "go", now=T0)
    execution.refresh_from_db()
    assert execution.status == "halted" and execution.configuration == ["a"]


def test_nested_foreach_is_bounded_by_its_budget() -> None:
    chart = f"""<scxml {NS} initial="a">
      <datamodel><data id="xs" expr="Array.from({{length: 200}}, (_, i) => i)"/>
        <data id="n" expr="0"/></datamodel>
      <state id="a"><transition event="go">
        <foreach array="xs" item="i"><foreach array="xs" item="j"><foreach array="xs" item="k">
          <assign location="n" expr="n + 1"/>
        </foreach></foreach></foreach>
      </transition></state>
    </scxml>"""
    execution = start(chart)
    with override_settings(STATECHARTS={"FOREACH_BUDGET": 1_000}), pytest.raises(Halted):
        stepper.send(execution, "go", now=T0)
    assert datamodel(execution)["n"] == 0


def test_a_start_that_runs_away_writes_nothing() -> None:
    loop = f"""<scxml {NS} initial="b">
      <state id="b"><transition target="c"/></state>
      <state id="c"><transition target="b"/></state>
    </scxml>"""
    chart = Chart.objects.load(loop)
    with override_settings(STATECHARTS={"ROUND_BUDGET": 30}), pytest.raises(StartRefused):
        stepper.start(chart, now=T0)
    assert not Execution.objects.exists() and not HistoryEntry.objects.exists()


def test_too_many_delayed_sends_in_one_step_halt_it_before_any_row_is_written() -> None:
    chart = f"""<scxml {NS} initial="a">
      <datamodel><data id="xs" expr="[1,2,3,4,5,6]"/></datamodel>
      <state id="a"><transition event="go">
        <foreach array="xs" item="x"><send event="t" delay="1s"/></foreach>
      </transition></state>
    </scxml>"""
    execution = start(chart)
    with override_settings(STATECHARTS={"DELAYED_SENDS_BUDGET": 5}), pytest.raises(Halted):
        stepper.send(execution, "go", now=T0)
    assert not Timer.objects.exists()


def test_a_position_over_its_size_budget_halts_the_step() -> None:
    chart = f"""<scxml {NS} initial="a">
      <datamodel><data id="big" expr="''"/></datamodel>
      <state id="a"><transition event="grow">
        <assign location="big" expr="'x'.repeat(5000)"/></transition></state>
    </scxml>"""
    execution = start(chart)
    with override_settings(STATECHARTS={"POSITION_BUDGET_BYTES": 4_000}), pytest.raises(Halted):
        stepper.send(execution, "grow", now=T0)
    assert datamodel(execution)["big"] == ""


def test_a_failing_donedata_still_completes_the_execution_with_the_error_kept() -> None:
    chart = f"""<scxml {NS} initial="a">
      <state id="a"><transition event="finish" target="done"/></state>
      <final id="done"><donedata><param name="x" expr="no.such.thing"/></donedata></final>
    </scxml>"""
    execution = start(chart)
    stepper.send(execution, "finish", now=T0)
    execution.refresh_from_db()
    assert (execution.status, execution.outcome, execution.donedata) == (
        "completed", "final", None
    )
    assert "no" in execution.donedata_error
    assert execution.configuration == ["done"]


def test_an_execution_needing_migration_can_be_cancelled_with_or_without_chart_code() -> None:
    first = start(RUNAWAY)
    Execution.objects.filter(pk=first.pk).update(status="needs_migration", failure_reason="x")
    result = stepper.cancel(first, now=T0)  # its position still decodes: onexit runs
    assert [e["label"] for e in result.entry.effects if e["kind"] == "log"] == ["leaving idle"]

    second = start(RUNAWAY)
    Execution.objects.filter(pk=second.pk).update(
        status="needs_migration", position=b"not a blob"
    )
    with pytest.raises(NeedsMigration):
        stepper.send(second, "spin", now=T0)
    result = stepper.cancel(second, now=T0)  # it cannot: cancelled as data, no chart code
    second.refresh_from_db()
    assert second.status == "cancelled"
    assert result.entry.reason.startswith("cancelled without running chart code")
    assert Timer.objects.get(execution=second).status == "discarded"


def test_an_execution_needing_repair_is_cancelled_without_running_chart_code() -> None:
    execution = start(RUNAWAY)
    Execution.objects.filter(pk=execution.pk).update(position=b"\x00\x01")
    with pytest.raises(NeedsRepair):
        stepper.send(execution, "spin", now=T0)
    assert fire_all_due(now=T0 + timedelta(seconds=11)).outcomes == {"snoozed": 1}
    assert Timer.objects.get(execution=execution).reason == "execution needs repair: snoozed"
    stepper.cancel(execution, now=T0)
    execution.refresh_from_db()
    assert execution.status == "cancelled" and execution.outcome == "cancelled"


def test_a_datamodel_snapshot_the_engine_cannot_restore_needs_repair_once() -> None:
    """The blob decodes but its datamodel cannot be rebuilt (the engine refuses it when the
    step runs): the input is refused and recorded, the status says so, the same failure is
    not retried on every input, and cancel works without chart code."""
    execution = start(RUNAWAY)
    raw = json.loads(bytes(Execution.objects.get(pk=execution.pk).position))
    raw["state"]["datamodel"]["spins"] = {"$sc": "function", "source": "not javascript ("}
    Execution.objects.filter(pk=execution.pk).update(position=json.dumps(raw).encode())
    with pytest.raises(NeedsRepair, match="DamagedDatamodelError"):
        stepper.send(execution, "spin", now=T0)
    execution.refresh_from_db()
    assert execution.status == "needs_repair"
    refused = HistoryEntry.objects.filter(execution=execution).latest("seq")
    assert refused.disposition == "refused" and "DamagedDatamodelError" in refused.reason
    with pytest.raises(NeedsRepair):  # refused by its status now, without touching the engine
        stepper.send(execution, "spin", now=T0)
    result = stepper.cancel(execution, now=T0)
    execution.refresh_from_db()
    assert execution.status == "cancelled"
    assert result.entry.reason.startswith("cancelled without running chart code")
    assert Timer.objects.get(execution=execution).status == "discarded"


def test_a_live_execution_whose_snapshot_is_damaged_is_cancelled_without_chart_code() -> None:
    execution = start(RUNAWAY)
    raw = json.loads(bytes(Execution.objects.get(pk=execution.pk).position))
    raw["state"]["datamodel"]["spins"] = {"$sc": "no-such-tag"}
    Execution.objects.filter(pk=execution.pk).update(position=json.dumps(raw).encode())
    result = stepper.cancel(execution, now=T0)
    execution.refresh_from_db()
    assert execution.status == "cancelled" and execution.outcome == "cancelled"
    assert "DamagedDatamodelError" in result.entry.reason


def test_a_guard_that_loops_forever_halts_within_seconds_not_hours() -> None:
    """The one real-time check (a wide margin): the reproduction from the hostile-input issue,
    an eventless guard that never returns, held the row lock for about 83 minutes (500 ms per
    evaluation, 10,000 rounds). With a 1 s step budget it halts in about one evaluation."""
    import time

    chart = f"""<scxml {NS} initial="a">
      <state id="a"><transition event="go" target="b"/></state>
      <state id="b"><transition cond="(function(){{while(true){{}}}})()" target="c"/></state>
      <state id="c"/>
    </scxml>"""
    with override_settings(STATECHARTS={"STEP_TIME_BUDGET_MS": 1_000, "TIME_LIMIT_MS": 200}):
        execution = start(chart)
        started = time.monotonic()
        with pytest.raises(Halted, match="time_ms budget"):
            stepper.send(execution, "go", now=T0)
        assert time.monotonic() - started < 30
