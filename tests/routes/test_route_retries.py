"""Route retry policies (routes.retrying) and give-up answers, on the clock the tests inject.

Routes stay at most once: only a failure the route declares was not sent (``NotSent``) is
retried, durably (a route timer row, the ledger key ``retrying``), under the same key, with
the policy's backoff and a jitter derived from the key; an ambiguous failure is failed at once
and never retried; a non-retryable class fails at once; the chart hears the failure once, when
the key fails for good. ``Cancel``/``Discard`` end the key at once, the chart told."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import override_settings
from rest_framework.test import APIClient

from routes import checks, delivering, retrying
from routes.basichttp import LOOPBACK_OPTIONS
from routes.inspection import read_routes, routes_document
from routes.models import DeliveryStatus, RouteDelivery
from statecharts import stepper
from statecharts.models import Chart, Execution, OutboxMessage
from statecharts.operations.inspection import datamodel_of
from statecharts.policies.retrying import RetryPolicy
from tests.routes.recording import Flaky
from timers import firing
from timers.models import RouteTimer

pytestmark = pytest.mark.django_db

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
S = timedelta(seconds=1)

CHART = f"""<scxml {NS} initial="s">
  <datamodel><data id="errors" expr="[]"/></datamodel>
  <state id="s">
    <transition event="now"><send id="ping" type="flaky" target="gw" event="ping"/></transition>
    <transition event="later">
      <send id="ping" type="flaky" target="gw" event="ping" delay="3s"/></transition>
    <transition event="stop"><cancel sendid="ping"/></transition>
    <transition event="quit" target="gone"/>
    <transition event="error.*">
      <assign location="errors"
              expr="errors.concat([[_event.name, _event.sendid, _event.data.given_up || null]])"/>
    </transition>
  </state>
  <final id="gone"/>
</scxml>"""

clock = {"now": T0}


def configure(retry: dict[str, Any] | None = None, **extra: Any) -> Any:
    from django.conf import settings

    entry: dict[str, Any] = {"ROUTE": "tests.routes.recording.Flaky", "TYPES": ["flaky"]}
    if retry is not None:
        entry["RETRY"] = retry
    return override_settings(
        STATECHARTS={
            **settings.STATECHARTS,
            "ROUTES": {"flaky": entry},
            "CLOCK": lambda: clock["now"],
            **extra,
        }
    )


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    Flaky.script.clear()
    Flaky.calls.clear()
    clock["now"] = T0
    yield
    Flaky.script.clear()
    Flaky.calls.clear()


def start() -> Execution:
    return stepper.start(Chart.objects.load(CHART, name="retries"), now=T0)


def at(when: datetime, event: str | None = None, execution: Execution | None = None) -> Any:
    """Move the clock to ``when``; send ``event`` or fire what is due then."""
    clock["now"] = when
    if event is not None:
        assert execution is not None
        return stepper.send(execution, event, now=when)
    return firing.fire_all_due(now=when).outcomes


def errors(execution: Execution) -> list[Any]:
    execution.refresh_from_db()
    return list(datamodel_of(execution)["errors"])  # type: ignore[index]


def test_a_not_sent_failure_is_retried_up_to_max_attempts_then_failed_and_heard_once() -> None:
    with configure({"max_attempts": 3, "initial_seconds": 10, "coefficient": 2}):
        execution = start()
        Flaky.script[:] = ["not_sent", "not_sent", "not_sent"]
        at(T0, "now", execution)
        delivery = RouteDelivery.objects.get()
        key = f"{execution.session_id}:1"
        assert (delivery.key, delivery.status, delivery.attempts) == (
            key,
            DeliveryStatus.RETRYING,
            1,
        )
        assert delivery.retry_at == T0 + 10 * S
        assert delivery.reason.startswith("not sent (attempt 1 of 3): NotSent: ")
        row = RouteTimer.objects.get()
        assert (row.key, row.due, row.send_id, row.scheduled_in) == (key, T0 + 10 * S, "ping", None)
        assert errors(execution) == []  # not told yet: the send is not over
        [shown] = routes_document(read_routes(execution, T0))["deliveries"]
        assert (shown["status"], shown["attempts"], shown["retry_at"]) == (
            "retrying",
            1,
            (T0 + 10 * S).isoformat(),
        )
        api = APIClient()
        api.force_authenticate(User.objects.create_superuser("ops", "ops@example.com", "pw"))
        [listed] = api.get("/api/route-deliveries/", {"execution": execution.pk}).json()["results"]
        assert (listed["status"], listed["attempts"]) == ("retrying", 1)
        assert listed["retry_at"] is not None and listed["in_doubt"] is False

        assert at(T0 + 9 * S) == {}  # not due
        assert at(T0 + 10 * S) == {"fired": 1}
        delivery.refresh_from_db()
        assert (delivery.status, delivery.attempts) == (DeliveryStatus.RETRYING, 2)
        assert delivery.retry_at == T0 + 30 * S  # 10 s after the first, 20 s after the second
        assert errors(execution) == []

        assert at(T0 + 30 * S) == {"fired": 1}
        delivery.refresh_from_db()
        assert (delivery.status, delivery.attempts, delivery.retry_at) == (
            DeliveryStatus.FAILED,
            3,
            None,
        )
        assert delivery.reason == (
            "not sent after 3 attempts: NotSent: the gateway refused the connection"
        )
        assert not RouteTimer.objects.exists()
        assert errors(execution) == [["error.communication", "ping", None]]
        assert Flaky.calls == [key, key, key]  # one idempotency key on every attempt
        assert at(T0 + 3600 * S) == {}  # nothing more


def test_a_delayed_send_not_sent_once_is_delivered_by_its_retry_under_the_same_key() -> None:
    with configure({"max_attempts": 2, "initial_seconds": 5}):
        execution = start()
        at(T0, "later", execution)
        Flaky.script[:] = ["refused"]
        assert at(T0 + 3 * S) == {"fired": 1}
        delivery = RouteDelivery.objects.get()
        assert (delivery.status, delivery.delayed) == (DeliveryStatus.RETRYING, True)
        assert RouteTimer.objects.get().due == T0 + 8 * S
        assert at(T0 + 8 * S) == {"fired": 1}
        delivery.refresh_from_db()
        assert (delivery.status, delivery.attempts, delivery.settled) == (
            DeliveryStatus.DELIVERED,
            2,
            T0 + 8 * S,
        )
        assert Flaky.calls == [delivery.key, delivery.key]
        assert errors(execution) == []


def test_an_ambiguous_failure_is_failed_at_once_and_never_retried() -> None:
    with configure({"max_attempts": 5}):
        execution = start()
        Flaky.script[:] = ["ambiguous"]
        at(T0, "now", execution)
        delivery = RouteDelivery.objects.get()
        assert (delivery.status, delivery.attempts) == (DeliveryStatus.FAILED, 1)
        assert delivery.reason == "TimeoutError: no answer after the request was written"
        assert not RouteTimer.objects.exists()
        assert errors(execution) == [["error.communication", "ping", None]]
        assert at(T0 + 3600 * S) == {}
        assert len(Flaky.calls) == 1


def test_without_a_policy_a_not_sent_failure_fails_at_once_as_before() -> None:
    with configure():
        execution = start()
        Flaky.script[:] = ["not_sent"]
        at(T0, "now", execution)
        delivery = RouteDelivery.objects.get()
        assert (delivery.status, delivery.reason) == (
            DeliveryStatus.FAILED,
            "NotSent: the gateway refused the connection",
        )
        assert not RouteTimer.objects.exists()
        assert errors(execution) == [["error.communication", "ping", None]]


def test_a_non_retryable_class_fails_at_once_whether_raised_or_the_cause() -> None:
    with configure({"max_attempts": 5, "non_retryable": ["socket.gaierror"]}):
        assert retrying.policy_of("flaky").non_retryable == (socket.gaierror,)
        dns, refused = start(), start()
        Flaky.script[:] = ["dns", "refused"]
        at(T0, "now", dns)
        at(T0, "now", refused)
        failed = RouteDelivery.objects.get(execution=dns)
        assert failed.status == DeliveryStatus.FAILED
        assert failed.reason == ("not sent: gaierror is not retryable: NotSent: no such host")
        assert errors(dns) == [["error.communication", "ping", None]]
        # The same policy retries a refused connection (not in its non_retryable list).
        assert RouteDelivery.objects.get(execution=refused).status == DeliveryStatus.RETRYING
        assert errors(refused) == []


def test_the_jitter_is_derived_from_the_key_so_the_due_is_the_same_every_time() -> None:
    with configure({"max_attempts": 3, "initial_seconds": 100, "jitter": 0.5}):
        first, second = start(), start()
        Flaky.script[:] = ["not_sent", "not_sent"]
        at(T0, "now", first)
        at(T0, "now", second)
        policy = retrying.policy_of("flaky")
        dues = {}
        for execution in (first, second):
            delivery = RouteDelivery.objects.get(execution=execution)
            expected = policy.backoff(1, delivery.key)
            assert 50 <= expected <= 150
            assert delivery.retry_at == T0 + timedelta(seconds=expected)
            assert RouteTimer.objects.get(key=delivery.key).due == delivery.retry_at
            dues[delivery.key] = delivery.retry_at
        assert len(set(dues.values())) == 2  # two keys, two dues: failures spread out
    # A replay (another process, the same numbers) computes the same backoff from the key.
    again = RetryPolicy(
        max_attempts=3, initial_seconds=100, coefficient=2, maximum_seconds=3600, jitter=0.5
    )
    for key, due in dues.items():
        assert T0 + timedelta(seconds=again.backoff(1, key)) == due


def test_give_up_answers_end_the_key_at_once_and_the_chart_hears_it() -> None:
    with configure({"max_attempts": 5}):
        cancelled, discarded = start(), start()
        Flaky.script[:] = ["cancel", "discard"]
        at(T0, "now", cancelled)
        at(T0, "now", discarded)
        one = RouteDelivery.objects.get(execution=cancelled)
        assert (one.status, one.reason, one.attempts, one.settled) == (
            DeliveryStatus.CANCELLED,
            "cancelled by the route: the customer unsubscribed",
            1,
            T0,
        )
        other = RouteDelivery.objects.get(execution=discarded)
        assert (other.status, other.reason) == (DeliveryStatus.DISCARDED, "discarded by the route")
        assert not RouteTimer.objects.exists()
        assert errors(cancelled) == [["error.communication", "ping", "cancelled"]]
        assert errors(discarded) == [["error.communication", "ping", "discarded"]]


def test_a_waiting_retry_is_cancelled_by_cancel_and_discarded_when_its_execution_ends() -> None:
    with configure({"max_attempts": 3, "initial_seconds": 10}):
        stopped, ended = start(), start()
        Flaky.script[:] = ["not_sent", "not_sent"]
        at(T0, "now", stopped)
        at(T0, "now", ended)
        at(T0 + S, "stop", stopped)  # <cancel sendid="ping">: the retry row is that send
        at(T0 + S, "quit", ended)
        cancelled = RouteDelivery.objects.get(execution=stopped)
        assert (cancelled.status, cancelled.reason) == (
            DeliveryStatus.CANCELLED,
            "cancelled by <cancel> in step 3",
        )
        assert RouteTimer.objects.filter(execution=stopped).count() == 0
        assert at(T0 + 10 * S) == {"discarded": 1}
        discarded = RouteDelivery.objects.get(execution=ended)
        assert (discarded.status, discarded.reason) == (
            DeliveryStatus.DISCARDED,
            "execution completed before it was due",
        )
        assert len(Flaky.calls) == 2  # neither was attempted again


def test_a_repeat_of_the_outbox_message_never_takes_a_waiting_retry() -> None:
    with configure({"max_attempts": 3, "initial_seconds": 10}):
        execution = start()
        Flaky.script[:] = ["not_sent"]
        at(T0, "now", execution)
        message = OutboxMessage.objects.get(kind=delivering.KIND)
        assert delivering.deliver_message(message, []) is True  # the sweeper, after a crash
        assert len(Flaky.calls) == 1
        assert RouteDelivery.objects.get().status == DeliveryStatus.RETRYING
        assert at(T0 + 10 * S) == {"fired": 1}  # the retry row is what delivers it
        assert RouteDelivery.objects.get().status == DeliveryStatus.DELIVERED
        assert len(Flaky.calls) == 2


def test_without_a_route_timer_queue_a_not_sent_failure_fails_at_once() -> None:
    with configure({"max_attempts": 3}, ROUTE_TIMER_QUEUE=None):
        execution = start()
        Flaky.script[:] = ["not_sent"]
        at(T0, "now", execution)
        delivery = RouteDelivery.objects.get()
        assert delivery.status == DeliveryStatus.FAILED
        assert delivery.reason.startswith("not sent, and no route timer queue to retry it: ")
        assert errors(execution) == [["error.communication", "ping", None]]


class RefusingQueue:
    """A route timer queue that refuses every entry (a custom ROUTE_TIMER_QUEUE gone wrong)."""

    def schedule(self, entry: Any) -> None:
        raise RuntimeError("the queue is full")

    def cancel(self, scope: int, send_id: str, *, now: datetime, reason: str) -> int:
        return 0


def test_a_retry_the_queue_refuses_fails_the_key_and_writes_nothing() -> None:
    with configure({"max_attempts": 3}, ROUTE_TIMER_QUEUE=RefusingQueue):
        execution = start()
        Flaky.script[:] = ["not_sent"]
        at(T0, "now", execution)
        delivery = RouteDelivery.objects.get()
        assert (delivery.status, delivery.retry_at) == (DeliveryStatus.FAILED, None)
        assert delivery.reason.startswith(
            "not sent, and its retry could not be scheduled (RuntimeError: the queue is full): "
        )
        assert errors(execution) == [["error.communication", "ping", None]]


def test_basic_http_retries_a_refused_connection_then_fails_it() -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there: every connection is refused
    options = {k: list(v) if isinstance(v, tuple) else v for k, v in LOOPBACK_OPTIONS.items()}
    chart = f"""<scxml {NS} initial="s">
      <datamodel><data id="errors" expr="[]"/></datamodel>
      <state id="s">
        <onentry><send id="hook" type="basichttp" target="http://127.0.0.1:{port}/in"
                       event="paid"/></onentry>
        <transition event="error.*">
          <assign location="errors" expr="errors.concat([[_event.name, _event.sendid, null]])"/>
        </transition>
      </state>
    </scxml>"""
    from django.conf import settings

    routes = {
        "basichttp": {
            "ROUTE": "routes.basichttp.BasicHTTPRoute",
            "TYPES": ["basichttp"],
            "OPTIONS": options,
            "RETRY": {"max_attempts": 2, "initial_seconds": 1},
        }
    }
    with override_settings(
        STATECHARTS={**settings.STATECHARTS, "ROUTES": routes, "CLOCK": lambda: clock["now"]}
    ):
        execution = stepper.start(Chart.objects.load(chart), now=T0)
        delivery = RouteDelivery.objects.get()
        assert delivery.status == DeliveryStatus.RETRYING
        assert "NotPosted: the POST was not sent" in delivery.reason
        assert at(T0 + S) == {"fired": 1}
        delivery.refresh_from_db()
        assert (delivery.status, delivery.attempts) == (DeliveryStatus.FAILED, 2)
        assert delivery.reason.startswith("not sent after 2 attempts: NotPosted: ")
        assert errors(execution) == [["error.communication", "hook", None]]


@pytest.mark.parametrize(
    ("retry", "message"),
    [
        ({"max_attempts": 0}, "['max_attempts'] must be an integer of at least 1, not 0"),
        ({"max_attempts": 2.5}, "['max_attempts'] must be an integer of at least 1"),
        ({"jitter": 2}, "['jitter'] must be a number of at least 0 and at most 1, not 2"),
        ({"coefficient": "2"}, "['coefficient'] must be a number of at least 1"),
        ({"non_retryable": ["no.such.Error"]}, "'no.such.Error' cannot be imported"),
        ({"non_retryable": ["os.path"]}, "'os.path' is not an exception class"),
        ({"non_retryable": "socket.gaierror"}, "must be a list of dotted paths"),
        ({"attempts": 3}, "has unknown keys ['attempts']"),
        (["max_attempts"], "must be a dict of policy field -> value"),
    ],
)
def test_a_bad_retry_policy_in_settings_is_refused_by_check(retry: Any, message: str) -> None:
    routes = {
        "flaky": {"ROUTE": "tests.routes.recording.Flaky", "TYPES": ["flaky"], "RETRY": retry}
    }
    found = checks.check({"ROUTES": routes})
    assert [problem.id for problem in found] == ["routes.E001"]
    assert message in found[0].msg
    assert found[0].msg.startswith("STATECHARTS['ROUTES']: ['flaky']['RETRY'] ")


def test_the_global_defaults_are_checked_and_a_route_policy_fills_from_them() -> None:
    found = checks.check({"ROUTE_RETRY_JITTER": 1.5, "ROUTE_MAX_ATTEMPTS": 0})
    assert sorted(problem.id for problem in found) == ["routes.E003", "routes.E003"]
    with configure({"max_attempts": 4}, ROUTE_RETRY_SECONDS=7, ROUTE_RETRY_MAX_SECONDS=60):
        policy = retrying.policy_of("flaky")
        assert (policy.max_attempts, policy.initial_seconds, policy.maximum_seconds) == (4, 7, 60)
        assert (policy.coefficient, policy.jitter) == (2.0, 0.0)
    with configure():
        assert retrying.policy_of("flaky").max_attempts == 1  # the default: no retry


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_retry_racing_its_cancel_has_exactly_one_fate() -> None:
    """The fire of a retry row and the step that cancels its send, released together on two
    threads (PostgreSQL row locks): the key ends delivered (called twice: the not-sent
    attempt and the retry) or cancelled (called once), never both, never more."""
    import threading
    from collections import Counter

    from tests.timers.test_timer_races import JOIN_TIMEOUT, run_threads
    from timers import routequeue

    trials, pairs = 40, 4
    with configure({"max_attempts": 3, "initial_seconds": 10}):
        chart = Chart.objects.load(CHART, name="retries")
        executions = [stepper.start(chart, now=T0) for _ in range(trials)]
        Flaky.script[:] = ["not_sent"] * trials
        for execution in executions:
            at(T0, "now", execution)
        rows = {row.execution_id: row.pk for row in RouteTimer.objects.all()}
        assert len(rows) == trials
        when = T0 + 10 * S
        clock["now"] = when
        fired: dict[int, str] = {}
        barriers = [threading.Barrier(2, timeout=JOIN_TIMEOUT) for _ in range(pairs)]

        def firer(mine: list[int], barrier: threading.Barrier) -> Any:
            def run() -> None:
                for pk in mine:
                    barrier.wait()
                    fired[pk] = routequeue.fire(rows[pk], now=when)

            return run

        def canceller(mine: list[int], barrier: threading.Barrier) -> Any:
            def run() -> None:
                for pk in mine:
                    barrier.wait()
                    stepper.send(pk, "stop", now=when)

            return run

        pks = [execution.pk for execution in executions]
        targets = []
        for k, barrier in enumerate(barriers):
            targets += [firer(pks[k::pairs], barrier), canceller(pks[k::pairs], barrier)]
        assert run_threads(targets, barriers) == []
        assert not RouteTimer.objects.exists()
        calls = Counter(Flaky.calls)
        fates: Counter[str] = Counter()
        for delivery in RouteDelivery.objects.filter(execution_id__in=pks):
            fates[delivery.status] += 1
            if delivery.status == DeliveryStatus.DELIVERED:
                assert (calls[delivery.key], delivery.attempts) == (2, 2)
                assert fired[delivery.execution_id] == routequeue.FIRED
            else:
                assert delivery.status == DeliveryStatus.CANCELLED
                assert (calls[delivery.key], delivery.attempts) == (1, 1)
                assert fired[delivery.execution_id] == routequeue.SKIPPED
        assert sum(fates.values()) == trials
        print(f"\nretry fire vs cancel, {trials} trials: {dict(fates)}")
