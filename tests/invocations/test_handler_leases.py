"""Handler starts under a lease and a fence token (invocations.leases): a start whose worker
died is started again once its lease runs out (by the sweepers' recovery, and by the timer
workers' heartbeat), a start that lost its claim writes nothing, and a start that never
finishes is not started forever. On an injected clock; the SIGKILL crash test is
tests/invocations/test_handler_crash.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import override_settings

from invocations import leases, tasks
from invocations.handlers import Answer, HandlerInvocation
from invocations.models import Invocation
from statecharts import stepper
from statecharts.core.position import decode
from statecharts.models import Chart, Execution
from timers.leases import Heartbeat

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2033, 6, 1, tzinfo=UTC)
LEASE = timedelta(seconds=3)
NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
CHART = f"""<scxml {NS} initial="working">
  <datamodel><data id="result" expr="null"/><data id="why" expr="null"/></datamodel>
  <state id="working">
    <invoke id="job" type="job"/>
    <transition event="done.invoke.job" target="done">
      <assign location="result" expr="_event.data"/></transition>
    <transition event="error.communication.invoke.job" target="failed">
      <assign location="why" expr="_event.data.message"/></transition>
  </state>
  <final id="done"/><state id="failed"/>
</scxml>"""

# What each start does, by attempt: a callable run inside the start, then its return value.
during: dict[int, Any] = {}
answers: dict[int, Any] = {}
seen: list[int] = []


class Job:
    def start(self, invocation: HandlerInvocation) -> Any:
        seen.append(invocation.attempt)
        if invocation.attempt in during:
            during[invocation.attempt](invocation)
        reply = answers.get(invocation.attempt, Answer.done({"by": invocation.attempt}))
        if isinstance(reply, BaseException):
            raise reply
        return reply

    def cancel(self, invocation: HandlerInvocation) -> None:
        return None


SETTINGS = {
    "INVOKERS": {"job": f"{__name__}.Job"},
    "INVOKE_HANDLER_MAX_ATTEMPTS": 3,
    "INVOKE_HANDLER_RETRY_SECONDS": 10,
    "INVOKE_HANDLER_TIMEOUT_SECONDS": 3600,
    "INVOKE_HANDLER_LEASE_SECONDS": 3,
}

queued: list[tuple[str, int, dict[str, Any]]] = []


@pytest.fixture(autouse=True)
def handed_to_the_queue(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The django-q2 queue, recorded: nothing runs until the test says so."""
    for kept in (during, answers, seen, queued):
        kept.clear()
    monkeypatch.setattr(tasks, "enqueue", lambda func, pk, **kw: queued.append((func, pk, kw)))
    with override_settings(STATECHARTS=SETTINGS):
        yield


def start() -> tuple[Execution, Invocation]:
    execution = stepper.start(Chart.objects.load(CHART), now=T0)
    invocation = Invocation.objects.get(parent=execution)
    assert queued == [(tasks.RUN, invocation.pk, {})]  # the first start, handed over
    queued.clear()
    return execution, invocation


def died(invocation: Invocation, at: datetime) -> int:
    """A worker claimed the start at ``at`` and died inside it (nothing released)."""
    invocation.refresh_from_db()
    token = leases.claim(invocation, at)
    assert token is not None
    return token


def model(execution: Execution) -> dict[str, Any]:
    execution.refresh_from_db()
    return decode(bytes(execution.position)).state.datamodel


def test_a_dead_workers_start_is_started_again_once_its_lease_runs_out() -> None:
    execution, invocation = start()
    died(invocation, T0)
    # Its lease still runs: a live start might be behind it; nothing is started again.
    assert tasks.recover(T0 + LEASE - timedelta(milliseconds=1)) == 0
    assert tasks.run(invocation.pk, now=T0 + timedelta(seconds=1)) == "skipped"  # (a redelivery)
    assert queued == []
    # Past it: reserved and handed to the queue with the reservation's token.
    assert tasks.recover(T0 + LEASE + timedelta(milliseconds=1)) == 1
    ((func, pk, kwargs),) = queued
    assert (func, pk) == (tasks.RUN, invocation.pk) and kwargs["token"]
    assert tasks.recover(T0 + LEASE + timedelta(milliseconds=2)) == 0  # reserved: once
    assert tasks.run(pk, now=T0 + LEASE, **kwargs) == "started"
    invocation.refresh_from_db()
    assert (invocation.status, invocation.attempts, invocation.claimed_until) == ("done", 2, None)
    assert seen == [2] and model(execution)["result"] == {"by": 2}


def test_the_timer_workers_heartbeat_recovers_handler_starts() -> None:
    """The heartbeat of a firing loop (timers.leases) runs every app's recovery each beat
    (statecharts.work.recover_due): the handler's dead start is handed over from there."""
    _, invocation = start()
    died(invocation, T0)
    heartbeat = Heartbeat(wait=lambda _interval: True)  # (no thread: beats called here)
    assert heartbeat.recover(T0 + timedelta(seconds=1)) == 0
    assert heartbeat.recover(T0 + LEASE + timedelta(seconds=1)) == 1
    assert heartbeat.recovered == 1
    assert [(f, pk) for f, pk, _ in queued] == [(tasks.RUN, invocation.pk)]


def test_a_start_that_lost_its_claim_writes_nothing_and_its_answer_is_not_fed() -> None:
    """The first start stalls past its lease; meanwhile the sweeper starts it again and that
    start answers. The first one's answer, when it comes back, is fenced."""
    execution, invocation = start()
    later = T0 + LEASE + timedelta(seconds=1)

    def stall(_invocation: HandlerInvocation) -> None:
        assert tasks.sweep(later, run_inline=True)["retried"] == 1  # the second start, inside

    during[1] = stall
    answers[1] = Answer.done({"by": "the stalled one"})
    assert tasks.run(invocation.pk, now=T0) == "fenced"
    assert seen == [1, 2]
    assert model(execution)["result"] == {"by": 2}
    done = execution.history.filter(input__event__name="done.invoke.job", disposition="applied")
    assert done.count() == 1


def test_a_stalled_start_that_raises_schedules_no_retry_over_the_newer_one() -> None:
    _, invocation = start()
    later = T0 + LEASE + timedelta(seconds=1)
    answers[2] = None  # the second start answers later (a callback)

    def stall(_invocation: HandlerInvocation) -> None:
        assert tasks.sweep(later, run_inline=True)["retried"] == 1

    during[1] = stall
    answers[1] = ConnectionError("timed out talking to the provider")
    assert tasks.run(invocation.pk, now=T0) == "fenced"
    invocation.refresh_from_db()
    # The second start's state stands: started, waiting for its callback, no retry due.
    assert (invocation.status, invocation.attempts) == ("active", 2)
    assert invocation.next_attempt_at is None and invocation.claimed_until is None
    assert invocation.last_error == ""
    # Nothing more is started: a redelivered task for it does nothing either.
    assert tasks.recover(later + timedelta(hours=1)) == 0
    assert tasks.run(invocation.pk, now=later) == "skipped"
    assert seen == [1, 2]


def test_a_start_that_never_finishes_fails_after_its_attempts() -> None:
    """A start that kills its worker every time (or hangs past its lease) is not started
    forever: once its attempts are spent the invocation fails and the parent is told."""
    execution, invocation = start()
    now = T0
    for _ in range(3):
        died(invocation, now)
        now += LEASE + timedelta(seconds=1)
    assert tasks.sweep(now, run_inline=True)["retried"] == 1
    invocation.refresh_from_db()
    assert (invocation.status, invocation.attempts) == ("failed", 3)
    assert "did not finish" in model(execution)["why"]
    assert seen == []  # the handler was not called a fourth time


def test_a_lease_is_renewed_only_by_the_claim_that_holds_it() -> None:
    _, invocation = start()
    token = died(invocation, T0)
    assert leases.renew(invocation.pk, token + 1, T0 + timedelta(seconds=2)) is False
    assert leases.renew(invocation.pk, token, T0 + timedelta(seconds=2)) is True
    invocation.refresh_from_db()
    assert invocation.claimed_until == T0 + timedelta(seconds=2) + LEASE
    # Renewed, so not recovered at the first lease's end.
    assert tasks.recover(T0 + LEASE + timedelta(seconds=1)) == 0
    assert leases.release(invocation.pk, token + 1) is False
    assert leases.release(invocation.pk, token) is True
    assert leases.renew(invocation.pk, token, T0 + timedelta(seconds=3)) is False  # released


def test_one_apps_failing_recovery_does_not_stop_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The heartbeat calls every app's recovery (statecharts.work.recover_due): one that
    raises (a bug, a lost connection) is logged and skipped, the others still run."""
    from statecharts import work

    def broken(_now: datetime) -> int:
        raise RuntimeError("boom")

    fine = work.WorkSource(
        "invocations", next_due=lambda: None, run_due=lambda _n: 0, recover=lambda _now: 2
    )
    failing = work.WorkSource("timers", next_due=lambda: None, run_due=lambda _n: 0, recover=broken)
    monkeypatch.setattr(work, "_sources", {"timers": failing, "invocations": fine})
    assert work.recover_due(T0) == 2
