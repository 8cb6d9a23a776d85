"""Retry policies per invoke handler (invocations.policies: the handler class's
``retry_policy``, the INVOKE_HANDLER_* settings as defaults), non-retryable errors, and the
give-up answers ``Cancel`` and ``Discard``. On an injected clock."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.utils.module_loading import import_string

from invocations import policies, tasks
from invocations.handlers import Answer, HandlerInvocation
from invocations.models import Invocation
from invocations.policies import Cancel, Discard, RetryPolicy
from statecharts import stepper
from statecharts.core.position import decode
from statecharts.models import Chart, Execution
from timers import retry_policy as timer_policies

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2033, 6, 1, tzinfo=UTC)
NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
CHART = f"""<scxml {NS} initial="working">
  <datamodel><data id="result" expr="null"/><data id="why" expr="null"/></datamodel>
  <state id="working">
    <invoke id="job" type="TYPE"/>
    <transition event="done.invoke.job" target="done">
      <assign location="result" expr="_event.data"/></transition>
    <transition event="error.communication.invoke.job" target="failed">
      <assign location="why" expr="_event.data.message"/></transition>
  </state>
  <final id="done"/><state id="failed"/>
</scxml>"""


class Declined(Exception):
    """The card was declined: retrying cannot help."""


# What the next starts do, in order: an exception to raise, or a value to return.
script: list[Any] = []
started: list[int] = []


def _next(invocation: HandlerInvocation) -> Any:
    started.append(invocation.attempt)
    step = script.pop(0) if script else Answer.done({"attempt": invocation.attempt})
    if isinstance(step, BaseException):
        raise step
    return step


class Plain:
    """No policy of its own: the settings."""

    def start(self, invocation: HandlerInvocation) -> Any:
        return _next(invocation)

    def cancel(self, invocation: HandlerInvocation) -> None:
        return None


class Careful(Plain):
    retry_policy = RetryPolicy(
        max_attempts=4,
        initial_seconds=2,
        coefficient=3,
        maximum_seconds=10,
        non_retryable=(Declined,),
    )


class Jittery(Plain):
    retry_policy = RetryPolicy(initial_seconds=100, coefficient=1, jitter=0.5)


SETTINGS = {
    "INVOKERS": {
        "plain": f"{__name__}.Plain",
        "careful": f"{__name__}.Careful",
        "jittery": f"{__name__}.Jittery",
    },
    "INVOKE_HANDLER_MAX_ATTEMPTS": 3,
    "INVOKE_HANDLER_RETRY_SECONDS": 10,
    "INVOKE_HANDLER_RETRY_COEFFICIENT": 2.0,
    "INVOKE_HANDLER_RETRY_MAX_SECONDS": 3600,
    "INVOKE_HANDLER_TIMEOUT_SECONDS": 3600,
}


@pytest.fixture(autouse=True)
def inline_queue(monkeypatch: pytest.MonkeyPatch) -> Any:
    script.clear()
    started.clear()
    run: Callable[..., Any] = tasks.run
    monkeypatch.setattr(
        tasks,
        "enqueue",
        lambda func, pk, **kw: run(pk, now=T0, **kw) if func == tasks.RUN else None,
    )
    with override_settings(STATECHARTS=SETTINGS):
        yield


def start(kind: str) -> tuple[Execution, Invocation]:
    execution = stepper.start(Chart.objects.load(CHART.replace("TYPE", kind)), now=T0)
    return execution, Invocation.objects.get(parent=execution)


def model(execution: Execution) -> dict[str, Any]:
    execution.refresh_from_db()
    return decode(bytes(execution.position)).state.datamodel


def test_a_handler_without_a_policy_follows_the_settings() -> None:
    script.extend([ConnectionError("down")] * 5)
    execution, invocation = start("plain")
    assert invocation.next_attempt_at == T0 + timedelta(seconds=10)
    tasks.sweep(T0 + timedelta(seconds=10), run_inline=True)
    invocation.refresh_from_db()
    assert invocation.next_attempt_at == T0 + timedelta(seconds=30)  # 10 s later: 20 s
    tasks.sweep(T0 + timedelta(seconds=30), run_inline=True)
    invocation.refresh_from_db()
    assert (invocation.status, invocation.attempts) == ("failed", 3)  # the settings' 3
    assert "failed 3 times" in model(execution)["why"]


def test_a_handlers_policy_sets_its_attempts_backoff_and_cap() -> None:
    script.extend([ConnectionError("down")] * 3)
    execution, invocation = start("careful")
    dues = []
    now = T0
    for _ in range(3):
        invocation.refresh_from_db()
        dues.append((invocation.next_attempt_at - now).total_seconds())
        now = invocation.next_attempt_at
        tasks.sweep(now, run_inline=True)
    assert dues == [2, 6, 10]  # 2, 2*3, 2*9 capped at 10
    invocation.refresh_from_db()
    assert (invocation.status, invocation.attempts) == ("done", 4)  # its 4 attempts, not 3
    assert model(execution)["result"] == {"attempt": 4}


def test_a_non_retryable_error_fails_at_once() -> None:
    script.append(Declined("card declined"))
    execution, invocation = start("careful")
    invocation.refresh_from_db()
    assert (invocation.status, invocation.attempts) == ("failed", 1)
    assert "not retryable: Declined: card declined" in model(execution)["why"]
    execution.refresh_from_db()
    assert execution.configuration == ["failed"]


def test_the_jitter_derives_from_the_invocations_key_and_stays_within_its_bounds() -> None:
    script.append(ConnectionError("down"))
    _, invocation = start("jittery")
    invocation.refresh_from_db()
    waited = (invocation.next_attempt_at - T0).total_seconds()
    assert 50 <= waited < 150 and waited != 100  # 100 s, moved by up to ±50 %
    # The same key and attempt: the same backoff (a replay computes the same due).
    policy = policies.policy_of(Jittery())
    key = policies.invocation_key(invocation.parent_id, invocation.ordinal)
    assert T0 + timedelta(seconds=policy.backoff(1, key)) == invocation.next_attempt_at
    assert policy.backoff(1, key + "x") != policy.backoff(1, key)  # another row, another jitter


@pytest.mark.parametrize(("answer", "verb"), [(Cancel, "cancelled"), (Discard, "discarded")])
def test_a_give_up_answer_fails_the_invocation_at_once_with_its_reason(
    answer: type[Any], verb: str
) -> None:
    script.append(answer("the order was withdrawn"))
    execution, invocation = start("careful")
    invocation.refresh_from_db()
    # Ended now, one attempt, though three were left; the reason recorded on the row.
    assert (invocation.status, invocation.attempts) == ("failed", 1)
    assert invocation.next_attempt_at is None and invocation.claimed_until is None
    assert invocation.last_error == f"{verb} by its handler: the order was withdrawn"
    # The parent hears it as any failed start: error.communication.invoke.<id>.
    execution.refresh_from_db()
    assert execution.configuration == ["failed"]
    assert model(execution)["why"] == f"{verb} by its handler: the order was withdrawn"
    assert started == [1]
    assert tasks.sweep(T0 + timedelta(hours=1), run_inline=True) == {"timed_out": 0, "retried": 0}


def test_timers_and_handlers_share_one_policy_type() -> None:
    """The type lives below both apps (statecharts.policies.retrying): a policy written for a
    timer delivery means the same on a handler; each app fills it from its own settings."""
    assert timer_policies.RetryPolicy is policies.RetryPolicy
    assert timer_policies.Cancel is policies.Cancel
    filled = policies.policy_of(Careful())
    assert (filled.max_attempts, filled.jitter) == (4, 0.0)  # its own, then the settings'
    assert import_string(f"{__name__}.Plain") is Plain


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("INVOKE_HANDLER_RETRY_COEFFICIENT", 0.5),
        ("INVOKE_HANDLER_RETRY_JITTER", 2),
        ("INVOKE_HANDLER_LEASE_SECONDS", 0),
        ("INVOKE_HANDLER_START_TIMEOUT_SECONDS", "soon"),
        ("INVOKE_HANDLER_RETRY_MAX_SECONDS", True),
    ],
)
def test_the_global_policy_and_lease_are_checked(key: str, value: Any) -> None:
    from invocations.conf import check

    problems = check({key: value})
    assert [(p.id, key in p.msg) for p in problems] == [("invocations.E005", True)]
    assert check({}) == []
