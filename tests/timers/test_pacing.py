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
from timers import firing, pacing
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
