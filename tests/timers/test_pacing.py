"""Paced catch-up (timers.pacing): live timers first, overdue ones at TIMER_CATCHUP_PER_SECOND
per process, on the injected clock; unpaced claims keep due order. No sleeping."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings
from django.core.checks import run_checks
from django.test import override_settings

from statecharts import stepper
from statecharts.models import Chart, Execution
from timers import dispatch, firing, pacing
from timers.models import Timer, TimerStatus

pytestmark = pytest.mark.django_db

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
CHART = f"""<scxml {NS} initial="waiting">
  <state id="waiting">
    <onentry><send id="alarm" event="alarm" delay="10s"/></onentry>
    <transition event="alarm" target="fired"/>
  </state>
  <state id="fired"/>
</scxml>"""
T0 = datetime(2031, 3, 1, 9, 0, tzinfo=UTC)
S = timedelta(seconds=1)
# After an hour's outage: 30 timers due an hour ago, 2 due a second ago.
NOW = T0 + timedelta(hours=1)
PACED = {"TIMER_CATCHUP_PER_SECOND": 5.0, "TIMER_OVERDUE_SECONDS": 60, "TIMER_BATCH": 10}


@pytest.fixture(autouse=True)
def _fresh_bucket() -> Iterator[None]:
    pacing.reset()
    yield
    pacing.reset()


def paced(**more: object) -> override_settings:
    return override_settings(STATECHARTS={**settings.STATECHARTS, **PACED, **more})


@pytest.fixture
def backlog() -> tuple[list[Execution], list[Execution]]:
    chart = Chart.objects.load(CHART)
    overdue = [stepper.start(chart, now=T0 - 10 * S) for _ in range(30)]  # due T0
    live = [stepper.start(chart, now=NOW - 11 * S) for _ in range(2)]  # due NOW - 1 s
    return overdue, live


def fired(executions: list[Execution]) -> int:
    return Timer.objects.filter(execution__in=executions, status=TimerStatus.FIRED).count()


def test_a_paced_claim_takes_live_timers_first_and_overdue_ones_at_the_rate(
    backlog: tuple[list[Execution], list[Execution]],
) -> None:
    overdue, live = backlog
    with paced():
        # The first batch: both live timers, and the bucket's 5 overdue ones.
        assert firing.fire_due(now=NOW, paced=True).fired == 7
        assert (fired(live), fired(overdue)) == (2, 5)
        # The bucket is empty: nothing more at the same instant, however many are due.
        assert firing.fire_due(now=NOW, paced=True).outcomes == {}
        # 0.4 s later, 2 tokens; a second later, 5 (the bucket holds one second's worth).
        assert firing.fire_due(now=NOW + 0.4 * S, paced=True).fired == 2
        assert firing.fire_due(now=NOW + 10 * S, paced=True).fired == 5
        assert fired(overdue) == 12
        # The most overdue first: the claims took the earliest ids of the backlog.
        taken = set(
            Timer.objects.filter(status=TimerStatus.FIRED, execution__in=overdue).values_list(
                "execution_id", flat=True
            )
        )
        assert taken == {e.pk for e in overdue[:12]}


def test_a_live_timer_that_comes_due_during_the_catch_up_waits_for_no_backlog(
    backlog: tuple[list[Execution], list[Execution]],
) -> None:
    overdue, _live = backlog
    with paced():
        firing.fire_due(now=NOW, paced=True)
        newcomer = stepper.start(Chart.objects.load(CHART), now=NOW - 5 * S)  # due NOW + 5 s
        at = NOW + 5 * S
        report = firing.fire_due(now=at, paced=True)
        assert Timer.objects.get(execution=newcomer).status == TimerStatus.FIRED
        assert report.fired == 1 + 5  # it, and the 5 tokens refilled since
    # 18 overdue still pending: paced, never dropped; an unpaced fire takes them all.
    assert Timer.objects.filter(status=TimerStatus.PENDING).count() == 30 - 5 - 5
    assert firing.fire_all_due(now=at).fired == 20
    assert fired(overdue) == 30


def test_fire_all_due_paced_stops_when_the_allowance_is_spent_and_unpaced_does_not(
    backlog: tuple[list[Execution], list[Execution]],
) -> None:
    with paced():
        assert firing.fire_all_due(now=NOW, paced=True).fired == 7
        assert firing.fire_all_due(now=NOW).fired == 25  # (fire_timers --once: everything)


def test_unpaced_claims_keep_due_order_most_overdue_first(
    backlog: tuple[list[Execution], list[Execution]],
) -> None:
    overdue, live = backlog
    with paced():
        assert firing.fire_due(now=NOW).fired == 10  # not paced: the first 10 due
    assert (fired(live), fired(overdue)) == (0, 10)


def test_a_rate_of_zero_turns_pacing_off(
    backlog: tuple[list[Execution], list[Execution]],
) -> None:
    overdue, live = backlog
    with paced(TIMER_CATCHUP_PER_SECOND=0):
        assert firing.fire_due(now=NOW, paced=True).fired == 10
    assert (fired(live), fired(overdue)) == (0, 10)


def test_a_clock_that_goes_back_refills_nothing() -> None:
    with paced():
        assert pacing.allowance(NOW) == 5
        pacing.spend(5)
        assert pacing.allowance(NOW - 3600 * S) == 0
        assert pacing.allowance(NOW + 0.6 * S) == 3  # from NOW, not from the earlier reading


@pytest.mark.parametrize(
    ("value", "errors"),
    [(0, []), (0.5, []), (-1, ["timers.E006"]), ("fast", ["timers.E006"])],
)
def test_the_rate_is_checked(value: object, errors: list[str]) -> None:
    with override_settings(STATECHARTS={**settings.STATECHARTS, "TIMER_CATCHUP_PER_SECOND": value}):
        found = [m.id for m in run_checks() if (m.id or "").startswith("timers.")]
    assert found == errors


def test_the_django_q2_sweeper_and_drain_are_paced(
    backlog: tuple[list[Execution], list[Execution]],
) -> None:
    """The sweeper fires live timers at once and the backlog at the rate, on its clock: 5
    tokens at first, then 1 per 200 ms poll (5 a second) for the 3 s it lives. A drain (run
    where the sweeper enqueues one) takes what its own bucket holds, then ends."""
    overdue, live = backlog
    elapsed = [0]  # ms

    def sleep(seconds: float) -> None:
        elapsed[0] += round(seconds * 1000)

    def monotonic() -> float:
        return elapsed[0] / 1000

    def now() -> datetime:
        return NOW + timedelta(milliseconds=elapsed[0])

    drains: list[str] = []
    with paced(CLOCK=now, TIMER_POLL_MS=200):
        dispatch.sweep(3, enqueue=drains.append, sleep=sleep, monotonic=monotonic)
        assert fired(live) == 2
        # 5 at 0 s, then one at each poll from 0.2 s to 2.8 s: 14.
        assert fired(overdue) == 5 + 14
        assert drains  # (it wanted drains for the backlog beyond itself)
        pacing.reset()  # a drain in another process: a bucket of its own
        assert dispatch.drain() == 5  # its bucket's 5, then nothing more may be claimed now
    assert fired(overdue) == 24


def test_a_rate_below_one_a_second_still_lets_a_row_through_now_and_then() -> None:
    with paced(TIMER_CATCHUP_PER_SECOND=0.5):
        assert pacing.allowance(NOW) == 1
        pacing.spend(1)
        assert pacing.allowance(NOW + 1 * S) == 0
        assert pacing.allowance(NOW + 2 * S) == 1
        assert pacing.allowance(NOW + 60 * S) == 1  # (it holds one second's worth: 1 row)
