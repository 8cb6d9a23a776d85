"""``statechart health`` (statecharts.operations.health): every app's figures, thresholds from
settings,
and an exit status a monitor can read (0 ok, 1 warning, 2 critical)."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from typing import Any

import pytest
from django.core.checks import run_checks
from django.core.management import call_command
from django.test import override_settings
from django.utils import timezone
from django_q.models import Schedule, Task

from statecharts.models import Execution, OutboxMessage
from statecharts.operations import health, retention
from statecharts.stepper import sweeper
from tests.operations.world import signup
from timers import dispatch
from timers.models import Timer, TimerStatus

pytestmark = pytest.mark.django_db


@pytest.fixture
def schedules() -> None:
    """Every app's schedule in place, its next run a minute ahead (a live cluster's look)."""
    sweeper.ensure_schedule()
    dispatch.ensure_schedule()
    retention.ensure_schedule_after_migrate(sender=None, using="default")
    Schedule.objects.update(next_run=timezone.now() + timedelta(minutes=1))


def figures(report: health.HealthReport) -> dict[str, health.Assessed]:
    return {assessed.figure.name: assessed for assessed in report.figures}


def run_health(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    try:
        call_command("statechart", "health", *args, stdout=out)
    except SystemExit as exit:
        return int(exit.code or 0), out.getvalue()
    return 0, out.getvalue()


def test_a_quiet_site_is_healthy_and_every_app_reports(schedules: None) -> None:
    signup("k")
    code, text = run_health()
    assert code == 0, text
    assert text.startswith("health: OK")
    report = figures(health.assess())
    assert report["executions.active"].figure.value == 1
    assert report["timers.pending"].figure.value == 1
    for name in (
        "outbox.pending",
        "timers.oldest_overdue_seconds",
        "invocations.open_handlers",
        "schedules.outbox_sweep.late_seconds",
        "schedules.timers_sweep.late_seconds",
        "schedules.invocations_sweep.late_seconds",
        "schedules.prune.late_seconds",
    ):
        assert report[name].level is health.Level.OK, name


def test_an_overdue_timer_is_a_warning_then_critical_and_thresholds_come_from_settings(
    schedules: None,
) -> None:
    execution = signup("k")
    timer = Timer.objects.get()
    now = timezone.now()
    Timer.objects.filter(pk=timer.pk).update(due=now - timedelta(seconds=90))
    overdue = figures(health.assess(now))["timers.oldest_overdue_seconds"]
    assert overdue.level is health.Level.WARNING and overdue.figure.value == 90.0
    assert f"timer {timer.pk} (nudge) of execution {execution.pk}" in overdue.figure.detail
    assert figures(health.assess(now))["timers.due"].figure.value == 1
    code, text = run_health()
    assert code == 1 and text.startswith("health: WARNING")
    Timer.objects.filter(pk=timer.pk).update(due=now - timedelta(minutes=20))
    assert run_health()[0] == 2
    relaxed = {"timers.oldest_overdue_seconds": {"warning": 3600, "critical": None}}
    with override_settings(STATECHARTS={"HEALTH_THRESHOLDS": relaxed}):
        assert run_health()[0] == 0


def test_what_needs_an_operator_is_a_warning(schedules: None) -> None:
    held = signup("held")
    Execution.objects.filter(pk=held.pk).update(status="needs_repair")
    failing = signup("failing")
    Timer.objects.filter(execution=failing).update(status=TimerStatus.FAILED)
    undecodable = signup("undecodable")
    Timer.objects.filter(execution=undecodable).update(
        status=TimerStatus.DISCARDED, reason="undecodable: no such target kind"
    )
    finished = signup("finished")
    Timer.objects.filter(execution=finished).update(status=TimerStatus.FAILED)
    Execution.objects.filter(pk=finished.pk).update(status="completed")  # (moot: not counted)
    report = figures(health.assess())
    assert report["executions.held"].figure.value == 1
    assert report["executions.needs_repair"].figure.value == 1
    assert report["timers.failed"].figure.value == 1
    assert report["timers.undecodable"].figure.value == 1
    for name in ("executions.held", "timers.failed", "timers.undecodable"):
        assert report[name].level is health.Level.WARNING, name


def test_the_outbox_backlog_and_failing_deliveries(schedules: None) -> None:
    sender = signup("sender")
    now = timezone.now()
    message = OutboxMessage.objects.create(
        sender=sender,
        kind="someone.elses",  # a kind nobody here delivers: it stays pending
        target_session_id="x",
        event={"name": "hello"},
        created=now - timedelta(minutes=10),
        last_error="RuntimeError: down",
    )
    report = figures(health.assess(now))
    assert report["outbox.pending"].figure.value == 1
    oldest = report["outbox.oldest_pending_seconds"]
    assert oldest.figure.value == 600.0 and oldest.level is health.Level.WARNING
    assert f"message {message.pk}" in oldest.figure.detail
    assert report["outbox.failing"].level is health.Level.WARNING


def test_sweeper_liveness_from_the_django_q2_schedules(schedules: None) -> None:
    now = timezone.now()
    Schedule.objects.filter(name=dispatch.SCHEDULE_NAME).update(
        next_run=now - timedelta(minutes=15)
    )
    late = figures(health.assess(now))["schedules.timers_sweep.late_seconds"]
    assert late.level is health.Level.CRITICAL and late.figure.value == 900.0
    Schedule.objects.filter(name=dispatch.SCHEDULE_NAME).update(next_run=now)
    # The last run failed: a warning, with what it said.
    Task.objects.create(
        id="t1", name="t1", func=sweeper.SWEEP, started=now, stopped=now, success=False,
        result="OperationalError: gone",
    )  # fmt: skip
    Schedule.objects.filter(name=sweeper.SCHEDULE_NAME).update(task="t1")
    failed = figures(health.assess(now))["schedules.outbox_sweep.late_seconds"]
    assert failed.level is health.Level.WARNING
    assert "failed: OperationalError" in failed.figure.detail
    Schedule.objects.filter(name=retention.SCHEDULE_NAME).delete()
    missing = figures(health.assess(now))["schedules.prune.late_seconds"]
    assert missing.level is health.Level.CRITICAL and "does not exist" in missing.figure.detail
    assert run_health()[0] == 2


def test_a_check_that_raises_is_critical_and_the_others_are_still_measured(
    schedules: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(now: Any) -> list[health.Figure]:
        raise RuntimeError("the table is gone")

    monkeypatch.setitem(
        health._checks, "timers", health.HealthCheck("timers", "timers", broken)
    )
    report = figures(health.assess())
    failure = report["timers.check"]
    assert failure.level is health.Level.CRITICAL
    assert "RuntimeError: the table is gone" in failure.figure.detail
    assert "outbox.pending" in report and "invocations.overdue" in report


def test_the_json_document_for_monitoring(schedules: None) -> None:
    code, text = run_health("--json")
    document = json.loads(text)
    assert code == 0 and document["status"] == "ok"
    (overdue,) = [f for f in document["figures"] if f["name"] == "timers.oldest_overdue_seconds"]
    assert overdue == {
        "name": "timers.oldest_overdue_seconds",
        "value": 0.0,
        "unit": "s",
        "level": "ok",
        "detail": "",
        "thresholds": {"warning": 60, "critical": 600},
    }


def test_bad_retention_and_threshold_settings_are_refused_by_the_system_checks() -> None:
    settings = {
        "EXECUTION_RETENTION_DAYS": 0,
        "HISTORY_RETENTION_DAYS": "30",
        "PRUNE_SCHEDULED": "yes",
        "HEALTH_THRESHOLDS": {"timers.due": {"warning": "many"}, "x": {"alarm": 1}},
    }
    with override_settings(STATECHARTS=settings):
        ids = sorted(message.id for message in run_checks())
    assert ids.count("statecharts.E006") == 3 and ids.count("statecharts.E007") == 2
    with override_settings(STATECHARTS={"EXECUTION_RETENTION_DAYS": 0.5}):
        assert not [m for m in run_checks() if m.id.startswith("statecharts.E")]


def test_the_hourly_prune_is_scheduled_on_migrate_and_obeys_its_setting() -> None:
    (schedule,) = Schedule.objects.filter(name=retention.SCHEDULE_NAME)  # made by migrate
    assert (schedule.func, schedule.minutes) == (retention.SCHEDULED_PRUNE, 60)
    assert "executions" in retention.scheduled_prune()
    with override_settings(STATECHARTS={"PRUNE_SCHEDULED": False}):
        assert retention.scheduled_prune() == {
            "skipped": "STATECHARTS['PRUNE_SCHEDULED'] is False"
        }
    assert 0 < retention.task_budget() <= 300
