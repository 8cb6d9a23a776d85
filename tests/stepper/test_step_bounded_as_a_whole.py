"""A step is bounded as a whole, durably: the time budget reaches every evaluation (many in
one round, data at start), the bytes a step's effects would write are budgeted
(``OUTPUT_BYTES_BUDGET``), and a datamodel the snapshot cannot take halts the step. Each is
rolled back like every budget stop: nothing written, the input recorded as refused with the
budget, the execution ``halted`` (its configuration and timers kept, cancellable)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from django.test import override_settings

from statecharts import stepper
from statecharts.exceptions import Halted, StartRefused
from statecharts.models import Chart, Execution, HistoryEntry
from statecharts.operations.replay import replay
from timers.firing import fire_all_due
from timers.models import Timer

T0 = datetime(2032, 1, 1, tzinfo=UTC)
NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'

pytestmark = pytest.mark.django_db


def start(source: str) -> Execution:
    return stepper.start(Chart.objects.load(source), now=T0)


def one_second_per_reading() -> Iterator[float]:
    return (float(i) for i in range(1_000_000))


def refused_budget(execution: Execution) -> dict[str, object]:
    entry = execution.history.order_by("-seq").first()
    assert entry is not None and entry.disposition == "refused"
    [effect] = entry.effects
    assert effect["kind"] == "budget_exhausted"
    return effect


# A timer due in an hour, set at start: a halt must hold it, not discard it.
NUDGE = '<onentry><send event="nudge" delay="1h"/></onentry>'


def test_many_evaluations_in_one_round_halt_at_the_step_clocks_deadline() -> None:
    """Forty onentry scripts entered by one event, an injected step clock advancing a second
    per reading and a 5 s budget: the step stops at the first evaluation past the deadline."""
    blocks = "".join("<onentry><script>n = n + 1</script></onentry>" for _ in range(40))
    chart = f"""<scxml {NS} initial="a">
      <datamodel><data id="n" expr="0"/></datamodel>
      <state id="a">{NUDGE}<transition event="go" target="b"/></state>
      <state id="b">{blocks}</state></scxml>"""
    execution = start(chart)
    ticks = one_second_per_reading()
    with override_settings(
        STATECHARTS={"STEP_CLOCK": lambda: next(ticks), "STEP_TIME_BUDGET_MS": 5_000}
    ), pytest.raises(Halted, match="time_ms budget"):
        stepper.send(execution, "go", now=T0)
    assert next(ticks) < 10  # (a handful of readings, not one per script)
    execution.refresh_from_db()
    assert (execution.status, execution.configuration) == ("halted", ["a"])
    assert refused_budget(execution)["budget"] == "time_ms"
    assert Timer.objects.get(execution=execution).status == "pending"  # held
    assert replay(execution).ok  # the record is what replay reads


def test_data_initialised_at_start_is_bounded_by_the_step_clock() -> None:
    datas = "".join(f'<data id="d{i}" expr="{i}"/>' for i in range(40))
    chart = Chart.objects.load(
        f'<scxml {NS} initial="a"><datamodel>{datas}</datamodel><state id="a"/></scxml>'
    )
    ticks = one_second_per_reading()
    with override_settings(
        STATECHARTS={"STEP_CLOCK": lambda: next(ticks), "STEP_TIME_BUDGET_MS": 5_000}
    ), pytest.raises(StartRefused, match="time_ms budget"):
        stepper.start(chart, now=T0)
    assert not Execution.objects.exists() and not HistoryEntry.objects.exists()


FAT_SENDS = f"""<scxml {NS} initial="a">
  <datamodel><data id="xs" expr="[1, 2, 3]"/></datamodel>
  <state id="a">{NUDGE}<transition event="go">
    <foreach array="xs" item="i">
      <send event="t" delay="1h"><param name="p" expr="'y'.repeat(900000)"/></send>
    </foreach>
  </transition></state>
</scxml>"""


def test_sends_carrying_more_than_the_output_budget_halt_before_any_timer_is_written() -> None:
    """Three delayed sends of 0.9 MB each: 2.7 MB, over the 2 MB default. No timer row, no
    history row holding them: the input is refused with the budget."""
    execution = start(FAT_SENDS)
    with pytest.raises(Halted, match="output_bytes budget"):
        stepper.send(execution, "go", now=T0)
    execution.refresh_from_db()
    assert execution.status == "halted"
    budget = refused_budget(execution)
    assert budget["budget"] == "output_bytes" and budget["limit"] == 2_000_000
    assert isinstance(budget["used"], int) and budget["used"] > 2_000_000
    assert list(Timer.objects.filter(execution=execution).values_list("status", flat=True)) == [
        "pending"  # only the start's own timer, held
    ]
    assert fire_all_due(now=T0 + timedelta(hours=2)).outcomes == {"snoozed": 1}
    stepper.cancel(execution, now=T0)
    execution.refresh_from_db()
    assert execution.status == "cancelled"


def test_a_step_within_the_output_budget_is_applied() -> None:
    execution = start(FAT_SENDS)
    with override_settings(STATECHARTS={"OUTPUT_BYTES_BUDGET": 3_000_000}):
        stepper.send(execution, "go", now=T0)
    execution.refresh_from_db()
    assert execution.status == "active"
    assert Timer.objects.filter(execution=execution).count() == 4


def test_the_output_budget_bounds_the_self_sends_of_a_step_together() -> None:
    """Each self-send the step drains is one call of the core carrying 0.8 MB, under the
    2 MB budget alone; the step carries them together and is halted at the third."""
    chart = f"""<scxml {NS} initial="a">
      <datamodel><data id="n" expr="0"/></datamodel>
      <state id="a">{NUDGE}
        <transition event="go"><send event="more"/></transition>
        <transition event="more" cond="n &lt; 5">
          <assign location="n" expr="n + 1"/>
          <send event="more"><param name="p" expr="'y'.repeat(800000)"/></send>
        </transition>
      </state>
    </scxml>"""
    execution = start(chart)
    with pytest.raises(Halted, match="output_bytes budget"):
        stepper.send(execution, "go", now=T0)
    execution.refresh_from_db()
    assert execution.status == "halted"
    used = refused_budget(execution)["used"]
    assert isinstance(used, int) and 2_000_000 < used < 2_500_000  # the third 0.8 MB send
    with override_settings(STATECHARTS={"OUTPUT_BYTES_BUDGET": 6_000_000}):
        execution = start(chart)
        stepper.send(execution, "go", now=T0)
    execution.refresh_from_db()
    assert execution.status == "active"
    assert not execution.history.filter(disposition="refused").exists()


def test_donedata_over_the_output_budget_halts_instead_of_completing() -> None:
    chart = f"""<scxml {NS} initial="a">
      <state id="a"><transition event="go" target="f"/></state>
      <final id="f"><donedata><param name="p" expr="'y'.repeat(20000)"/></donedata></final>
    </scxml>"""
    execution = start(chart)
    with override_settings(STATECHARTS={"OUTPUT_BYTES_BUDGET": 10_000}), pytest.raises(Halted):
        stepper.send(execution, "go", now=T0)
    execution.refresh_from_db()
    assert (execution.status, execution.configuration, execution.donedata) == (
        "halted", ["a"], None
    )
    assert refused_budget(execution)["budget"] == "output_bytes"


@pytest.mark.parametrize(
    ("script", "budget"),
    [
        ("x = 'x'.repeat(30000000)", "snapshot_memory_bytes"),
        ("var d = []; for (var i = 0; i &lt; 150; i++) d = [d]; x = d;", "snapshot_value_depth"),
    ],
    ids=["memory cap", "nesting bound"],
)
def test_a_datamodel_the_snapshot_cannot_take_halts_the_step_and_holds_its_timers(
    script: str, budget: str
) -> None:
    """Not a chart error and not the end of the execution (it used to end ``failed``, its
    timers discarded): the step is over the snapshot's budget, so it is rolled back and the
    execution halted, keeping what it had; cancelling it still runs its onexit."""
    chart = f"""<scxml {NS} initial="a">
      <datamodel><data id="x" expr="0"/></datamodel>
      <state id="a">{NUDGE}<onexit><log label="x" expr="typeof x"/></onexit>
        <transition event="go"><script>{script}</script></transition></state>
    </scxml>"""
    execution = start(chart)
    with pytest.raises(Halted, match="snapshot"):
        stepper.send(execution, "go", now=T0)
    execution.refresh_from_db()
    assert (execution.status, execution.configuration) == ("halted", ["a"])
    assert refused_budget(execution)["budget"] == budget
    assert Timer.objects.get(execution=execution).status == "pending"
    result = stepper.cancel(execution, now=T0)
    assert [e["value"] for e in result.entry.effects if e["kind"] == "log"] == ["number"]


def test_the_time_budget_spans_every_self_send_the_step_drains() -> None:
    """A step drains its self-sends with one interpreter call each; the time budget is the
    step's, not each call's: with a clock advancing a second per reading and a 5 s budget,
    a chain of self-sends (each call well inside 5 s) halts the step once the chain as a whole
    passes the deadline, and the step is rolled back."""
    chart = f"""<scxml {NS} initial="a">
      <datamodel><data id="n" expr="0"/></datamodel>
      <state id="a">{NUDGE}<transition event="go" target="b"/></state>
      <state id="b">
        <onentry><send event="again"/></onentry>
        <transition event="again" cond="n &lt; 50" target="b">
          <assign location="n" expr="n + 1"/>
        </transition>
      </state></scxml>"""
    execution = start(chart)
    ticks = one_second_per_reading()
    with override_settings(
        STATECHARTS={"STEP_CLOCK": lambda: next(ticks), "STEP_TIME_BUDGET_MS": 5_000}
    ), pytest.raises(Halted, match="time_ms budget"):
        stepper.send(execution, "go", now=T0)
    assert next(ticks) < 20  # stopped a few readings past the deadline, not after 50 sends
    execution.refresh_from_db()
    assert (execution.status, execution.configuration) == ("halted", ["a"])
    assert refused_budget(execution)["budget"] == "time_ms"
    assert Timer.objects.get(execution=execution).status == "pending"
    assert replay(execution).ok


def test_self_sends_within_the_step_budget_are_all_applied() -> None:
    """The same chain under a budget wide enough for it is applied as one step."""
    chart = f"""<scxml {NS} initial="a">
      <datamodel><data id="n" expr="0"/></datamodel>
      <state id="a"><transition event="go" target="b"/></state>
      <state id="b">
        <onentry><send event="again"/></onentry>
        <transition event="again" cond="n &lt; 5" target="b">
          <assign location="n" expr="n + 1"/>
        </transition>
        <transition event="again" target="done"/>
      </state>
      <final id="done"/></scxml>"""
    execution = start(chart)
    ticks = one_second_per_reading()
    with override_settings(
        STATECHARTS={"STEP_CLOCK": lambda: next(ticks), "STEP_TIME_BUDGET_MS": 1_000_000}
    ):
        result = stepper.send(execution, "go", now=T0)
    assert result.applied
    execution.refresh_from_db()
    assert execution.status == "completed"
