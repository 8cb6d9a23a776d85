"""The stepper under concurrency: every input is one serialized, all-or-nothing transaction.

Real threads, each with its own database connection (closed when the thread ends). The row
locking tests need PostgreSQL (SQLite ignores select_for_update) and carry the postgres mark;
the others run on both vendors: on SQLite, IMMEDIATE transactions make writers wait.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pytest
from django.conf import settings
from django.db import connection, transaction
from django.test import override_settings

from statecharts import signals, stepper
from statecharts.core.plan import Instruction
from statecharts.core.position import decode
from statecharts.models import Chart, Execution, HistoryEntry, OutboxMessage
from statecharts.models.history import Disposition
from statecharts.stepper import StepContext

# Appends each "add" event's data to a list; "go" counts, pings a peer and may arm a timer.
LOGGER = """<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0"
    datamodel="ecmascript" initial="s">
  <datamodel><data id="log" expr="[]"/><data id="count" expr="0"/></datamodel>
  <state id="s">
    <transition event="add"><assign location="log" expr="log.concat([_event.data])"/></transition>
    <transition event="go">
      <assign location="count" expr="count + 1"/>
      <send event="ping" targetexpr="'#_scxml_' + _event.data.peer"/>
      <if cond="_event.data.timer"><send event="later" delay="1s"/></if>
    </transition>
  </state>
</scxml>"""

RECEIVER = """<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0"
    datamodel="ecmascript" initial="s">
  <datamodel><data id="pings" expr="0"/></datamodel>
  <state id="s"><transition event="ping"><assign location="pings" expr="pings + 1"/></transition>
  </state>
</scxml>"""

JOIN_TIMEOUT = 60.0  # bounded joins: a hung thread fails the test instead of hanging it


def datamodel(execution: Execution) -> dict[str, Any]:
    execution.refresh_from_db()
    return decode(bytes(execution.position), chart=execution.chart.content_hash).state.datamodel


def run_threads(targets: list[Callable[[], None]]) -> list[BaseException]:
    """Run each target on its own thread and connection, all released together; their errors."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(targets))

    def wrap(target: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                barrier.wait(timeout=JOIN_TIMEOUT)
                target()
            except BaseException as exc:
                errors.append(exc)
            finally:
                connection.close()

        return run

    threads = [threading.Thread(target=wrap(t), daemon=True) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=JOIN_TIMEOUT)
        assert not thread.is_alive(), "a stepping thread hung"
    return errors


def sender(pk: int, i: int, events: int) -> Callable[[], None]:
    def run() -> None:
        for n in range(events):
            result = stepper.send(pk, "add", {"sender": i, "n": n})
            assert result.applied

    return run


def assert_all_applied_once(execution: Execution, senders: int, events: int) -> None:
    log = datamodel(execution)["log"]
    assert len(log) == senders * events
    pairs = [(item["sender"], item["n"]) for item in log]
    assert len(set(pairs)) == len(pairs), "an event was applied twice"
    assert set(pairs) == {(i, n) for i in range(senders) for n in range(events)}, "lost events"
    for i in range(senders):
        ns = [n for s, n in pairs if s == i]
        assert ns == sorted(ns), f"sender {i}'s events were reordered: {ns}"

    history = list(HistoryEntry.objects.filter(execution=execution).order_by("seq"))
    assert [h.seq for h in history] == list(range(1, senders * events + 2))
    assert all(h.disposition == Disposition.APPLIED for h in history)
    assert execution.steps == senders * events + 1
    # The history order is the order the datamodel saw the events in.
    assert [h.input["event"]["data"] for h in history[1:]] == log


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_many_senders_to_one_execution_lose_nothing_and_apply_nothing_twice() -> None:
    senders, events = 8, 25
    execution = stepper.start(Chart.objects.load(LOGGER))

    started = time.perf_counter()
    errors = run_threads([sender(execution.pk, i, events) for i in range(senders)])
    elapsed = time.perf_counter() - started

    assert errors == []
    assert_all_applied_once(execution, senders, events)
    print(f"{senders * events} concurrent steps on one execution in {elapsed:.2f}s")


@pytest.mark.django_db(transaction=True)
def test_two_threads_stepping_one_execution_both_succeed() -> None:
    # On SQLite the second writer waits for the first (IMMEDIATE + timeout) instead of
    # failing with "database is locked"; on PostgreSQL it waits on the row lock.
    senders, events = 2, 20
    execution = stepper.start(Chart.objects.load(LOGGER))

    errors = run_threads([sender(execution.pk, i, events) for i in range(senders)])

    assert errors == []
    assert_all_applied_once(execution, senders, events)


def backend_waits_on_lock(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid])
        row = cursor.fetchone()
    return row is not None and row[0] == "Lock"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_locked_execution_does_not_hold_up_the_others() -> None:
    chart = Chart.objects.load(LOGGER)
    held, other = stepper.start(chart), stepper.start(chart)
    locked, release = threading.Event(), threading.Event()
    waiter_pid: list[int] = []
    waiter_ready = threading.Event()
    errors: list[BaseException] = []

    def holder() -> None:
        try:
            with transaction.atomic():
                Execution.objects.select_for_update().get(pk=held.pk)
                locked.set()
                assert release.wait(timeout=JOIN_TIMEOUT)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    def step(pk: int, data: dict[str, Any], ready: threading.Event | None = None) -> None:
        try:
            if ready is not None:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_backend_pid()")
                    waiter_pid.append(cursor.fetchone()[0])
                ready.set()
            assert stepper.send(pk, "add", data).applied
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    holding = threading.Thread(target=holder, daemon=True)
    holding.start()
    try:
        assert locked.wait(timeout=JOIN_TIMEOUT)

        # A step on the held execution waits for the row lock...
        waiting = threading.Thread(
            target=step, args=(held.pk, {"who": "waiter"}, waiter_ready), daemon=True
        )
        waiting.start()
        assert waiter_ready.wait(timeout=JOIN_TIMEOUT)
        deadline = time.monotonic() + JOIN_TIMEOUT
        while not backend_waits_on_lock(waiter_pid[0]):
            assert time.monotonic() < deadline, "the step on the held execution never blocked"
            assert waiting.is_alive(), f"the step went through a held lock: {errors}"

        # ...while a step on another execution goes through meanwhile.
        stepping = threading.Thread(target=step, args=(other.pk, {"who": "other"}), daemon=True)
        stepping.start()
        stepping.join(timeout=JOIN_TIMEOUT)
        assert not stepping.is_alive(), "a step on another execution waited for the held lock"
        assert errors == []
        assert datamodel(other)["log"] == [{"who": "other"}]
        assert waiting.is_alive() and backend_waits_on_lock(waiter_pid[0])
        assert datamodel(held)["log"] == []
    finally:
        release.set()
        holding.join(timeout=JOIN_TIMEOUT)

    waiting.join(timeout=JOIN_TIMEOUT)
    assert not waiting.is_alive()
    assert errors == []
    assert datamodel(held)["log"] == [{"who": "waiter"}]
    assert held.steps == other.steps == 2


@pytest.mark.django_db(transaction=True)
def test_concurrent_outbox_deliverers_deliver_each_message_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    messages, deliverers = 30, 4
    execution = stepper.start(Chart.objects.load(LOGGER))
    peer = stepper.start(Chart.objects.load(RECEIVER))
    with monkeypatch.context() as patch:
        # Committed but never delivered: what a process that died after its commits leaves.
        patch.setattr(stepper, "deliver", lambda ids, **_kw: 0)
        for _ in range(messages):
            assert stepper.send(execution.pk, "go", {"peer": peer.session_id}).applied
    assert OutboxMessage.objects.pending().count() == messages

    counts: list[int] = []
    errors = run_threads([lambda: counts.append(stepper.deliver_pending())] * deliverers)

    assert errors == []
    assert sum(counts) == messages, counts
    assert OutboxMessage.objects.pending().count() == 0
    assert OutboxMessage.objects.filter(status="delivered").count() == messages
    assert datamodel(peer)["pings"] == messages
    history = HistoryEntry.objects.filter(execution=peer)
    assert history.count() == messages + 1
    assert stepper.deliver_pending() == 0


# ---- a step that fails half-way writes nothing ------------------------------------------------


class Boom(Exception):
    pass


def explode(*_args: Any, **_kwargs: Any) -> None:
    raise Boom("half-way")


@contextmanager
def failing_step_finished() -> Iterator[None]:
    signals.step_finished.connect(explode, dispatch_uid="test_concurrency.explode")
    try:
        yield
    finally:
        signals.step_finished.disconnect(dispatch_uid="test_concurrency.explode")


TimerHandler = Callable[[StepContext, Instruction], None]


@contextmanager
def timer_handler(handler: TimerHandler) -> Iterator[None]:
    """Hand ``schedule`` instructions to ``handler`` (not to the timers app's performer)."""
    configured: dict[str, Any] = getattr(settings, "STATECHARTS", None) or {}
    performers = {**configured.get("PERFORMERS", {}), "schedule": handler}
    with override_settings(STATECHARTS={**configured, "PERFORMERS": performers}):
        yield


def failing_timer_handler(_context: StepContext, _instruction: Instruction) -> None:
    raise Boom("the timers app failed")


def failing_effect_handler() -> AbstractContextManager[None]:
    return timer_handler(failing_timer_handler)


def row_snapshot(pk: int) -> tuple[Any, ...]:
    row = Execution.objects.values_list(
        "position", "steps", "status", "configuration", "updated"
    ).get(pk=pk)
    return (bytes(row[0]), *row[1:])


@pytest.mark.parametrize(
    "fault",
    [failing_step_finished, failing_effect_handler],
    ids=["step_finished receiver raises", "effect handler raises"],
)
@pytest.mark.django_db(transaction=True)
def test_a_step_that_raises_half_way_leaves_nothing_written(
    fault: Callable[[], AbstractContextManager[None]],
) -> None:
    armed: list[int] = []

    def arm(context: StepContext, _instruction: Instruction) -> None:
        armed.append(context.seq)

    execution = stepper.start(Chart.objects.load(LOGGER))
    peer = stepper.start(Chart.objects.load(RECEIVER))
    before = row_snapshot(execution.pk)
    peer_before = row_snapshot(peer.pk)
    counts = (HistoryEntry.objects.count(), OutboxMessage.objects.count())

    data = {"peer": peer.session_id, "timer": True}
    with timer_handler(arm), fault(), pytest.raises(Boom):
        stepper.send(execution.pk, "go", data)

    assert row_snapshot(execution.pk) == before
    assert row_snapshot(peer.pk) == peer_before
    assert (HistoryEntry.objects.count(), OutboxMessage.objects.count()) == counts
    assert datamodel(execution)["count"] == 0

    # The same input, without the fault, applies once: nothing of the failed attempt (in the
    # database or in this thread's caches of positions and interpreters) leaks into it.
    armed.clear()
    with timer_handler(arm):
        result = stepper.send(execution.pk, "go", data)
    assert result.applied and result.entry.seq == 2
    assert armed == [2]
    assert datamodel(execution)["count"] == 1
    assert datamodel(peer)["pings"] == 1
    assert OutboxMessage.objects.filter(sender=execution).count() == 1
