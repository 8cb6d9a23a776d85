"""What a migration does not run, and says so: the ``<onentry>`` of the states it makes
active and the ``<data>`` the new version declares (docs/versions-and-migration.md, "No chart
code runs during a migration"); and the recipe that runs a new state's entry in a real step."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import call_command
from django.test import override_settings

from statecharts.models import Chart, Execution
from statecharts.operations.chart_migration import MigrationPlan, Verdict, dry_run, migrate
from statecharts.operations.chart_migration.applying import TransformContext
from statecharts.operations.replay import replay
from statecharts.testing import Workbench
from timers.models import Timer

pytestmark = pytest.mark.django_db

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
V1 = f"""<scxml {NS} name="claim" initial="open">
  <datamodel><data id="notes" expr="0"/></datamodel>
  <parallel id="open">
    <state id="review" initial="reading">
      <state id="reading"><transition event="note"><assign location="notes" expr="notes + 1"/>
      </transition></state>
    </state>
  </parallel>
</scxml>"""
# v2 adds a region whose states have entry code (a 1-day reminder, a counter) and a variable;
# its "migrated" transition is the recipe: an event that enters the new state in a real step.
V2 = f"""<scxml {NS} name="claim" initial="open">
  <datamodel><data id="notes" expr="0"/><data id="fraud_checks" expr="0"/></datamodel>
  <parallel id="open">
    <state id="review" initial="reading">
      <state id="reading"><transition event="note"><assign location="notes" expr="notes + 1"/>
      </transition></state>
    </state>
    <state id="fraud" initial="waiting">
      <onentry><assign location="fraud_checks" expr="fraud_checks + 1"/></onentry>
      <state id="waiting">
        <onentry><send id="nudge" event="fraud.nudge" delay="1d"/></onentry>
        <transition event="migrated" target="waiting"/>
      </state>
    </state>
  </parallel>
</scxml>"""


def set_fraud_checks(datamodel: dict[str, Any], context: TransformContext) -> dict[str, Any]:
    return {**datamodel, "fraud_checks": 0}


def test_the_report_and_the_history_say_what_did_not_run(statecharts: Workbench) -> None:
    execution = statecharts.start(statecharts.load(V1))
    v2 = Chart.objects.load(V2, new_version=True)
    plan = MigrationPlan.make(v2)
    [report] = list(dry_run(plan))
    assert report.verdict is Verdict.MIGRATES
    assert report.entered == ["fraud", "waiting"]
    assert report.onentry_not_run == ["fraud", "waiting"]
    assert report.data_not_set == ["fraud_checks"]
    assert report.to_dict()["onentry_not_run"] == ["fraud", "waiting"]

    [done] = list(migrate(plan, now=statecharts.now))
    assert done.onentry_not_run == ["fraud", "waiting"]
    execution = statecharts.refresh(execution)
    statecharts.assert_in_state(execution, "reading", "waiting")
    # No chart code ran: no timer from <onentry>, no variable from <data>.
    assert not Timer.objects.filter(execution=execution).exists()
    assert "fraud_checks" not in statecharts.datamodel(execution)
    [effect] = execution.history.order_by("-seq").first().effects
    assert effect["onentry_not_run"] == ["fraud", "waiting"]
    assert effect["data_not_set"] == ["fraud_checks"]
    assert replay(execution).ok


def test_a_transform_sets_the_data_and_an_event_runs_the_entry_in_a_real_step(
    statecharts: Workbench,
) -> None:
    execution = statecharts.start(statecharts.load(V1))
    v2 = Chart.objects.load(V2, new_version=True)
    transforms = {"MIGRATION_TRANSFORMS": {"fraud": f"{__name__}.set_fraud_checks"}}
    with override_settings(STATECHARTS=transforms):
        [done] = list(migrate(MigrationPlan.make(v2, transform="fraud"), now=statecharts.now))
    assert done.data_not_set == []
    # The recipe: the new version reacts to an event by (re-)entering the state, so its
    # <onentry> runs in a step like any other, its timer scheduled and recorded.
    statecharts.send(execution, "migrated")
    [timer] = statecharts.pending_timers(execution)
    assert timer.event["name"] == "fraud.nudge"
    assert statecharts.datamodel(execution)["fraud_checks"] == 0  # (only "waiting" re-entered)
    assert replay(Execution.objects.get(pk=execution.pk)).ok


def test_the_command_notes_what_did_not_run(statecharts: Workbench) -> None:
    for _ in range(2):
        statecharts.start(statecharts.load(V1))
    Chart.objects.load(V2, new_version=True)
    out = io.StringIO()
    call_command("statechart", "migrate", "claim", "--dry-run", stdout=out)
    text = out.getvalue()
    assert "note: entered without running their <onentry> (executions): fraud (2), waiting (2)" in (
        text
    )
    assert "note: declared by the target but not in the datamodel (executions): " \
        "fraud_checks (2); a --transform sets them" in text
    out = io.StringIO()
    call_command("statechart", "migrate", "claim", "--json", stdout=out)
    document = json.loads(out.getvalue())
    assert document["onentry_not_run"] == {"fraud": 2, "waiting": 2}
    assert document["data_not_set"] == {"fraud_checks": 2}
