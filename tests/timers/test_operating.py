"""An operator's actions on one pending timer (timers.operating): fire now, cancel,
reschedule; each a transaction under the execution's lock with an ``operated`` history
entry; refused in the refusal table's words when the timer is not pending. The doors (admin,
API, command) are in test_operating_doors.py; the race with a firer on PostgreSQL below."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from statecharts import stepper
from statecharts.models import Chart, Execution, HistoryEntry
from statecharts.models.history import Disposition
from statecharts.policies import refusals
from statecharts.policies.validation import InvalidInput
from timers import firing, operating
from timers.models import Timer, TimerStatus

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0"'
WAITER = f"""<scxml {NS} datamodel="null" initial="waiting">
  <state id="waiting">
    <onentry><send id="nudge" event="nudge" delay="1h"/></onentry>
    <transition event="nudge" target="nudged"/>
    <transition event="stop" target="done"/>
  </state>
  <state id="nudged"/>
  <final id="done"/>
</scxml>"""
OPERATOR = {"door": "command", "user": {"id": 1, "username": "ops"}}


def started() -> tuple[Execution, Timer]:
    execution = stepper.start(Chart.objects.load(WAITER), now=T0)
    return execution, Timer.objects.get(execution=execution)


def operated(execution: Execution) -> HistoryEntry:
    return HistoryEntry.objects.get(execution=execution, disposition=Disposition.OPERATED)


@pytest.mark.django_db
def test_fire_now_delivers_a_pending_timer_through_the_fire_path_and_records_the_operator() -> None:
    execution, timer = started()
    now = T0 + timedelta(minutes=5)  # long before it is due
    outcome = operating.fire_now(
        timer.pk, reason="customer waiting", caller_context=OPERATOR, now=now
    )
    assert outcome == firing.FIRED
    timer.refresh_from_db()
    execution.refresh_from_db()
    assert (timer.status, timer.due, timer.settled) == (TimerStatus.FIRED, now, now)
    assert execution.configuration == ["nudged"]
    entries = list(execution.history.order_by("seq").values_list("seq", "disposition", "cause"))
    assert entries[1][1:] == (Disposition.APPLIED, {"timer": timer.pk, "ordinal": timer.ordinal,
                                                    "scheduled_in": 1})  # fmt: skip
    entry = operated(execution)
    assert entry.seq == 3 == execution.steps
    assert entry.input == {
        "kind": "operation",
        "action": "fire_now",
        "row": {"timer": timer.pk, "send_id": "nudge", "outcome": "fired"},
    }
    assert (entry.reason, entry.caller_context) == ("customer waiting", OPERATOR)
    # The firer finds nothing left to fire.
    assert firing.fire(timer.pk, now=T0 + 2 * HOUR) == firing.SKIPPED


@pytest.mark.django_db
def test_fire_now_of_a_finished_executions_timer_discards_it_as_any_fire_would() -> None:
    execution, timer = started()
    Timer.objects.filter(pk=timer.pk).update(status=TimerStatus.PENDING)
    # Finished without the receiver that discards pending timers: the fire's liveness check.
    Execution.objects.filter(pk=execution.pk).update(status="completed")
    assert operating.fire_now(timer.pk, reason="why not", now=T0) == firing.DISCARDED
    timer.refresh_from_db()
    assert timer.status == TimerStatus.DISCARDED
    assert operated(execution).input["row"]["outcome"] == "discarded"


@pytest.mark.django_db
def test_cancel_settles_the_timer_and_names_the_operator() -> None:
    execution, timer = started()
    assert operating.cancel(timer.pk, reason="duplicate", caller_context=OPERATOR, now=T0) == (
        "cancelled"
    )
    timer.refresh_from_db()
    assert timer.status == TimerStatus.CANCELLED
    assert timer.reason == "cancelled by an operator: duplicate"
    assert timer.cancelled_by == {"operator": True, "reason": "duplicate", "context": OPERATOR}
    assert operated(execution).input["action"] == "cancel"
    assert firing.fire(timer.pk, now=T0 + 2 * HOUR) == firing.SKIPPED
    execution.refresh_from_db()
    assert execution.configuration == ["waiting"]


@pytest.mark.django_db
def test_reschedule_keeps_the_timer_and_its_key_and_moves_its_due_time() -> None:
    execution, timer = started()
    later = T0 + 5 * HOUR
    assert operating.reschedule(timer.pk, later, reason="after the outage", now=T0) == (
        "rescheduled"
    )
    moved = Timer.objects.get(pk=timer.pk)
    assert (moved.status, moved.due, moved.ordinal, moved.send_id) == (
        TimerStatus.PENDING, later, timer.ordinal, timer.send_id)  # fmt: skip
    assert operated(execution).input["row"]["due"] == later.isoformat()
    assert firing.fire(timer.pk, now=T0 + 2 * HOUR) == firing.SKIPPED  # not due any more
    assert firing.fire(timer.pk, now=later) == firing.FIRED


@pytest.mark.django_db
@pytest.mark.parametrize("action", ["fire_now", "cancel", "reschedule"])
def test_a_timer_that_is_not_pending_is_refused_in_the_refusal_tables_words(action: str) -> None:
    execution, timer = started()
    operating.cancel(timer.pk, reason="first", now=T0)
    with pytest.raises(operating.NotActionable) as refused:
        if action == "reschedule":
            operating.reschedule(timer.pk, T0 + HOUR, reason="again", now=T0)
        else:
            getattr(operating, action)(timer.pk, reason="again", now=T0)
    refusal = refusals.refusal(refused.value)
    assert refusal is not None and refusal.reason is refusals.Reason.REFUSED
    assert "timer" in refusal.detail and "is cancelled" in refusal.detail
    # Nothing recorded for the refused action: only the first cancel's entry.
    assert (
        HistoryEntry.objects.filter(execution=execution, disposition=Disposition.OPERATED).count()
        == 1
    )


@pytest.mark.django_db
def test_a_reason_is_required_and_a_missing_timer_is_not_found() -> None:
    _, timer = started()
    with pytest.raises(InvalidInput):
        operating.cancel(timer.pk, reason="  ", now=T0)
    with pytest.raises(InvalidInput):
        operating.reschedule(timer.pk, datetime(2030, 1, 1), reason="naive", now=T0)
    assert Timer.objects.get(pk=timer.pk).status == TimerStatus.PENDING
    with pytest.raises(Timer.DoesNotExist) as missing:
        operating.cancel(timer.pk + 1000, reason="gone", now=T0)
    refusal = refusals.refusal(missing.value)
    assert refusal is not None and refusal.reason is refusals.Reason.NOT_FOUND


@pytest.mark.django_db
def test_fire_now_whose_delivery_raises_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    _, timer = started()

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("target down")

    monkeypatch.setattr(stepper, "perform_delivery", broken)
    with pytest.raises(operating.FireFailed, match="target down"):
        operating.fire_now(timer.pk, reason="try", now=T0)
    after = Timer.objects.get(pk=timer.pk)
    assert (after.status, after.due, after.attempts) == (TimerStatus.PENDING, timer.due, 0)
    assert not HistoryEntry.objects.filter(disposition=Disposition.OPERATED).exists()


RACE_TRIALS = 40


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("rival", ["fire", "cancel"])
def test_fire_now_racing_a_firer_or_a_cancel_gives_one_fate(rival: str) -> None:
    from tests.timers.test_timer_races import run_threads

    chart = Chart.objects.load(WAITER)
    pks = [stepper.start(chart, now=T0).pk for _ in range(RACE_TRIALS)]
    timer_of = dict(Timer.objects.filter(execution_id__in=pks).values_list("execution_id", "pk"))
    due = T0 + 2 * HOUR
    ours: dict[int, str] = {}
    theirs: dict[int, str] = {}
    barrier = threading.Barrier(2, timeout=60)

    def operator() -> None:
        for pk in pks:
            barrier.wait()
            try:
                ours[pk] = operating.fire_now(timer_of[pk], reason="race", now=due)
            except operating.NotActionable:
                ours[pk] = "refused"

    def other() -> None:
        for pk in pks:
            barrier.wait()
            try:
                if rival == "fire":
                    theirs[pk] = firing.fire(timer_of[pk], now=due)
                else:
                    theirs[pk] = operating.cancel(timer_of[pk], reason="race", now=due)
            except operating.NotActionable:
                theirs[pk] = "refused"

    assert run_threads([operator, other], [barrier]) == []
    for pk in pks:
        timer = Timer.objects.get(pk=timer_of[pk])
        nudges = [
            entry.input
            for entry in HistoryEntry.objects.filter(execution_id=pk, disposition="applied")
            if (entry.input.get("event") or {}).get("name") == "nudge"
        ]
        fates = {ours[pk], theirs[pk]}
        if rival == "fire":
            # Exactly one of the two delivered it, once; the other found it settled.
            assert timer.status == TimerStatus.FIRED
            assert len(nudges) == 1, pk
            assert fates in ({"fired", "refused"}, {"fired", "skipped"}), fates
        else:
            assert fates == {"fired", "refused"} or fates == {"cancelled", "refused"}, fates
            assert timer.status == (
                TimerStatus.FIRED if ours[pk] == "fired" else TimerStatus.CANCELLED
            )
            assert len(nudges) == (1 if ours[pk] == "fired" else 0), pk
        # One operator entry per action that was not refused (the operator's, the canceller's).
        expected = 1 if rival == "cancel" or ours[pk] != "refused" else 0
        assert (
            HistoryEntry.objects.filter(execution_id=pk, disposition=Disposition.OPERATED).count()
            == expected
        )
