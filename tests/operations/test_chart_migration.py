"""Migrating running executions to a new chart version (statecharts.operations.chart_migration)."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from statecharts import stepper
from statecharts.exceptions import Halted, NeedsMigration
from statecharts.models import Chart, Execution
from statecharts.models.history import Disposition
from statecharts.operations.chart_migration import (
    MigrationPlan,
    PlanError,
    Verdict,
    dry_run,
    migrate,
)
from statecharts.operations.chart_migration.applying import TransformContext
from statecharts.operations.replay import replay
from statecharts.testing import Workbench
from timers.models import Timer, TimerStatus

pytestmark = pytest.mark.django_db

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'

# A parallel state with a history state in one region, a timer in another, a datamodel.
V1 = f"""<scxml {NS} name="parcel" initial="handling">
  <datamodel><data id="reminders" expr="0"/><data id="pongs" expr="0"/></datamodel>
  <parallel id="handling">
    <transition event="ping"><send event="pong" delay="2h"/></transition>
    <transition event="pong"><assign location="pongs" expr="pongs + 1"/></transition>
    <state id="billing" initial="unbilled">
      <history id="billing_h" type="shallow"><transition target="unbilled"/></history>
      <transition event="recheck" target="billing_h"/>
      <state id="unbilled"><transition event="bill" target="billed"/></state>
      <state id="billed"/>
    </state>
    <state id="shipping" initial="packing">
      <state id="packing">
        <onentry><send id="remind" event="remind" delay="1h"/></onentry>
        <onexit><cancel sendid="remind"/></onexit>
        <transition event="remind" target="packing">
          <assign location="reminders" expr="reminders + 1"/>
        </transition>
        <transition event="ship" target="shipped"/>
      </state>
      <state id="shipped"/>
    </state>
  </parallel>
</scxml>"""

# "billed" is renamed "invoiced"; a third region, "insurance", is added.
V2 = V1.replace('"billed"', '"invoiced"').replace(
    """      <state id="shipped"/>
    </state>""",
    """      <state id="shipped"/>
    </state>
    <state id="insurance" initial="uninsured">
      <state id="uninsured"><transition event="insure" target="insured"/></state>
      <state id="insured"/>
    </state>""",
)


def a_parcel(bench: Workbench) -> Execution:
    """On V1: billed (remembered by billing_h too), packing, one pending reminder."""
    execution = bench.start(bench.load(V1))
    bench.send(execution, "bill")
    bench.send(execution, "recheck")  # exits billing (its history remembers "billed")
    bench.assert_in_state(execution, "billed", "packing")
    return bench.refresh(execution)


def test_a_parcel_moves_to_the_new_version_and_both_timers_fire_into_it(
    statecharts: Workbench,
) -> None:
    execution = a_parcel(statecharts)
    old_chart = execution.chart
    [old_timer] = statecharts.pending_timers(execution)
    v2 = Chart.objects.load(V2, new_version=True)
    assert v2.version == "2"
    plan = MigrationPlan.make(v2, {"billed": "invoiced"})

    [report] = list(dry_run(plan))
    assert report.verdict is Verdict.MIGRATES
    assert sorted(report.configuration) == ["invoiced", "packing", "uninsured"]
    assert report.entered == ["insurance", "uninsured"]
    assert statecharts.refresh(execution).chart == old_chart  # a dry run changes nothing

    [done] = list(migrate(plan, now=statecharts.now))
    assert done.verdict is Verdict.MIGRATED
    execution = statecharts.refresh(execution)
    assert execution.chart == v2 and execution.status == "active"
    statecharts.assert_in_state(execution, "invoiced", "packing", "uninsured", "insurance")
    entry = execution.history.order_by("-seq").first()
    assert entry.disposition == Disposition.MIGRATED and entry.seq == execution.steps
    assert entry.input["from"]["chart_id"] == old_chart.pk
    assert entry.input["to"]["chart_id"] == v2.pk
    assert entry.input["renames"] == {"billed": "invoiced"}
    assert Timer.objects.get(pk=old_timer.pk).status == TimerStatus.PENDING  # kept

    # The old timer fires into the new version; the reminder it schedules (a new ordinal,
    # since the counters came along) fires too.
    statecharts.advance(hours=1)
    assert Timer.objects.get(pk=old_timer.pk).status == TimerStatus.FIRED
    assert statecharts.datamodel(execution)["reminders"] == 1
    [new_timer] = statecharts.pending_timers(execution)
    assert new_timer.ordinal > old_timer.ordinal
    statecharts.advance(hours=1)
    assert statecharts.datamodel(execution)["reminders"] == 2
    assert Timer.objects.filter(execution=execution, status=TimerStatus.FIRED).count() == 2

    # The history value was mapped: leaving billing and coming back restores "invoiced".
    statecharts.send(execution, "recheck")
    statecharts.send(execution, "insure")
    statecharts.assert_in_state(execution, "invoiced", "insured")
    assert replay(execution).ok  # from the position the migration recorded

    # A re-run migrates nothing twice.
    assert [r.verdict for r in migrate(plan, [execution.pk])] == [Verdict.UP_TO_DATE]
    assert not list(dry_run(plan))  # and it is not a candidate any more


def test_counters_carry_over_so_a_timer_scheduled_after_the_migration_is_not_dropped(
    statecharts: Workbench,
) -> None:
    # Timers are inserted ignoring conflicts on the unique (execution, ordinal) key: with the
    # counters starting again, the "pong" scheduled after the migration would take ordinal 1,
    # the first reminder's (cancelled since), and silently never exist.
    execution = a_parcel(statecharts)
    first = Timer.objects.filter(execution=execution).order_by("ordinal").first()
    assert first.ordinal == 1 and first.status == TimerStatus.CANCELLED
    v2 = Chart.objects.load(V2, new_version=True)
    list(migrate(MigrationPlan.make(v2, {"billed": "invoiced"}), now=statecharts.now))
    statecharts.send(execution, "ping")
    pong = Timer.objects.get(execution=execution, event__name="pong")
    assert pong.status == TimerStatus.PENDING and pong.ordinal > first.ordinal
    statecharts.advance(hours=2)
    assert statecharts.datamodel(execution)["pongs"] == 1


def test_a_dry_run_says_per_execution_why_it_does_not_map(statecharts: Workbench) -> None:
    billed = a_parcel(statecharts)
    unbilled = statecharts.start(billed.chart)
    v2 = Chart.objects.load(V2, new_version=True)
    reports = {r.execution_id: r for r in dry_run(MigrationPlan.make(v2))}
    assert reports[unbilled.pk].verdict is Verdict.MIGRATES
    assert reports[billed.pk].verdict is Verdict.REFUSED
    assert "the active state 'billed' is not in the new version" in reports[billed.pk].reason
    results = {r.execution_id: r.verdict for r in migrate(MigrationPlan.make(v2))}
    assert results == {billed.pk: Verdict.REFUSED, unbilled.pk: Verdict.MIGRATED}
    assert statecharts.refresh(billed).chart == billed.chart  # left alone


def test_a_plan_is_checked_before_anything_is_looked_at(statecharts: Workbench) -> None:
    a_parcel(statecharts)
    v2 = Chart.objects.load(V2, new_version=True)
    with pytest.raises(PlanError, match="'nowhere', which parcel v2 does not have"):
        MigrationPlan.make(v2, {"billed": "nowhere"})
    with pytest.raises(PlanError, match="no datamodel transform is registered as 'shady'"):
        MigrationPlan.make(v2, {"billed": "invoiced"}, transform="shady")
    with pytest.raises(PlanError, match="has no name"):
        MigrationPlan.make(Chart.objects.load(V1.replace(' name="parcel"', "")))


def double_reminders(datamodel: dict[str, Any], context: TransformContext) -> dict[str, Any]:
    assert "invoiced" in context.configuration
    return {**datamodel, "reminders": datamodel["reminders"] * 10 + 1, "insurer": "acme"}


def test_a_registered_transform_changes_the_datamodel_and_replay_does_not_need_it(
    statecharts: Workbench,
) -> None:
    execution = a_parcel(statecharts)
    v2 = Chart.objects.load(V2, new_version=True)
    transforms = {"MIGRATION_TRANSFORMS": {"x10": f"{__name__}.double_reminders"}}
    with override_settings(STATECHARTS=transforms):
        list(migrate(MigrationPlan.make(v2, {"billed": "invoiced"}, "x10"), now=statecharts.now))
    assert statecharts.datamodel(execution) == {"reminders": 1, "pongs": 0, "insurer": "acme"}
    entry = statecharts.refresh(execution).history.order_by("-seq").first()
    assert entry.input["transform"] == "x10"
    assert replay(execution).ok  # the transform is not registered any more


def test_a_halted_execution_is_resumed_by_a_migration(statecharts: Workbench) -> None:
    looping = f"""<scxml {NS} name="loop" initial="idle">
      <state id="idle"><transition event="go" target="spin"/></state>
      <state id="spin"><transition cond="true" target="spin"/></state>
    </scxml>"""
    with override_settings(STATECHARTS={"ROUND_BUDGET": 50}):
        execution = statecharts.start(statecharts.load(looping))
        with pytest.raises(Halted):
            stepper.send(execution, "go")
    assert statecharts.refresh(execution).status == "halted"
    fixed = Chart.objects.load(
        looping.replace('<transition cond="true" target="spin"/>', "")
        .replace('<state id="idle">', '<state id="idle"><transition event="stop" target="end"/>')
        .replace("</scxml>", '<final id="end"/></scxml>'),
        new_version=True,
    )
    [report] = list(migrate(MigrationPlan.make(fixed), now=statecharts.now))
    assert report.verdict is Verdict.MIGRATED
    assert statecharts.refresh(execution).status == "active"
    statecharts.send(execution, "stop")
    assert statecharts.refresh(execution).status == "completed"


def test_the_command_migrates_with_a_summary_and_a_dry_run_changes_nothing(
    statecharts: Workbench,
) -> None:
    billed = a_parcel(statecharts)
    unbilled = statecharts.start(billed.chart)
    Chart.objects.load(V2, new_version=True)
    out = io.StringIO()
    # A dry run that would refuse an execution fails (exit status 1), so a script can gate on it.
    with pytest.raises(CommandError, match=r"1 execution\(s\) would not be migrated") as refused:
        call_command("statechart", "migrate", "parcel", "--dry-run", stdout=out)
    assert refused.value.returncode == 1
    text = out.getvalue()
    assert f"execution {billed.pk}: refused: the active state 'billed'" in text
    assert "dry run: 1 would migrate, 1 refused" in text
    assert statecharts.refresh(unbilled).chart == billed.chart
    # The same in JSON: the document, then the failure.
    out = io.StringIO()
    with pytest.raises(CommandError, match="would not be migrated"):
        call_command("statechart", "migrate", "parcel", "--dry-run", "--json", stdout=out)
    assert json.loads(out.getvalue())["counts"]["refused"] == 1
    # A dry run that would refuse nothing succeeds.
    out = io.StringIO()
    call_command(
        "statechart", "migrate", "parcel", "--map", "billed=invoiced", "--dry-run", stdout=out
    )
    assert "dry run: 2 would migrate, 0 refused" in out.getvalue()
    assert statecharts.refresh(unbilled).chart == billed.chart
    out = io.StringIO()
    call_command(
        "statechart", "migrate", "parcel", "--map", "billed=invoiced", "--json", stdout=out
    )
    summary = json.loads(out.getvalue())
    assert summary["counts"] == {"migrated": 2, "up_to_date": 0, "refused": 0}
    assert summary["to"]["version"] == "2"
    with pytest.raises(CommandError, match="--map takes OLD=NEW"):
        call_command("statechart", "migrate", "parcel", "--map", "billed")
    with pytest.raises(CommandError, match="'gone', which parcel v2 does not have"):
        call_command("statechart", "migrate", "parcel", "--map", "billed=gone")


def test_executions_of_other_charts_are_not_candidates(statecharts: Workbench) -> None:
    mine = a_parcel(statecharts)
    other = statecharts.start(statecharts.load(V1.replace('name="parcel"', 'name="crate"')))
    v2 = Chart.objects.load(V2, new_version=True)
    assert [e.pk for e in MigrationPlan.make(v2).executions()] == [mine.pk]
    [report] = list(migrate(MigrationPlan.make(v2), [other.pk]))  # asked for by id: refused
    assert report.verdict is Verdict.REFUSED
    assert report.reason == "it is an execution of crate v1, not of a version of 'parcel'"


def test_a_business_key_taken_on_the_target_is_refused(statecharts: Workbench) -> None:
    old = statecharts.start(statecharts.load(V1), business_key="p-1")
    v2 = Chart.objects.load(V2, new_version=True)
    statecharts.start(v2, business_key="p-1")
    [report] = list(dry_run(MigrationPlan.make(v2)))
    assert report.execution_id == old.pk and report.verdict is Verdict.REFUSED
    assert "has its business key 'p-1'" in report.reason


def test_a_migrated_execution_moves_on_after_hours(statecharts: Workbench) -> None:
    execution = a_parcel(statecharts)
    v2 = Chart.objects.load(V2, new_version=True)
    list(migrate(MigrationPlan.make(v2, {"billed": "invoiced"}), now=statecharts.now))
    statecharts.advance(timedelta(minutes=30))
    statecharts.send(execution, "ship")
    statecharts.assert_in_state(execution, "shipped", "invoiced", "uninsured")


def test_an_execution_needing_migration_is_cancelled_with_onexit_when_a_chart_decodes_it(
    statecharts: Workbench,
) -> None:
    execution = a_parcel(statecharts)
    v2 = Chart.objects.load(V2, new_version=True)
    Execution.objects.filter(pk=execution.pk).update(chart=v2)  # damage: the wrong chart
    with pytest.raises(NeedsMigration):
        stepper.send(execution, "ship", now=statecharts.now)
    assert statecharts.refresh(execution).status == "needs_migration"
    [timer] = statecharts.pending_timers(execution)
    stepper.cancel(execution, now=statecharts.now)
    execution = statecharts.refresh(execution)
    assert execution.status == "cancelled"
    assert not execution.failure_reason.startswith("cancelled without running chart code")
    # V1's <onexit> of "packing" ran (its <cancel> cancelled the reminder).
    assert Timer.objects.get(pk=timer.pk).status == TimerStatus.CANCELLED


def test_a_source_edited_in_place_is_migrated_from_the_configuration_its_row_kept(
    statecharts: Workbench,
) -> None:
    simple = f"""<scxml {NS} name="lamp" initial="off">
      <datamodel><data id="flips" expr="0"/></datamodel>
      <state id="off"><transition event="flip" target="on"/></state>
      <state id="on"><transition event="flip" target="off">
        <assign location="flips" expr="flips + 1"/></transition></state>
    </scxml>"""
    execution = statecharts.start(statecharts.load(simple))
    statecharts.send(execution, "flip")
    Chart.objects.filter(pk=execution.chart_id).update(source=simple.replace("flips + 1", "9"))
    with pytest.raises(NeedsMigration):
        stepper.send(execution, "flip", now=statecharts.now)
    fixed = Chart.objects.load(simple.replace('"on"', '"lit"'), new_version=True)
    [report] = list(migrate(MigrationPlan.make(fixed, {"on": "lit"}), now=statecharts.now))
    assert report.verdict is Verdict.MIGRATED, report.reason
    statecharts.send(execution, "flip")
    statecharts.assert_in_state(execution, "off")
    assert statecharts.datamodel(execution)["flips"] == 1


def api_client(*perms: str) -> Any:
    from django.contrib.auth.models import Permission, User
    from rest_framework.test import APIClient

    user = User.objects.create_user(f"user{len(perms)}", password="pw")
    for perm in perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_the_api_migrates_with_a_dry_run_first(statecharts: Workbench) -> None:
    execution = a_parcel(statecharts)
    Chart.objects.load(V2, new_version=True)
    url = "/api/executions/migrate/"
    reader = api_client("statecharts.view_execution")
    assert reader.post(url, {"chart": "parcel"}, format="json").status_code == 403
    api = api_client("statecharts.view_execution", "statecharts.change_execution")
    bad = api.post(url, {"chart": "parcel", "renames": {"billed": "gone"}}, format="json")
    assert bad.status_code == 400 and "does not have" in bad.json()["non_field_errors"][0]
    assert api.post(url, {"chart": "nothing"}, format="json").status_code == 400
    body = {"chart": "parcel@2", "renames": {"billed": "invoiced"}, "dry_run": True}
    preview = api.post(url, body, format="json").json()
    assert preview["counts"] == {"migrates": 1, "up_to_date": 0, "refused": 0}
    assert statecharts.refresh(execution).chart.version == "1"
    answer = api.post(url, {**body, "dry_run": False}, format="json")
    assert answer.status_code == 200
    [result] = answer.json()["results"]
    assert result["verdict"] == "migrated" and result["execution"] == execution.pk
    assert statecharts.refresh(execution).chart.version == "2"


def test_the_admin_action_previews_then_migrates(statecharts: Workbench, admin_client: Any) -> None:
    from django.urls import reverse

    execution = a_parcel(statecharts)
    v2 = Chart.objects.load(V2, new_version=True)
    url = reverse("admin:statecharts_execution_changelist")
    chosen = {"action": "migrate_selected", "_selected_action": [execution.pk]}
    page = admin_client.post(url, chosen).content.decode()
    assert "Migrate 1 execution(s) to parcel v2?" in page
    assert "refused: the active state &#x27;billed&#x27; is not in the new version" in page
    form = {**chosen, "post": "yes", "target": v2.pk, "renames": "billed=invoiced"}
    page = admin_client.post(url, {**form, "preview": "on"}).content.decode()
    assert "migrates -&gt; invoiced, packing, uninsured" in page
    assert statecharts.refresh(execution).chart == execution.chart  # a preview
    admin_client.post(url, form)
    assert statecharts.refresh(execution).chart == v2


def test_the_admin_action_answers_what_it_cannot_migrate(
    statecharts: Workbench, admin_client: Any
) -> None:
    """The action's other answers: executions of several charts are refused as a selection; a
    form with errors shows them, each execution where it stands; an execution the plan
    refuses is named in a message and left as it is."""
    from django.urls import reverse

    execution = a_parcel(statecharts)
    v2 = Chart.objects.load(V2, new_version=True)
    other = statecharts.start(statecharts.load(f'<scxml {NS} name="other"><state id="s"/></scxml>'))
    url = reverse("admin:statecharts_execution_changelist")

    def said(response: Any) -> list[str]:
        return [str(message) for message in response.context["messages"]]

    both = {"action": "migrate_selected", "_selected_action": [execution.pk, other.pk]}
    assert said(admin_client.post(url, both, follow=True)) == [
        "Select executions of one named chart to migrate them to another of its versions."
    ]
    chosen = {"action": "migrate_selected", "_selected_action": [execution.pk], "post": "yes"}
    bad = admin_client.post(url, {**chosen, "target": v2.pk, "renames": "billed"})
    page = bad.content.decode()
    assert "&#x27;billed&#x27; is not OLD=NEW" in page and "Migrate 1 execution(s)?" in page
    assert "status: active; in states billed, packing" in page
    refused = admin_client.post(url, {**chosen, "target": v2.pk}, follow=True)
    [why, summary] = said(refused)
    assert why.startswith(f"Execution {execution.pk}: the active state 'billed' is not in")
    assert summary == "Migrate to parcel v2: 1 refused."
    assert statecharts.refresh(execution).chart == execution.chart


def test_the_system_check_refuses_a_transform_that_cannot_be_imported() -> None:
    from statecharts.checks import check_settings

    with override_settings(STATECHARTS={"MIGRATION_TRANSFORMS": {"x": "no.such.thing"}}):
        [problem] = check_settings()
    assert "STATECHARTS['MIGRATION_TRANSFORMS']['x'] cannot be imported" in problem.msg
    with override_settings(STATECHARTS={"MIGRATION_TRANSFORMS": ["x"]}):
        [problem] = check_settings()
    assert problem.id == "statecharts.E008"


PARENT = f"""<scxml {NS} name="parent" initial="waiting">
  <state id="waiting">
    <invoke id="child" type="scxml"><content>
      <scxml {NS} initial="idle">
        <state id="idle"><transition event="finish" target="end"/></state>
        <final id="end"/>
      </scxml>
    </content></invoke>
    <transition event="done.invoke.child" target="finished"/>
  </state>
  <final id="finished"/>
</scxml>"""


def test_a_running_invocation_moves_with_its_state(statecharts: Workbench) -> None:
    parent = statecharts.start(statecharts.load(PARENT))
    child = Execution.objects.get(parent=parent)
    v2 = Chart.objects.load(PARENT.replace('"waiting"', '"pending"'), new_version=True)
    [report] = list(migrate(MigrationPlan.make(v2, {"waiting": "pending"}), now=statecharts.now))
    assert report.verdict is Verdict.MIGRATED, report.reason
    statecharts.send(child, "finish")  # its done.invoke reaches the parent on v2
    assert statecharts.refresh(parent).status == "completed"
    # A version whose state has no <invoke> any more cannot take the running invocation.
    parent = statecharts.start(v2)
    v3 = Chart.objects.load(
        PARENT.replace('"waiting"', '"pending"')
        .replace('<invoke id="child" type="scxml">', "<!--")
        .replace("</invoke>", "-->"),
        new_version=True,
    )
    [report] = list(dry_run(MigrationPlan.make(v3), [parent]))
    assert "which the new version's 'pending' does not have" in report.reason


@pytest.mark.parametrize(
    "body",
    [
        {"chart": "parcel", "renames": {"bill\x00ed": "invoiced"}},
        {"chart": "parcel", "renames": {"billed": "in\x00voiced"}},
        {"chart": "parcel", "renames": ["billed"]},
        {"chart": "parcel", "transform": "x" * 101},
        {"chart": "parcel", "executions": ["one"]},
        {"chart": "parcel", "executions": list(range(1, 502))},
        {"chart": "\x00"},
        {},
    ],
)
def test_the_api_answers_bad_migration_requests_with_400(
    statecharts: Workbench, body: dict[str, Any]
) -> None:
    a_parcel(statecharts)
    Chart.objects.load(V2, new_version=True)
    api = api_client("statecharts.view_execution", "statecharts.change_execution")
    response = api.post("/api/executions/migrate/", body, format="json")
    assert response.status_code == 400, response.content
    assert not Execution.objects.filter(chart__version="2").exists()


def test_the_command_shows_progress_on_long_runs(
    statecharts: Workbench, monkeypatch: pytest.MonkeyPatch
) -> None:
    from statecharts.management.statechart import migrate

    monkeypatch.setattr(migrate, "PROGRESS_FROM", 2)  # (long: 200 executions and more)
    chart = statecharts.load(V1)
    for _ in range(3):
        statecharts.start(chart)
    Chart.objects.load(V2, new_version=True)
    out = io.StringIO()
    call_command("statechart", "migrate", "parcel", stdout=out)
    lines = out.getvalue().splitlines()
    assert [line.split(":")[0] for line in lines[:3]] == ["1 of 3", "2 of 3", "3 of 3"]
    assert lines[-1].startswith("migrated 3 to parcel v2, 0 already there, 0 refused (")
