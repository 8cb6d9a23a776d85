"""Timers on django-q2: the sweeper and drain tasks, alone and in a real cluster.

The end-to-end test starts ``manage.py qcluster`` as a subprocess on the test database (the
SQLite file or the PostgreSQL test database), with a timer that is already due in real time,
wakes a sweeper and waits (bounded, polling the database) for the cluster to fire it. It waits
for a process, never for a timer. The other tests drive ``sweep``/``drain`` directly with a
fake clock, and check what the tasks look like on the broker.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import pytest
from django.conf import settings
from django.test import override_settings
from django.utils import timezone
from django_q.brokers import get_broker
from django_q.conf import Conf
from django_q.models import OrmQ, Schedule, Task
from django_q.scheduler import scheduler
from django_q.signing import SignedPackage

from statecharts import stepper
from statecharts.conf import statecharts_settings
from statecharts.core.position import decode
from statecharts.models import Chart, Execution
from timers import dispatch, firing
from timers.models import Timer

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
# Seconds the cluster gets to fire a due timer, its own start included (about 1-1.5 s on a
# shared 2-CPU machine): past it, wait_for fails the test with the cluster's log.
DEADLINE = 30.0
POLL = 0.1
STOP_GRACE = 15.0  # seconds a SIGTERMed cluster gets to stop before it is SIGKILLed
SWEEPER_SECONDS = 2.0  # the woken sweeper's life: the cluster stops right after it

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0"'

# One delayed send to itself; started in the past, it is due the moment it exists.
ALARM = f"""<scxml {NS} datamodel="ecmascript" initial="waiting">
  <state id="waiting">
    <onentry><send id="alarm" event="ring" delay="1s"/></onentry>
    <transition event="ring" target="awake"/>
  </state>
  <state id="awake"/>
</scxml>"""

# Two ticks, due 1 s and 2 s after the start.
TICKS = f"""<scxml {NS} datamodel="ecmascript" initial="s">
  <datamodel><data id="got" expr="[]"/></datamodel>
  <state id="s">
    <onentry>
      <send event="tick" delay="1s"><param name="i" expr="1"/></send>
      <send event="tick" delay="2s"><param name="i" expr="2"/></send>
    </onentry>
    <transition event="tick"><assign location="got" expr="got.concat([_event.data.i])"/>
    </transition>
  </state>
</scxml>"""


def datamodel(execution: Execution) -> dict[str, Any]:
    execution.refresh_from_db()
    return decode(bytes(execution.position)).state.datamodel


class FakeTime:
    """``monotonic``/``sleep`` for a sweeper, and the matching wall clock (``T0`` + elapsed).

    Whole milliseconds, so 5 polls of 200 ms are exactly one second.
    """

    def __init__(self) -> None:
        self.ms = 0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.ms / 1000

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.ms += round(seconds * 1000)

    def now(self) -> datetime:
        return T0 + timedelta(milliseconds=self.ms)


# ---- sweep and drain, without a cluster ---------------------------------------------------------


ENQUEUE_ONLY = {"TIMER_SWEEPER_FIRES": False}


def fired_steps(execution: Execution) -> list[str]:
    """The events of the steps a timer's fire caused, in order (one per fire)."""
    return [
        entry.input["event"]["name"]
        for entry in execution.history.filter(seq__gt=1).order_by("seq")
        if entry.cause and "timer" in entry.cause
    ]


@pytest.mark.django_db
def test_a_sweeper_fires_a_few_due_timers_itself_without_a_drain_and_stops_at_deadline() -> None:
    fake = FakeTime()
    execution = stepper.start(Chart.objects.load(TICKS), now=T0)
    enqueued: list[str] = []

    with override_settings(STATECHARTS={"CLOCK": fake.now, "TIMER_POLL_MS": 200}):
        count = dispatch.sweep(
            3, enqueue=enqueued.append, sleep=fake.sleep, monotonic=fake.monotonic
        )

    # Each tick was fired by the sweeper at the poll that found it due: no broker hop.
    assert (count, enqueued) == (0, [])
    assert datamodel(execution)["got"] == [1, 2]
    settled = sorted(Timer.objects.values_list("settled", flat=True))
    assert settled == [T0 + timedelta(seconds=1), T0 + timedelta(seconds=2)]
    # It slept a poll whenever nothing was claimable, and returned at its deadline.
    assert set(fake.sleeps) == {0.2} and fake.ms == 3000
    assert set(Timer.objects.values_list("status", flat=True)) == {"fired"}


@pytest.mark.django_db
def test_an_enqueue_only_sweeper_enqueues_a_drain_while_claimable_timers_wait() -> None:
    fake = FakeTime()
    execution = stepper.start(Chart.objects.load(TICKS), now=T0)
    enqueued: list[tuple[float, str]] = []

    def enqueue(func: str) -> None:
        enqueued.append((fake.monotonic(), func))
        assert dispatch.drain() == 1  # a worker picks the drain up at once

    config = {"CLOCK": fake.now, "TIMER_POLL_MS": 200, **ENQUEUE_ONLY}
    with override_settings(STATECHARTS=config):
        count = dispatch.sweep(3, enqueue=enqueue, sleep=fake.sleep, monotonic=fake.monotonic)

    # Nothing before the first tick is due; one drain per due tick, none after it fired.
    assert enqueued == [(1.0, dispatch.DRAIN), (2.0, dispatch.DRAIN)]
    assert count == 2
    assert datamodel(execution)["got"] == [1, 2]
    # It polled every 200 ms and returned at its deadline: polls at 0.0, 0.2, ..., 2.8 s.
    assert fake.sleeps == [0.2] * 15 and fake.ms == 3000
    assert set(Timer.objects.values_list("status", flat=True)) == {"fired"}


@pytest.mark.django_db
def test_an_enqueued_drain_counts_until_it_had_time_to_start_and_a_held_claim_while_it_lasts() -> (
    None
):
    fake = FakeTime()
    stepper.start(Chart.objects.load(ALARM), now=T0)  # due at T0 + 1 s
    enqueued: list[float] = []

    def enqueue(func: str) -> None:
        # The first drain never starts (every worker busy); the second claims the timer for
        # two seconds and dies.
        enqueued.append(fake.monotonic())
        if len(enqueued) == 2:
            assert len(firing.claim(fake.now(), 10, lease=timedelta(seconds=2))) == 1

    config = {"CLOCK": fake.now, "TIMER_POLL_MS": 200, **ENQUEUE_ONLY}
    with override_settings(STATECHARTS=config):
        count = dispatch.sweep(4.5, enqueue=enqueue, sleep=fake.sleep, monotonic=fake.monotonic)

    # Due from 1.0 s: the drain enqueued then is on its way until 2.0 s (not one per poll);
    # the one enqueued at 2.0 s holds its claim until 4.0 s (claimable again after that).
    assert enqueued == [1.0, 2.0, 4.2]
    assert count == 3
    assert Timer.objects.get().status == "pending"  # nothing fired it


@pytest.mark.django_db
def test_a_backlog_fans_out_to_drains_for_the_free_workers_and_dead_drains_lose_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeTime()
    monkeypatch.setattr(Conf, "WORKERS", 4)
    chart = Chart.objects.load(ALARM)
    executions = [stepper.start(chart, now=T0) for _ in range(30)]  # due at T0 + 1 s
    enqueued: list[float] = []

    def enqueue(func: str) -> None:
        # Each drain starts at once, claims a batch for one second and dies.
        enqueued.append(fake.monotonic())
        assert len(firing.claim(fake.now(), 5, lease=timedelta(seconds=1))) == 5

    config = {"CLOCK": fake.now, "TIMER_POLL_MS": 200, "TIMER_BATCH": 5}
    with override_settings(STATECHARTS=config):
        count = dispatch.sweep(3, enqueue=enqueue, sleep=fake.sleep, monotonic=fake.monotonic)

        # At 1.0 s: 30 due, 4 batches' worth counted, so 3 drains for the 3 other workers.
        # Their claims then count as firers: the sweeper fires the other 15 itself, batch
        # after batch, and enqueues no more. At 2.2 s their leases have run out: 15
        # claimable suspects, which the sweeper leaves to a drain (it dies too, holding 5).
        assert enqueued == [1.0, 1.0, 1.0, 2.2] and count == 4
        pending = Timer.objects.filter(status="pending")
        assert sorted(pending.values_list("attempts", flat=True)) == [0] * 10 + [1] * 5

        # A later sweeper (the schedule's next one), whose drain works: the dead drain's claim
        # counts as a firer until its lease has run out (3.2 s), then one drain takes all 15.
        drains: list[tuple[float, int]] = []
        again = dispatch.sweep(
            2,
            enqueue=lambda func: drains.append((fake.monotonic(), dispatch.drain())),
            sleep=fake.sleep,
            monotonic=fake.monotonic,
        )

    assert again == 1 and drains == [(3.4, 15)]
    attempts = sorted(Timer.objects.values_list("attempts", flat=True))
    assert attempts == [0] * 15 + [1] * 10 + [2] * 5  # one per claim a dead firer left
    # Every timer fired once, and every execution stepped once on it: nothing lost, nothing
    # fired twice.
    assert set(Timer.objects.values_list("status", flat=True)) == {"fired"}
    for execution in executions:
        assert fired_steps(execution) == ["ring"]
        execution.refresh_from_db()
        assert execution.configuration == ["awake"] and execution.steps == 2


@pytest.mark.django_db
def test_a_sweeper_that_dies_while_firing_leaves_its_timers_to_the_next_one_after_the_lease(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeTime()
    chart = Chart.objects.load(ALARM)
    executions = [stepper.start(chart, now=T0) for _ in range(3)]  # due at T0 + 1 s

    def dies(**kwargs: Any) -> firing.FireReport:
        firing.claim(fake.now(), 10)  # its claim is written, then the worker dies
        raise SystemExit("worker killed")

    config = {"CLOCK": fake.now, "TIMER_POLL_MS": 200}
    with override_settings(STATECHARTS=config):
        monkeypatch.setattr(dispatch, "fire_due", dies)
        with pytest.raises(SystemExit):
            dispatch.sweep(2, enqueue=lambda func: None, sleep=fake.sleep, monotonic=fake.monotonic)
        assert fake.ms == 1000  # it died at the poll that found them due
        monkeypatch.undo()
        # The next sweeper: nothing is claimable until the lease (3 s) has run out. Then the
        # timers are suspects (their claim was left unsettled): the sweeper does not fire
        # them itself (one may be what killed it), it enqueues a drain for them.
        enqueued: list[float] = []

        def enqueue(func: str) -> None:
            enqueued.append(fake.monotonic())
            assert dispatch.drain() == 3

        dispatch.sweep(4, enqueue=enqueue, sleep=fake.sleep, monotonic=fake.monotonic)

    assert enqueued == [4.2]  # the first poll after 1 s + 3 s
    for timer in Timer.objects.all():
        assert (timer.status, timer.attempts) == ("fired", 1)  # the dead claim's attempt spent
        assert timer.settled == T0 + timedelta(seconds=4.2)
    for execution in executions:
        assert fired_steps(execution) == ["ring"]


@pytest.mark.parametrize(
    ("fresh", "suspects", "fires", "on_the_way", "wanted"),
    [
        (1, 0, True, 0, 0),  # one batch: the sweeper's own
        (100, 0, True, 0, 0),
        (101, 0, True, 0, 1),
        (400, 0, True, 0, 3),  # four batches: one per worker, the sweeper one of them
        (10_000, 0, True, 0, 3),  # never more than the workers can run at once
        (400, 0, True, 2, 1),
        (400, 0, True, 5, 0),
        (0, 3, False, 0, 1),  # suspects: a drain, never the sweeper
        (0, 20, False, 0, 1),  # a drain per chunk of suspects (a claim takes at most one)
        (0, 21, False, 0, 2),
        (0, 100, False, 0, 4),  # a dead firer's full batch: every worker (5 chunks, 4 workers)
        (0, 100, False, 1, 3),
        (50, 3, True, 0, 1),
        (50, 40, True, 0, 2),
        (400, 3, True, 0, 3),
        (1, 0, False, 0, 1),
        (400, 0, False, 0, 4),
        (400, 0, False, 1, 3),
    ],
)
def test_drains_wanted(
    fresh: int, suspects: int, fires: bool, on_the_way: int, wanted: int
) -> None:
    found = dispatch.drains_wanted(
        fresh,
        suspects=suspects,
        batch=100,
        workers=4,
        sweeper_fires=fires,
        on_the_way=on_the_way,
        chunk=20,
    )
    assert found == wanted


@pytest.mark.django_db
def test_a_sweeper_with_nothing_due_enqueues_nothing() -> None:
    fake = FakeTime()
    stepper.start(Chart.objects.load(ALARM), now=T0 + timedelta(hours=1))
    enqueued: list[str] = []
    with override_settings(STATECHARTS={"CLOCK": fake.now, "TIMER_POLL_MS": 500}):
        count = dispatch.sweep(
            2, enqueue=enqueued.append, sleep=fake.sleep, monotonic=fake.monotonic
        )
    assert (count, enqueued, fake.sleeps) == (0, [], [0.5] * 4)


@pytest.mark.parametrize("sweeper_fires", [True, False])
@pytest.mark.django_db
def test_an_idle_sweeper_wakes_at_a_timers_due_instead_of_a_poll_later(
    sweeper_fires: bool,
) -> None:
    fake = FakeTime()
    early = ALARM.replace('delay="1s"', 'delay="350ms"')
    execution = stepper.start(Chart.objects.load(early), now=T0)  # due at 0.35 s
    enqueued: list[float] = []

    def enqueue(func: str) -> None:
        enqueued.append(fake.monotonic())
        assert dispatch.drain() == 1

    config = {"CLOCK": fake.now, "TIMER_POLL_MS": 200, "TIMER_SWEEPER_FIRES": sweeper_fires}
    with override_settings(STATECHARTS=config):
        count = dispatch.sweep(1, enqueue=enqueue, sleep=fake.sleep, monotonic=fake.monotonic)

    # Polls at 0.0 and 0.2 s find nothing due; the second sees the timer due within the
    # poll and sleeps only until it (0.15 s), so it is fired (by the sweeper, or by the drain
    # it enqueues) at 0.35 s, not 0.4 s.
    assert enqueued == ([] if sweeper_fires else [0.35]) and count == len(enqueued)
    assert fake.sleeps[:3] == [0.2, 0.15, 0.2]
    assert Timer.objects.get().settled == T0 + timedelta(milliseconds=350)
    execution.refresh_from_db()
    assert execution.configuration == ["awake"]


@pytest.mark.django_db
def test_drain_fires_everything_due_batch_after_batch_and_nothing_early() -> None:
    chart = Chart.objects.load(ALARM)
    due = [stepper.start(chart, now=T0) for _ in range(5)]  # due at T0 + 1 s
    later = stepper.start(chart, now=T0 + timedelta(minutes=1))
    config = {"CLOCK": lambda: T0 + timedelta(seconds=1), "TIMER_BATCH": 2}
    with override_settings(STATECHARTS=config):
        assert dispatch.drain() == 5  # three batches: 2, 2, 1
        assert dispatch.drain() == 0
    for execution in due:
        execution.refresh_from_db()
        assert execution.configuration == ["awake"]
    later.refresh_from_db()
    assert later.configuration == ["waiting"]
    assert Timer.objects.get(execution=later).status == "pending"


@pytest.mark.django_db
def test_drain_returns_when_its_time_is_up_leaving_the_rest_claimable() -> None:
    chart = Chart.objects.load(ALARM)
    for _ in range(5):
        stepper.start(chart, now=T0)
    ticks = iter(range(100))
    at = T0 + timedelta(seconds=1)
    with override_settings(STATECHARTS={"CLOCK": lambda: at, "TIMER_BATCH": 2}):
        # The clock reads 0 at the start and one second more after each batch.
        assert dispatch.drain(seconds=1.5, monotonic=lambda: float(next(ticks))) == 4
        assert Timer.objects.claimable(at).count() == 1  # the next sweeper poll sees it
        assert dispatch.drain() == 1
    assert Timer.objects.pending().count() == 0


@pytest.mark.django_db
def test_a_drain_waits_for_a_timer_due_within_a_poll_instead_of_ending() -> None:
    fake = FakeTime()
    fake.ms = 1000
    chart = Chart.objects.load(ALARM)
    stepper.start(chart, now=T0)  # due at 1.0 s
    stepper.start(chart, now=T0 + timedelta(milliseconds=150))  # due at 1.15 s
    stepper.start(chart, now=T0 + timedelta(milliseconds=500))  # due at 1.5 s
    with override_settings(STATECHARTS={"CLOCK": fake.now, "TIMER_POLL_MS": 200}):
        fired = dispatch.drain(monotonic=fake.monotonic, sleep=fake.sleep)

    # It fired the first, waited 150 ms for the second and fired it; the third was not due
    # within a poll of that, so it ended (the sweeper sees it when it is due).
    assert fired == 2 and fake.sleeps == [0.15]
    assert list(Timer.objects.order_by("due").values_list("status", flat=True)) == [
        "fired",
        "fired",
        "pending",
    ]


def test_the_clusters_timeout_and_retry_outlast_a_sweeper(monkeypatch: pytest.MonkeyPatch) -> None:
    sweep_seconds = statecharts_settings.TIMER_SWEEP_SECONDS
    q = settings.Q_CLUSTER
    assert q["timeout"] > sweep_seconds and q["retry"] > q["timeout"]
    assert dispatch.task_budget() == sweep_seconds  # not cut short by this project's cluster
    # Another host's cluster: a sweeper ends before its timeout kills it or its retry
    # re-delivers it.
    monkeypatch.setattr(Conf, "TIMEOUT", 60)
    assert dispatch.task_budget() == 50
    monkeypatch.setattr(Conf, "TIMEOUT", None)
    monkeypatch.setattr(Conf, "RETRY", 30)
    assert dispatch.task_budget() == 20
    monkeypatch.setattr(Conf, "RETRY", 8)
    assert dispatch.task_budget() == 4


# ---- the tasks as django-q2 sees them ----------------------------------------------------------


def queued() -> list[dict[str, Any]]:
    """The task packages waiting on the ORM broker, oldest first."""
    return [SignedPackage.loads(row.payload) for row in OrmQ.objects.order_by("id")]


@pytest.mark.django_db
def test_wake_and_the_drains_go_to_the_broker_acked_on_failure() -> None:
    task_id = dispatch.wake(seconds=2)
    dispatch._enqueue(dispatch.DRAIN)
    sweeper, drain = queued()
    assert sweeper["id"] == task_id
    assert (sweeper["func"], sweeper["args"], sweeper["kwargs"]) == (
        dispatch.SWEEP,
        (),
        {"seconds": 2},
    )
    assert (drain["func"], drain["kwargs"]) == (dispatch.DRAIN, {})
    assert sweeper["save"] is True and drain["save"] is False  # a drain's success is not kept
    assert sweeper["ack_failure"] is True and drain["ack_failure"] is True


# The scheduler closes "old" connections first, which a test's open transaction would be.
@pytest.mark.django_db(transaction=True)
def test_the_schedule_starts_a_sweeper_with_the_same_options() -> None:
    dispatch.ensure_schedule()
    dispatch.ensure_schedule()  # idempotent
    # (other apps keep schedules of their own: the outbox and invocations sweepers)
    schedule = Schedule.objects.get(name=dispatch.SCHEDULE_NAME)
    assert (schedule.name, schedule.func, schedule.minutes) == (
        dispatch.SCHEDULE_NAME,
        dispatch.SWEEP,
        1,
    )
    Schedule.objects.filter(pk=schedule.pk).update(next_run=timezone.now() - timedelta(seconds=1))
    scheduler(broker=get_broker())  # what the cluster's guard runs every ~30 s
    (task,) = [task for task in queued() if task["func"] == dispatch.SWEEP]
    assert (task["func"], task["args"], task["kwargs"]) == (dispatch.SWEEP, (), {})
    assert task["ack_failure"] is True
    schedule.refresh_from_db()
    assert schedule.next_run > timezone.now()


# ---- a real cluster ---------------------------------------------------------------------------


Spawn = Callable[..., "subprocess.Popen[str]"]  # the conftest's ``spawn`` fixture


@contextmanager
def qcluster(spawn: Spawn, log: IO[str]) -> Iterator[subprocess.Popen[str]]:
    """``manage.py qcluster`` on the test database; SIGTERMed on exit (SIGKILLed if it hangs)."""
    cluster = spawn(
        ["manage.py", "qcluster"],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: the fallback kills its children too
    )
    try:
        yield cluster
    finally:
        if cluster.poll() is None:
            cluster.send_signal(signal.SIGTERM)
            try:
                cluster.wait(timeout=STOP_GRACE)
            except subprocess.TimeoutExpired:
                os.killpg(cluster.pid, signal.SIGKILL)
                cluster.wait(timeout=STOP_GRACE)


def wait_for(
    condition: Callable[[], bool], cluster: subprocess.Popen[str], log: IO[str], what: str
) -> float:
    """Poll the database until ``condition`` holds; the seconds it took. Fails at DEADLINE or
    if the cluster exits."""
    started = time.monotonic()
    while not condition():
        if cluster.poll() is not None:
            pytest.fail(f"the cluster exited ({cluster.returncode}) before {what}:\n{read(log)}")
        if time.monotonic() - started > DEADLINE:
            pytest.fail(f"no {what} after {DEADLINE}s; the cluster's log:\n{read(log)}")
        time.sleep(POLL)  # polling the database for another process, not waiting for a timer
    return time.monotonic() - started


def read(log: IO[str]) -> str:
    log.flush()
    log.seek(0)
    return log.read()[-10_000:]


@pytest.mark.parametrize("via", ["sweeper", "drain"])
@pytest.mark.django_db(transaction=True)
def test_a_real_cluster_fires_a_due_timer(
    via: str, monkeypatch: pytest.MonkeyPatch, spawn: Spawn
) -> None:
    """By a woken sweeper (which fires it itself), or by a drain enqueued directly (what a
    sweeper enqueues for a backlog, or always with TIMER_SWEEPER_FIRES off); or by the
    sweeper the starting cluster enqueued itself (TIMER_SWEEP_AT_START), whichever is first."""
    started = timezone.now()
    # Started a minute ago with a 1 s delay: due in real time before the cluster exists.
    execution = stepper.start(Chart.objects.load(ALARM), now=started - timedelta(minutes=1))
    timer = Timer.objects.get(execution=execution)
    assert timer.status == "pending" and timer.due < started

    def not_here(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the test process must not fire timers")

    monkeypatch.setattr(firing, "claim", not_here)
    monkeypatch.setattr(firing, "fire", not_here)

    def fired() -> bool:
        return Timer.objects.filter(pk=timer.pk, status="fired").exists()

    def done() -> bool:  # the sweeper saved, every task acknowledged but the start-up sweeper
        saved = via == "drain" or Task.objects.filter(id=sweeper).exists()
        return saved and [task["func"] for task in queued()] in ([], [dispatch.SWEEP])

    with tempfile.TemporaryFile("w+") as log, qcluster(spawn, log) as cluster:
        if via == "sweeper":
            sweeper = dispatch.wake(seconds=SWEEPER_SECONDS)
        else:
            dispatch._enqueue(dispatch.DRAIN)
        wait_for(fired, cluster, log, "fired timer")  # (within DEADLINE, or the test fails)
        wait_for(done, cluster, log, f"finished {via}")
        assert cluster.poll() is None, read(log)
    assert cluster.returncode == 0, "the cluster did not stop cleanly on SIGTERM"

    # The cluster delivered it, on the real clock, to the next state.
    timer.refresh_from_db()
    assert timer.status == "fired" and timer.settled is not None and timer.settled >= started
    execution.refresh_from_db()
    assert execution.configuration == ["awake"] and execution.steps == 2
    entry = execution.history.get(seq=2)
    assert entry.input["event"]["name"] == "ring"
    if via == "sweeper":
        # The sweeper ran in the cluster and was saved; it fired the one timer itself and
        # enqueued no drain (its result).
        task = Task.objects.get(id=sweeper)
        assert task.success and task.func == dispatch.SWEEP and task.result == 0
        others = Task.objects.exclude(id=sweeper)
    else:
        others = Task.objects.all()
    # A drain that succeeded is not saved (save=False), and nothing failed; the start-up
    # sweeper, stopped with the cluster, is saved like any sweeper.
    assert list(others.values_list("func", "success")) in ([], [(dispatch.SWEEP, True)])
    assert not OrmQ.objects.exists()  # every task was acknowledged


@pytest.mark.django_db
def test_a_sweeper_stops_at_its_next_poll_when_its_worker_is_told_to_stop() -> None:
    """Ctrl-C or a deploy must not wait out a 90 s sweeper (django-q2 waits for tasks)."""
    before = signal.getsignal(signal.SIGINT)
    polls: list[float] = []

    def sleep(seconds: float) -> None:
        polls.append(seconds)
        if len(polls) == 2:
            os.kill(os.getpid(), signal.SIGINT)  # what a terminal's Ctrl-C sends the group

    enqueued = dispatch.sweep(3600, enqueue=lambda func: None, sleep=sleep)
    assert enqueued == 0
    assert len(polls) == 2  # it stopped right after the signal, not after an hour
    assert signal.getsignal(signal.SIGINT) is before  # the worker's own handling is restored


# ---- a cluster that starts (again) -----------------------------------------------------------


@pytest.fixture
def start_flag(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A fresh once-per-cluster flag, as a newly started cluster has."""
    import multiprocessing

    flag = multiprocessing.get_context("fork").Value("b", 0)
    monkeypatch.setattr(dispatch, "_started_at_start", flag)
    return flag


@pytest.mark.django_db
def test_the_first_worker_of_a_starting_cluster_enqueues_one_sweeper_the_others_none(
    start_flag: Any,
) -> None:
    """Four workers spawn, and later a replacement for a dead one: one sweeper, enqueued by
    the first, with the sweepers' options (the scheduled sweepers cover the rest)."""
    answers = [dispatch.sweep_at_start(proc_name=f"Process-{n}") for n in range(5)]
    assert answers[0] is not None and answers[1:] == [None] * 4
    (task,) = queued()
    assert (task["id"], task["func"], task["kwargs"], task["ack_failure"]) == (
        answers[0],
        dispatch.SWEEP,
        {},
        True,
    )


@pytest.mark.django_db
def test_no_start_up_sweeper_when_switched_off_and_a_failing_broker_does_not_kill_the_worker(
    start_flag: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with override_settings(STATECHARTS={**settings.STATECHARTS, "TIMER_SWEEP_AT_START": False}):
        assert dispatch.sweep_at_start(proc_name="Process-1") is None
    assert queued() == [] and start_flag.value == 0

    def broker_down(func: str, **kwargs: Any) -> str:
        raise ConnectionError("broker down")

    monkeypatch.setattr(dispatch, "_enqueue", broker_down)
    assert dispatch.sweep_at_start(proc_name="Process-1") is None  # logged, not raised
    assert "start-up sweeper of worker Process-1 was not enqueued" in caplog.text


def test_the_start_up_sweeper_is_connected_to_django_q2s_spawn_signal() -> None:
    from django_q.signals import post_spawn

    receivers = [entry[1]() for entry in post_spawn.receivers]  # (key, weak reference, ...)
    assert dispatch.sweep_at_start in receivers
    assert dispatch._started_at_start is not None  # made in this (the parent) process


# How long a restarted cluster may take to fire a timer due before the kill, its own start
# included: generous for a loaded 2-CPU machine, and well below the ~30 s django-q2's
# scheduler takes to start the scheduled sweeper (the only sweeper before TIMER_SWEEP_AT_START).
RESTART_BOUND = 15.0


@pytest.mark.django_db(transaction=True)
def test_a_worker_group_sigkilled_and_restarted_fires_what_was_due_within_seconds(
    spawn: Spawn,
) -> None:
    """The whole group SIGKILLed (a crash, a lost host), then started again as a supervisor
    would: no ``wake()``, no ``setup_timers``, and the every-minute schedule far from due, so
    only the restarted cluster's own start-up sweeper can fire them. Two timers due before the
    kill: one nobody claimed, one a dead firer of the killed group had claimed (its lease still
    running at the restart): both fire once, the claimed one after its lease."""
    dispatch.ensure_schedule()
    Schedule.objects.filter(name=dispatch.SCHEDULE_NAME).update(
        next_run=timezone.now() + timedelta(hours=1)
    )
    with tempfile.TemporaryFile("w+") as log:
        with qcluster(spawn, log) as first:
            wait_for(lambda: " running." in read(log), first, log, "first cluster")
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(timeout=STOP_GRACE)
        killed = timezone.now()
        past = killed - timedelta(minutes=1)
        unclaimed = Timer.objects.get(execution=stepper.start(Chart.objects.load(ALARM), now=past))
        claimed = Timer.objects.get(execution=stepper.start(Chart.objects.load(ALARM), now=past))
        lease = timedelta(seconds=statecharts_settings.TIMER_LEASE_SECONDS)
        Timer.objects.filter(pk=claimed.pk).update(
            claimed_until=killed + lease,
            fire_deadline=killed + timedelta(minutes=2),
            claim_token=7,
        )
        for stale in OrmQ.objects.all():  # what the killed group had queued (its sweeper)
            stale.delete()

        def fired() -> bool:
            return (
                Timer.objects.filter(pk__in=[unclaimed.pk, claimed.pk], status="fired").count() == 2
            )

        with qcluster(spawn, log) as second:
            took = wait_for(fired, second, log, "both timers fired after the restart")
            assert took < RESTART_BOUND, read(log)
    for timer in (unclaimed, claimed):
        timer.refresh_from_db()
        assert timer.settled is not None and timer.settled > killed
        execution = Execution.objects.get(pk=timer.execution_id)
        assert execution.configuration == ["awake"] and execution.steps == 2  # delivered once
    claimed.refresh_from_db()
    assert claimed.settled >= killed + lease  # taken over only once its lease ran out


@pytest.mark.django_db
def test_a_worker_finds_its_clusters_stop_event_and_a_sweeper_ends_when_it_is_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SIGTERM reaches only the cluster's main process, which sets the stop event its
    sentinel and workers share; a sweeper (90 s) must end at its next poll, or the cluster
    waits for it."""
    import multiprocessing

    from django_q.cluster import Sentinel

    event = multiprocessing.get_context("fork").Event()

    class Spawning(Sentinel):  # (not started: only what a worker's stack holds at post_spawn)
        def __init__(self) -> None:
            self.stop_event = event

        def spawn_process(self, *args: Any) -> Any:
            return dispatch._sentinels_stop_event()

    assert Spawning().spawn_process() is event
    assert dispatch._sentinels_stop_event() is None  # not in a cluster: nothing found
    monkeypatch.setattr(dispatch, "_stop_event", event)
    polls: list[float] = []

    def sleep(seconds: float) -> None:
        polls.append(seconds)
        if len(polls) == 2:
            event.set()  # the cluster's main process got SIGTERM

    assert dispatch.sweep(3600, enqueue=lambda func: None, sleep=sleep) == 0
    assert len(polls) == 2  # it ended at the poll after the stop, not after an hour
