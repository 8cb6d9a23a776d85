"""Retry policies per delivery (timers.retry_policy), the global defaults, the deterministic
jitter, and a delivery's give-up answers (Cancel, Discard)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.checks import run_checks
from django.test import override_settings

from statecharts import stepper
from statecharts.core.position import decode
from statecharts.models import Chart, Execution
from tests.timers import deliveries
from timers import firing
from timers.claiming import claim
from timers.delivery import Cancel, Discard, RetryPolicy
from timers.models import Timer

pytestmark = pytest.mark.django_db

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
T0 = datetime(2031, 3, 1, 9, 0, tzinfo=UTC)
DUE = T0 + timedelta(seconds=10)
S = timedelta(seconds=1)
CHART = f"""<scxml {NS} initial="waiting">
  <datamodel><data id="nudges" expr="0"/></datamodel>
  <state id="waiting">
    <onentry><send id="nudge" event="nudge" delay="10s"/></onentry>
    <transition event="nudge"><assign location="nudges" expr="nudges + 1"/></transition>
  </state>
</scxml>"""
POLICY = "tests.timers.deliveries.PolicyDelivery"
ANSWER = "tests.timers.deliveries.AnswerDelivery"
WITH_POLICY = {"TIMER_DELIVERIES": {"default": POLICY}}


@pytest.fixture(autouse=True)
def _clean_deliveries() -> Iterator[None]:
    deliveries.raises["value"] = None
    deliveries.answer.update(value=None, perform=False)
    yield
    deliveries.raises["value"] = None
    deliveries.answer.update(value=None, perform=False)


def start() -> Execution:
    return stepper.start(Chart.objects.load(CHART), now=T0)


def nudges(execution: Execution) -> int:
    execution.refresh_from_db()
    return int(decode(bytes(execution.position)).state.datamodel["nudges"])


def fire_until_settled(execution: Execution, at: datetime) -> list[tuple[str, float]]:
    """Fire the timer at each due until it settles: its statuses and the backoffs seen."""
    seen: list[tuple[str, float]] = []
    timer = Timer.objects.get(execution=execution)
    while timer.status == "pending":
        at = timer.due
        firing.fire_all_due(now=at)
        timer.refresh_from_db()
        seen.append((timer.status, (timer.due - at).total_seconds()))
    return seen


def test_a_deliverys_policy_sets_its_attempts_and_a_capped_backoff() -> None:
    """max_attempts 4, 2 s x 3 per attempt, at most 10 s: 2, 6, 10 (not 18), then failed."""
    execution = start()
    deliveries.raises["value"] = ValueError("the endpoint said 503")
    with override_settings(STATECHARTS=WITH_POLICY):
        seen = fire_until_settled(execution, DUE)
    assert seen == [("pending", 2.0), ("pending", 6.0), ("pending", 10.0), ("failed", 0.0)]
    timer = Timer.objects.get(execution=execution)
    assert (timer.attempts, timer.reason) == (4, "delivery failed 4 times")
    assert timer.last_error == "ValueError: the endpoint said 503"
    assert nudges(execution) == 0


def test_a_non_retryable_error_fails_the_timer_at_once() -> None:
    execution = start()
    deliveries.raises["value"] = PermissionError("the account was closed")
    with override_settings(STATECHARTS=WITH_POLICY):
        assert firing.fire_all_due(now=DUE).outcomes == {"failed": 1}
    timer = Timer.objects.get(execution=execution)
    assert (timer.status, timer.attempts) == ("failed", 1)
    assert timer.reason == "delivery failed: PermissionError is not retryable"


def test_the_global_settings_are_every_deliverys_defaults() -> None:
    """A delivery without a policy (here one whose answers are invalid: a raise) follows the
    settings: 7 s x 3 per attempt, at most 20 s."""
    execution = start()
    deliveries.answer["value"] = "later"  # an invalid answer: spent like a raise
    settings = {
        "TIMER_DELIVERIES": {"default": ANSWER},
        "TIMER_RETRY_SECONDS": 7,
        "TIMER_RETRY_COEFFICIENT": 3,
        "TIMER_RETRY_MAX_SECONDS": 20,
        "TIMER_MAX_ATTEMPTS": 3,
    }
    with override_settings(STATECHARTS=settings):
        seen = fire_until_settled(execution, DUE)
    assert seen == [("pending", 7.0), ("pending", 20.0), ("failed", 0.0)]


def test_the_jitter_derives_from_the_rows_key_and_stays_within_its_fraction() -> None:
    policy = RetryPolicy(
        max_attempts=9, initial_seconds=10, coefficient=2, maximum_seconds=60, jitter=0.25
    )
    same = [policy.backoff(n, "12:3") for n in range(1, 8)]
    assert same == [policy.backoff(n, "12:3") for n in range(1, 8)]  # a replay computes it again
    for n, seconds in enumerate(same, start=1):
        base = min(10 * 2 ** (n - 1), 60)
        assert base * 0.75 <= seconds <= min(base * 1.25, 60)
    others = {policy.backoff(1, f"{pk}:0") for pk in range(50)}
    assert len(others) > 40  # rows retried together spread out
    assert RetryPolicy(0, 10, 2, 60, 0).backoff(3, "12:3") == 40  # no jitter: the plain backoff


def test_a_timed_out_attempt_spends_one_of_the_deliverys_attempts() -> None:
    """A claim left unsettled (its firer died) is taken over: with the delivery's policy of
    4 attempts the fourth such takeover fails it, not the settings' fifth."""
    execution = start()
    timer = Timer.objects.get(execution=execution)
    Timer.objects.filter(pk=timer.pk).update(attempts=3)
    lease = timedelta(seconds=3)
    with override_settings(STATECHARTS=WITH_POLICY):
        claim(DUE, 10, lease=lease)  # a firer claims it, and dies
        claim(DUE + 4 * S, 10, lease=lease)  # its lease ended: taken over, the attempt spent
    timer.refresh_from_db()
    assert (timer.status, timer.attempts, timer.reason) == ("failed", 4, "timed out")


@pytest.mark.parametrize(
    ("answer", "status", "verb"),
    [
        (Cancel("the order was withdrawn"), "cancelled", "cancelled"),
        (Discard("superseded by a newer reminder"), "discarded", "discarded"),
    ],
    ids=["cancel", "discard"],
)
def test_a_give_up_answer_ends_the_row_at_once_recorded_no_attempt_spent(
    answer: Any, status: str, verb: str
) -> None:
    execution = start()
    deliveries.answer["value"] = answer
    with override_settings(STATECHARTS={"TIMER_DELIVERIES": {"default": ANSWER}}):
        assert firing.fire_all_due(now=DUE).outcomes == {status: 1}
        assert firing.fire_all_due(now=DUE + 3600 * S).outcomes == {}  # never again
    timer = Timer.objects.get(execution=execution)
    assert (timer.status, timer.attempts, timer.settled) == (status, 0, DUE)
    assert timer.reason == f"delivery 'default' {verb} it: {answer.reason}"
    assert timer.claimed_until is None and timer.last_error == ""
    assert nudges(execution) == 0 and execution.steps == 1  # the chart was not stepped


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        ({"TIMER_RETRY_COEFFICIENT": 0.5}, ["timers.E006"]),
        ({"TIMER_RETRY_MAX_SECONDS": -1}, ["timers.E006"]),
        ({"TIMER_RETRY_JITTER": 1.5}, ["timers.E006"]),
        ({"TIMER_RETRY_JITTER": "0.1"}, ["timers.E006"]),
        ({"TIMER_RETRY_COEFFICIENT": 1.5, "TIMER_RETRY_JITTER": 0.2}, []),
    ],
    ids=["coefficient-below-1", "negative-cap", "jitter-above-1", "jitter-a-string", "good"],
)
def test_a_system_check_validates_the_retry_settings(
    setting: dict[str, Any], expected: list[str]
) -> None:
    with override_settings(STATECHARTS=setting):
        found = [m.id for m in run_checks() if (m.id or "").startswith("timers.")]
    assert found == expected


# ---- bounded snoozes --------------------------------------------------------------------------


def test_a_timer_waiting_for_an_undeployed_delivery_fails_after_the_bound_needing_attention() -> (
    None
):
    """Snoozed (no attempt spent) while the deployment lacks its delivery, for at most
    TIMER_UNDEPLOYED_MAX_SECONDS from the first snooze; then failed, "needs attention", a
    critical health figure; once deployed, an operator's retry fires it."""
    from statecharts.operations import health
    from timers import health as timer_health
    from timers.retrying import retry

    execution = start()
    Timer.objects.update(delivery="audited")  # a name this deployment does not have
    settings = {"TIMER_UNDEPLOYED_MAX_SECONDS": 3600, "TIMER_SNOOZE_SECONDS": 1000}
    with override_settings(STATECHARTS=settings):
        assert firing.fire_all_due(now=DUE).outcomes == {"snoozed": 1}
        timer = Timer.objects.get(execution=execution)
        assert (timer.status, timer.attempts, timer.due) == ("pending", 0, DUE + 1000 * S)
        assert timer.reason == (
            "delivery 'audited' is not in TIMER_DELIVERIES here"
            f" (waiting since {DUE.isoformat()}): snoozed"
        )
        assert firing.fire_all_due(now=DUE + 1000 * S).outcomes == {"snoozed": 1}
        timer.refresh_from_db()
        assert f"(waiting since {DUE.isoformat()})" in timer.reason  # the first snooze's time
        assert firing.fire_all_due(now=DUE + 3000 * S).outcomes == {"snoozed": 1}
        assert firing.fire_all_due(now=DUE + 4000 * S).outcomes == {"failed": 1}
    timer.refresh_from_db()
    assert (timer.status, timer.attempts, timer.settled) == ("failed", 0, DUE + 4000 * S)
    assert timer.reason == (
        "needs attention: delivery 'audited' is not in TIMER_DELIVERIES here for 4000 s"
    )
    (figure,) = [f for f in timer_health.measure(DUE) if f.name == "timers.needs_attention"]
    assert (figure.value, figure.critical) == (1, 1)
    assert health.level_of(figure.value, figure.warning, figure.critical) == health.Level.CRITICAL
    # Deployed now: the operator retries it, and it fires.
    deployed = {"TIMER_DELIVERIES": {"default": POLICY, "audited": POLICY}}
    with override_settings(STATECHARTS=deployed):
        assert retry(timer.pk, now=DUE + 5000 * S) == "retried"
        assert firing.fire_all_due(now=DUE + 5000 * S).outcomes == {"fired": 1}
    assert nudges(execution) == 1


def test_a_snooze_a_delivery_asks_for_is_capped() -> None:
    from timers.delivery import Snooze

    execution = start()
    deliveries.answer["value"] = Snooze(10**7, "come back next year")
    settings = {"TIMER_DELIVERIES": {"default": ANSWER}, "TIMER_SNOOZE_MAX_SECONDS": 600}
    with override_settings(STATECHARTS=settings):
        assert firing.fire_all_due(now=DUE).outcomes == {"snoozed": 1}
    timer = Timer.objects.get(execution=execution)
    assert (timer.status, timer.due) == ("pending", DUE + 600 * S)
    assert timer.reason == "delivery 'default' asked to snooze 10000000 s: come back next year"
