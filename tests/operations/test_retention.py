"""Retention (statecharts.operations.retention, ``statechart prune``): what is pruned, in batches,
and
what never is: anything of an execution that may still step, and any unsettled row."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from invocations.models import Invocation
from statecharts import stepper
from statecharts.models import AppliedMessage, Chart, Execution, HistoryEntry, OutboxMessage
from statecharts.models.outbox import OutboxStatus
from statecharts.operations import retention
from statecharts.operations.replay import Verdict, replay
from tests.operations.world import NS, T0, World, signup, world
from timers.models import Timer, TimerStatus
from timers.pruning import prune as prune_timers

pytestmark = pytest.mark.django_db

LATER = T0 + timedelta(days=100)
DAY = timedelta(days=1)
EVERYTHING = {"executions": DAY, "history": DAY, "outbox": DAY, "timers": DAY, "invocations": DAY}


def rows_of(execution: Execution) -> dict[str, int]:
    """Every row anyone keeps about ``execution``."""
    return {
        "execution": Execution.objects.filter(pk=execution.pk).count(),
        "history": HistoryEntry.objects.filter(execution_id=execution.pk).count(),
        "outbox": OutboxMessage.objects.filter(sender_id=execution.pk).count(),
        "applied": AppliedMessage.objects.filter(execution_id=execution.pk).count(),
        "timers": Timer.objects.filter(execution_id=execution.pk).count(),
        "invocations": Invocation.objects.filter(parent_id=execution.pk).count(),
    }


def hold(w: World) -> None:
    """Make the two holding executions hold an unsettled row."""
    Timer.objects.filter(execution=w.holding_timer).update(status=TimerStatus.PENDING, settled=None)
    OutboxMessage.objects.filter(sender=w.holding_message).update(
        status=OutboxStatus.PENDING, delivered=None
    )


def test_pruning_keeps_every_row_of_executions_that_may_still_step_and_every_unsettled_row() -> (
    None
):
    w = world()
    hold(w)
    kept = {e.pk: rows_of(e) for e in (w.peer, w.live, w.halted)}
    assert kept[w.live.pk]["timers"] == 1 and kept[w.live.pk]["outbox"] == 1  # settled, old
    assert kept[w.peer.pk]["applied"] == 3  # it applied three messages
    held_timer = rows_of(w.holding_timer)
    held_message = rows_of(w.holding_message)
    assert rows_of(w.finished)["outbox"] == 1 and rows_of(w.finished)["timers"] == 1

    report = retention.prune(now=LATER, retention=EVERYTHING)

    for pk, rows in kept.items():  # live, halted, and the peer: untouched
        assert rows_of(Execution(pk=pk)) == rows
    assert rows_of(w.finished) == dict.fromkeys(held_timer, 0)  # gone, with all its rows
    # Held: the execution and its unsettled row stay (its history may go, with a marker).
    assert Timer.objects.get(execution=w.holding_timer).status == TimerStatus.PENDING
    assert Execution.objects.filter(pk=w.holding_timer.pk).exists()
    assert OutboxMessage.objects.get(sender=w.holding_message).status == OutboxStatus.PENDING
    assert rows_of(w.holding_message)["execution"] == 1
    assert held_timer["timers"] == held_message["outbox"] == 1
    by_stage = {stage.name: stage for stage in report.stages}
    assert by_stage["executions"].deleted >= 1 and report.complete


def test_nothing_is_pruned_before_its_retention_and_executions_are_kept_forever_by_default() -> (
    None
):
    w = world()
    before = {e.pk: rows_of(e) for e in (w.finished, w.live)}
    report = retention.prune(now=T0 + 10 * DAY)  # defaults: 30 days; executions forever
    assert report.deleted == 0
    assert {e.pk: rows_of(e) for e in (w.finished, w.live)} == before
    stages = {stage.name: stage for stage in report.stages}
    assert stages["executions"].retention is None and "forever" in str(stages["executions"])
    later = retention.prune(now=LATER)  # 30 days on: settled timers and messages go
    deleted = {stage.name: stage.deleted for stage in later.stages}
    assert deleted == {
        "executions": 0, "history": 0, "outbox": 2, "timers": 3, "invocations": 0,
        "route_deliveries": 0,
    }
    assert rows_of(w.finished)["timers"] == 0 and rows_of(w.finished)["execution"] == 1
    assert rows_of(w.live) == before[w.live.pk]


def test_settled_messages_of_finished_senders_are_pruned_after_the_outbox_retention() -> None:
    w = world()
    retention.prune(now=LATER, only=["outbox"], retention={"outbox": DAY})
    assert rows_of(w.finished)["outbox"] == 0
    assert rows_of(w.holding_message)["outbox"] == 0  # delivered, its sender finished
    assert rows_of(w.live)["outbox"] == 1  # its sender may still step
    assert rows_of(w.peer)["applied"] == 3  # the target's records are the target's


def test_history_pruning_leaves_a_marker_and_replay_reports_it() -> None:
    w = world()
    steps_before = Execution.objects.get(pk=w.finished.pk).steps
    retention.prune(now=LATER, only=["history"], retention={"history": DAY})
    (marker,) = HistoryEntry.objects.filter(execution=w.finished)
    assert marker.disposition == "pruned" and marker.seq == steps_before + 1
    assert "history pruned: 3 entries" in marker.reason
    report = replay(w.finished)
    assert report.verdict is Verdict.PRUNED and not report.ok and not report.diverged
    assert "not replayed: history pruned" in str(report)
    assert replay(w.live.pk).ok  # live: its history is whole
    # Pruning again changes nothing (the marker is not history to prune).
    assert retention.prune(now=LATER, only=["history"], retention={"history": DAY}).deleted == 0
    execution = Execution.objects.get(pk=w.finished.pk)
    assert execution.steps == steps_before + 1
    # A later input is recorded after the marker, as for any finished execution.
    assert stepper.send(execution, "signed_up").disposition == "discarded"


def test_batches_are_bounded_and_each_is_its_own_transaction() -> None:
    executions = [signup(f"k{n}") for n in range(5)]
    for execution in executions:
        stepper.send(execution, "signed_up", now=T0)  # two history rows each
    seen: list[tuple[str, int, int]] = []

    def progress(stage: retention.StageReport) -> None:
        seen.append((stage.name, stage.deleted, stage.batches))

    with CaptureQueriesContext(connection) as queries:
        report = retention.prune(
            now=LATER,
            only=["executions"],
            retention={"executions": DAY},
            batch=4,
            progress=progress,
        )
    # A batch takes executions while their history stays within the batch size: two here.
    assert [batches for _, _, batches in seen] == [1, 2, 3]
    # One transaction per batch (a savepoint inside the test's own), and one that found
    # nothing left.
    opened = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("SAVEPOINT")]
    assert len(opened) == 4
    assert Execution.objects.count() == 0
    assert report.stages[0].deleted == sum(1 + 2 + 1 for _ in executions)  # row, history, timer
    with pytest.raises(ValueError, match="at least 1"):
        retention.prune(batch=0)
    with pytest.raises(ValueError, match="no retention stage named 'nope'"):
        retention.prune(only=["nope"])


def test_a_deadline_stops_between_batches_and_the_next_run_carries_on() -> None:
    for n in range(3):
        stepper.send(signup(f"k{n}"), "signed_up", now=T0)
    ticks = iter([0.0, 5.0, 5.0])  # the second batch would start past the deadline
    report = retention.prune(
        now=LATER,
        only=["executions"],
        retention={"executions": DAY},
        batch=2,
        deadline=1.0,
        monotonic=lambda: next(ticks),
    )
    assert not report.complete and Execution.objects.count() == 2
    assert "stopped: out of time" in str(report.stages[0])
    retention.prune(now=LATER, only=["executions"], retention={"executions": DAY})
    assert Execution.objects.count() == 0


def test_an_open_invocation_holds_its_finished_parent() -> None:
    parent = stepper.start(Chart.objects.load(INVOKER), now=T0)
    (invocation,) = Invocation.objects.filter(parent=parent)
    stepper.send(parent, "finish", now=T0)  # leaving the state cancels the child
    invocation.refresh_from_db()
    assert invocation.status == "cancelled"
    Invocation.objects.filter(pk=invocation.pk).update(status="active")  # (still closing)
    retention.prune(now=LATER, only=["executions"], retention={"executions": DAY})
    assert Execution.objects.filter(pk=parent.pk).exists()  # held
    Invocation.objects.filter(pk=invocation.pk).update(status="cancelled", updated=T0)
    retention.prune(now=LATER, only=["executions"], retention={"executions": DAY})
    assert not Execution.objects.filter(pk=parent.pk).exists()
    assert not Invocation.objects.filter(parent_id=parent.pk).exists()


def test_settled_invocations_of_finished_parents_are_pruned_after_their_retention() -> None:
    parent = stepper.start(Chart.objects.load(INVOKER), now=T0)
    live_parent = stepper.start(Chart.objects.load(INVOKER), now=T0)
    stepper.send(parent, "finish", now=T0)
    Invocation.objects.update(updated=T0)
    retention.prune(now=LATER, only=["invocations"], retention={"invocations": DAY})
    assert not Invocation.objects.filter(parent=parent).exists()
    assert Invocation.objects.filter(parent=live_parent).exists()  # open, its parent live


INVOKER = f"""<scxml {NS} initial="working">
  <state id="working">
    <invoke id="kid" type="scxml"><content><scxml {NS} initial="w"><state id="w"/></scxml>
    </content></invoke>
    <transition event="finish" target="end"/>
  </state>
  <final id="end"/>
</scxml>"""


def test_the_timers_function_and_the_prune_command_prune_timers() -> None:
    w = world()
    assert prune_timers(now=LATER, retention=DAY) == 3  # the three finished executions'
    assert rows_of(w.live)["timers"] == rows_of(w.halted)["timers"] == 1
    Timer.objects.filter(execution=w.live).update(execution_id=999_999)  # an orphan
    out, err = io.StringIO(), io.StringIO()
    with override_settings(STATECHARTS={"CLOCK": lambda: LATER}):
        call_command(
            "statechart", "prune", "--only", "timers", "--days", "timers=0", stdout=out, stderr=err
        )
    assert "timers: 1 row(s) deleted" in out.getvalue()
    assert not Timer.objects.filter(execution_id=999_999).exists()


def test_the_prune_command_reports_each_stage_and_refuses_what_it_does_not_know() -> None:
    world()
    out = io.StringIO()
    call_command("statechart", "prune", "--dry-run", "--days", "executions=1", stdout=out)
    text = out.getvalue()
    assert "executions: 0 row(s) would be deleted (older than 1 day)" in text
    assert "dry run: nothing was deleted" in text
    assert Execution.objects.count() == 6
    out = io.StringIO()
    with override_settings(STATECHARTS={"CLOCK": lambda: LATER}):
        call_command(
            "statechart", "prune", "--days", "executions=1", "--only", "executions",
            "-v", "2", stdout=out,
        )  # fmt: skip
    text = out.getvalue()
    assert "  executions: " in text and "batch 1" in text  # the progress, one line a batch
    assert "deleted " in text.splitlines()[-1]
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="no retention stage named 'nope'"):
        call_command("statechart", "prune", "--only", "nope")
    with pytest.raises(CommandError):
        call_command("statechart", "prune", "--days", "timers=soon")


@pytest.mark.postgres
def test_every_batch_locks_the_executions_before_it_deletes_their_rows() -> None:
    w = world()
    with CaptureQueriesContext(connection) as queries:
        retention.prune(now=LATER, retention=EVERYTHING)
    statements = [q["sql"] for q in queries.captured_queries]
    deletes = [i for i, sql in enumerate(statements) if sql.startswith("DELETE")]
    assert deletes
    for index in deletes:
        # Within the batch's transaction (since its SAVEPOINT/BEGIN), a FOR UPDATE came first.
        start = max(
            i for i in range(index) if statements[i].startswith(("SAVEPOINT", "BEGIN"))
        )
        assert any("FOR UPDATE" in sql for sql in statements[start:index]), statements[index]
    assert rows_of(w.live)["execution"] == 1
