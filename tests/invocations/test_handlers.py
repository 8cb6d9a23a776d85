"""Invoke handlers for types other than SCXML: the ``task`` handler, retries, timeouts,
answers applied once, and a start that comes after a cancel doing nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.utils.module_loading import import_string

from invocations import answers, tasks
from invocations.handlers import Answer, HandlerInvocation
from invocations.models import Invocation
from statecharts import stepper
from statecharts.core.position import decode
from statecharts.models import Chart, Execution
from statecharts.policies import validation

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2033, 6, 1, tzinfo=UTC)
NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
PAYMENT = f"""<scxml {NS} initial="paying">
  <datamodel><data id="receipt" expr="null"/><data id="why" expr="null"/></datamodel>
  <state id="paying">
    <invoke id="pay" type="task" src="charge">
      <param name="amount" expr="42"/>
    </invoke>
    <transition event="done.invoke.pay" target="paid">
      <assign location="receipt" expr="_event.data"/>
    </transition>
    <transition event="error.communication.invoke.pay" target="failed">
      <assign location="why" expr="_event.data.message"/>
    </transition>
    <transition event="give_up" target="abandoned"/>
  </state>
  <final id="paid"/><state id="failed"/><state id="abandoned"/>
</scxml>"""

calls: list[dict[str, Any]] = []
failures = {"left": 0}
hostile: dict[str, Any] = {"answer": None}


def echo_hostile(amount: int) -> Any:
    """A task whose return value came from outside (a provider's JSON, say)."""
    return hostile["answer"]


def charge(amount: int) -> dict[str, Any]:
    calls.append({"amount": amount})
    if failures["left"] > 0:
        failures["left"] -= 1
        raise ConnectionError("the payment provider is down")
    return {"charged": amount}


class Silent:
    """A handler that never answers (the timeout's business)."""

    started: list[int] = []
    cancelled: list[int] = []

    def start(self, invocation: HandlerInvocation) -> None:
        Silent.started.append(invocation.id)

    def cancel(self, invocation: HandlerInvocation) -> None:
        Silent.cancelled.append(invocation.id)


SETTINGS = {
    "TASKS": {"charge": f"{__name__}.charge", "echo_hostile": f"{__name__}.echo_hostile"},
    "INVOKERS": {
        "task": "invocations.handlers.TaskInvoker",
        "silent": f"{__name__}.Silent",
    },
    "INVOKE_HANDLER_MAX_ATTEMPTS": 3,
    "INVOKE_HANDLER_RETRY_SECONDS": 10,
    "INVOKE_HANDLER_TIMEOUT_SECONDS": 300,
}


@pytest.fixture(autouse=True)
def inline_cluster(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The django-q2 queue, run inline: a task runs when it is enqueued."""
    calls.clear()
    failures["left"] = 0
    Silent.started.clear()
    Silent.cancelled.clear()
    monkeypatch.setattr(tasks, "enqueue", lambda func, pk: import_string(func)(pk, now=T0)
                        if func == tasks.RUN else import_string(func)(pk))
    with override_settings(STATECHARTS=SETTINGS):
        yield


def datamodel(execution: Execution) -> dict[str, Any]:
    execution.refresh_from_db()
    return decode(bytes(execution.position)).state.datamodel


def start(source: str = PAYMENT) -> Execution:
    execution = stepper.start(Chart.objects.load(source), now=T0)
    execution.refresh_from_db()
    return execution


def test_the_task_handler_calls_the_registered_function_and_answers_done() -> None:
    execution = start()
    assert calls == [{"amount": 42}]
    assert execution.configuration == ["paid"]
    assert datamodel(execution)["receipt"] == {"charged": 42}
    invocation = Invocation.objects.get(parent=execution)
    assert (invocation.status, invocation.type, invocation.attempts) == ("done", "task", 1)


def test_a_failing_task_is_retried_with_backoff_then_fails_and_the_parent_is_told() -> None:
    failures["left"] = 10
    execution = start()
    invocation = Invocation.objects.get(parent=execution)
    assert invocation.status == "active" and invocation.attempts == 1
    assert invocation.next_attempt_at == T0 + timedelta(seconds=10)
    assert "provider is down" in invocation.last_error
    # Not due yet: nothing is retried.
    assert tasks.sweep(T0 + timedelta(seconds=5), run_inline=True) == {
        "timed_out": 0, "retried": 0
    }
    assert tasks.sweep(T0 + timedelta(seconds=11), run_inline=True)["retried"] == 1
    invocation.refresh_from_db()
    assert invocation.attempts == 2
    # 10 s after the first attempt, then 20 s after the second (which ran at +11 s)
    assert invocation.next_attempt_at == T0 + timedelta(seconds=31)
    tasks.sweep(T0 + timedelta(seconds=40), run_inline=True)
    invocation.refresh_from_db()
    assert (invocation.status, invocation.attempts) == ("failed", 3)
    execution.refresh_from_db()
    assert execution.configuration == ["failed"]
    assert "failed 3 times" in datamodel(execution)["why"]
    assert len(calls) == 3


def test_a_handler_that_never_answers_times_out() -> None:
    execution = start(PAYMENT.replace('type="task" src="charge"', 'type="silent"'))
    invocation = Invocation.objects.get(parent=execution)
    assert Silent.started == [invocation.pk] and invocation.status == "active"
    assert tasks.sweep(T0 + timedelta(seconds=299)) == {"timed_out": 0, "retried": 0}
    assert tasks.sweep(T0 + timedelta(seconds=301)) == {"timed_out": 1, "retried": 0}
    invocation.refresh_from_db()
    assert invocation.status == "failed" and "timed out" in invocation.reason
    execution.refresh_from_db()
    assert execution.configuration == ["failed"]


def test_an_answer_delivered_twice_is_applied_once() -> None:
    execution = start(PAYMENT.replace('type="task" src="charge"', 'type="silent"'))
    invocation = Invocation.objects.get(parent=execution)
    first = answers.answer(invocation, Answer.done({"ok": 1}), key="callback-7")
    again = answers.answer(invocation, Answer.done({"ok": 1}), key="callback-7")
    assert first.applied and not first.repeated
    assert again.repeated and again.entry.pk == first.entry.pk
    assert execution.history.filter(input__event__name="done.invoke.pay").count() == 1
    assert datamodel(execution)["receipt"] == {"ok": 1}


def test_leaving_the_state_cancels_the_handler_and_a_late_start_does_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    queued: list[tuple[str, int]] = []
    monkeypatch.setattr(tasks, "enqueue", lambda func, pk: queued.append((func, pk)))
    execution = start(PAYMENT.replace('type="task" src="charge"', 'type="silent"'))
    (invocation,) = Invocation.objects.filter(parent=execution)
    assert queued == [(tasks.RUN, invocation.pk)]  # handed to the cluster, not run yet
    stepper.send(execution, "give_up", now=T0)
    assert queued[-1] == (tasks.CANCEL, invocation.pk)
    invocation.refresh_from_db()
    assert invocation.status == "cancelled"
    # The worker picks the start up only now: the invocation was cancelled, nothing runs.
    assert tasks.run(invocation.pk, now=T0) == "skipped"
    assert Silent.started == []
    assert tasks.cancel_task(invocation.pk) == "cancelled"
    assert Silent.cancelled == [invocation.pk]
    # An answer that arrives anyway is ignored, and recorded as such (spec 6.4.3).
    late = answers.answer(invocation, Answer.done({"late": True}), key="late")
    assert late.disposition == "discarded"
    assert "after it was cancelled" in late.entry.reason


def test_an_unregistered_invoke_type_is_error_execution() -> None:
    chart = PAYMENT.replace('type="task" src="charge"', 'type="fax"').replace(
        'event="error.communication.invoke.pay" target="failed"',
        'event="error.execution" target="failed"',
    )
    execution = start(chart)
    assert execution.configuration == ["failed"]
    assert not Invocation.objects.exists()


CODE = "(function(){ globalThis.pwned = true; receipt = 'forged'; return 7 })()"
DEEP: list[Any] = []
for _ in range(5_000):
    DEEP = [DEEP]


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ({"$sc": "function", "source": CODE}, "function"),
        ({"total": float("nan")}, "finite"),
        (DEEP, "deep"),
        ({"x": object()}, "JSON"),
        ({1, 2}, "JSON"),
        ("y" * 2_000_000, "bytes"),
    ],
    ids=["code", "nan", "deep", "object", "set", "too big"],
)
def test_a_handler_answer_from_outside_passes_the_validator_or_fails_the_invocation(
    value: Any, reason: str
) -> None:
    """A task's return value is data from outside: refused like at every other door (no code
    run, nothing stored), the invocation failed at once (no retry changes the answer) and the
    parent told with error.communication, instead of an exception left in the task."""
    hostile["answer"] = value
    execution = start(PAYMENT.replace('src="charge"', 'src="echo_hostile"'))
    assert execution.configuration == ["failed"]
    model = datamodel(execution)
    assert model["receipt"] is None and "pwned" not in model
    assert "answer was refused" in model["why"] and reason in model["why"]
    invocation = Invocation.objects.get(parent=execution)
    assert (invocation.status, invocation.attempts) == ("failed", 1)
    assert not execution.history.filter(input__event__name="done.invoke.pay").exists()


def test_a_handler_event_answer_may_not_take_a_reserved_name() -> None:
    execution = start(PAYMENT.replace('type="task" src="charge"', 'type="silent"'))
    invocation = Invocation.objects.get(parent=execution)
    with pytest.raises(validation.InvalidInput, match="reserved"):
        answers.answer(invocation, Answer.event("done.state.paying"), key="spoof")
    assert execution.history.count() == 1  # the start only: nothing fed
