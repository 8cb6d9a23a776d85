"""The effect vocabulary's observations (docs/durable-executions.md, "Tracing"): the
``datamodel_init`` effect, the trace effects, all planned as ``observe``; and tracing one
durable execution: its history keeps the trace, its admin timeline shows it, replay still
matches, and turning it off stops it."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from statecharts import stepper
from statecharts.core.effects import EffectKind
from statecharts.core.plan import InstructionKind, plan_one
from statecharts.drivers.memory import MemoryDriver
from statecharts.models import Chart, Execution, HistoryEntry
from statecharts.operations.inspection import history_row
from statecharts.operations.replay import Verdict, replay

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'

CHART = f"""<scxml {NS} name="traced" initial="p">
  <datamodel><data id="n" expr="1"/></datamodel>
  <state id="p" initial="a">
    <onentry><assign location="n" expr="2"/></onentry>
    <history id="h"><transition target="a"/></history>
    <state id="a">
      <transition event="go" cond="n &gt; 1" target="b"><raise event="hop"/></transition>
      <transition event="go" target="a"/>
    </state>
    <state id="b"><transition event="hop" target="c"/></state>
    <state id="c"/>
    <transition event="out" target="q"/>
  </state>
  <state id="q"><transition event="back" target="h"/></state>
</scxml>"""

TRACES = {
    EffectKind.TRACE_EVENT,
    EffectKind.TRACE_TRANSITIONS,
    EffectKind.TRACE_EXIT,
    EffectKind.TRACE_ENTRY,
    EffectKind.TRACE_STABLE,
    EffectKind.TRACE_RAISED,
    EffectKind.TRACE_GUARD,
    EffectKind.TRACE_HISTORY,
    EffectKind.TRACE_MICROSTEP,
}


def kinds(effects: Any) -> list[str]:
    return [str(e.kind) for e in effects]


# ---- the core's vocabulary, in memory ------------------------------------------------------------


def test_datamodel_init_is_the_baseline_the_start_left_once_per_session() -> None:
    session = MemoryDriver().start(CHART)
    (init,) = [e for e in session.effects if e.kind == EffectKind.DATAMODEL_INIT]
    assert init.data["datamodel"]["n"] == 2  # <data> gave 1, p's onentry assigned 2
    assert kinds(session.effects).index("datamodel_init") < kinds(session.effects).index(
        "datamodel_change"
    )
    session.send("go")
    assert kinds(session.effects).count("datamodel_init") == 1


def test_every_observation_is_planned_as_observe() -> None:
    session = MemoryDriver(tracing=True).start(CHART)
    for name in ("go", "out", "back"):
        session.send(name)
    seen = {e.kind for e in session.effects}
    assert seen >= TRACES | {EffectKind.DATAMODEL_INIT}  # the chart exercises every one
    for effect in session.effects:
        if effect.kind in TRACES or effect.kind == EffectKind.DATAMODEL_INIT:
            assert plan_one(effect).kind is InstructionKind.OBSERVE


def test_the_new_trace_effects_say_what_happened() -> None:
    session = MemoryDriver(tracing=True).start(CHART)
    session.effects.clear()
    session.send("go")
    by_kind = {str(e.kind): e.data for e in session.effects}
    guard = by_kind["trace.guard_evaluated"]
    assert guard == {
        "transition": {"index": guard["transition"]["index"], "source": "a"},
        "cond": "n > 1",
        "result": True,
    }
    assert by_kind["trace.internal_event_raised"]["event"]["name"] == "hop"
    assert by_kind["trace.microstep_completed"]["configuration"] == ["p", "c"]
    session.send("out")
    history = [e.data for e in session.effects if e.kind == EffectKind.TRACE_HISTORY]
    assert history == [{"history": "h", "states": ["c"]}]


def test_without_tracing_no_trace_effect_is_emitted() -> None:
    session = MemoryDriver().start(CHART)
    session.send("go")
    assert not any(e.kind.is_trace for e in session.effects)


# ---- one durable execution traced ----------------------------------------------------------------


@pytest.mark.django_db
def test_a_traced_execution_keeps_its_trace_and_replays_the_same() -> None:
    chart = Chart.objects.load(CHART)
    traced = Execution.objects.start(chart, tracing=True)
    plain = stepper.start(chart)
    for execution in (traced, plain):
        stepper.send(execution.pk, "go")
    entries = list(HistoryEntry.objects.filter(execution=traced).order_by("seq"))
    go = history_row(entries[1])
    assert go.trace and all(line.startswith("[") for line in go.trace)
    assert any("guard of a's transition: n > 1 -> true" in line for line in go.trace)
    assert any("raised hop" in line for line in go.trace)
    assert not any(e.text.startswith("trace.") for e in go.effects)  # (shown as the trace)
    assert history_row(HistoryEntry.objects.get(execution=plain, seq=2)).trace == ()
    assert replay(traced.pk).verdict is Verdict.MATCHES
    # The same steps, traced or not, reach the same position.
    traced.refresh_from_db()
    plain.refresh_from_db()
    assert traced.configuration == plain.configuration == ["c"]


@pytest.mark.django_db
def test_tracing_is_turned_on_and_off_per_execution() -> None:
    execution = stepper.start(Chart.objects.load(CHART))
    assert stepper.trace(execution.pk) is True
    assert stepper.trace(execution.pk) is False  # already on
    stepper.send(execution.pk, "go")
    assert stepper.trace(execution, on=False) is True and execution.tracing is False
    stepper.send(execution.pk, "out")
    first, second = HistoryEntry.objects.filter(execution=execution, seq__in=[2, 3]).order_by("seq")
    assert history_row(first).trace and not history_row(second).trace


@pytest.mark.django_db
def test_the_admin_turns_tracing_on_and_shows_the_trace_in_the_timeline(client: Client) -> None:
    client.force_login(User.objects.create_superuser("admin", "admin@example.com", "pw"))
    execution = stepper.start(Chart.objects.load(CHART))
    response = client.post(
        reverse("admin:statecharts_execution_changelist"),
        {"action": "trace_selected", "_selected_action": [execution.pk]},
        follow=True,
    )
    assert "Tracing on: 1 changed" in response.content.decode()
    assert Execution.objects.get(pk=execution.pk).tracing
    stepper.send(execution.pk, "go")
    page = client.get(reverse("admin:statecharts_execution_change", args=[execution.pk]))
    html = page.content.decode()
    assert "<summary>trace (" in html and "raised hop" in html
