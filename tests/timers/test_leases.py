"""Claim leases, their heartbeat and the claim's fence (timers.leases, docs/timers.md).

The clock is injected everywhere: a lease that "ran out" is a claim taken at one ``now`` and
looked at from a later one, a heartbeat's beat is called with its ``now`` (or its thread is
handed ticks one by one); nothing waits for time to pass. How fast a killed worker's timers
are taken over in real time is measured by ``benchmarks/timer_recovery.py``, never here.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import override_settings

from statecharts import stepper
from statecharts.conf import statecharts_settings
from statecharts.core.position import decode
from statecharts.models import Chart, Execution, HistoryEntry
from tests.timers import deliveries
from timers import chunks, claiming, dispatch, firing, leases
from timers.delivery import Snooze
from timers.models import Timer, TimerStatus

pytestmark = pytest.mark.django_db

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
T0 = datetime(2031, 5, 1, 9, 0, tzinfo=UTC)
DUE = T0 + timedelta(seconds=10)
S = timedelta(seconds=1)
JOIN = 60.0  # bounded waits for the heartbeat's thread: a hang fails the test

# A nudge due 10 s after the start; every delivered nudge counts itself.
CHART = f"""<scxml {NS} initial="waiting">
  <datamodel><data id="nudges" expr="0"/></datamodel>
  <state id="waiting">
    <onentry><send id="nudge" event="nudge" delay="10s"/></onentry>
    <transition event="nudge"><assign location="nudges" expr="nudges + 1"/></transition>
  </state>
</scxml>"""

RECORDING = "tests.timers.deliveries.RecordingDelivery"
ANSWER = "tests.timers.deliveries.AnswerDelivery"


@pytest.fixture(autouse=True)
def _clean_deliveries() -> Iterator[None]:
    deliveries.calls.clear()
    deliveries.probes.clear()
    deliveries.answer.update(value=None, perform=False)
    yield
    deliveries.probes.clear()


def start(count: int = 1) -> list[Execution]:
    chart = Chart.objects.load(CHART)
    return [stepper.start(chart, now=T0) for _ in range(count)]


def nudges(execution: Execution) -> int:
    execution.refresh_from_db()
    return int(decode(bytes(execution.position)).state.datamodel["nudges"])


def fired_steps(execution: Execution) -> int:
    return HistoryEntry.objects.filter(execution=execution, seq__gt=1).count()


def lease() -> timedelta:
    return timedelta(seconds=statecharts_settings.TIMER_LEASE_SECONDS)


# ---- the lease and the token a claim writes -----------------------------------------------------


def test_a_claim_is_a_short_lease_with_a_fence_token_of_its_own() -> None:
    start(2)
    first = firing.claim_batch(DUE, 1)
    second = firing.claim_batch(DUE, 1)
    assert statecharts_settings.TIMER_LEASE_SECONDS == 3  # the default (docs/timers.md)
    assert first.token != second.token
    for batch in (first, second):
        [timer] = batch.rows
        row = Timer.objects.get(pk=timer.pk)
        assert (row.claimed_until, row.claim_token) == (DUE + 3 * S, batch.token)


def test_a_renewed_lease_keeps_its_rows_claimed_and_an_unrenewed_one_lets_them_go() -> None:
    start(2)
    kept, dropped = firing.claim_batch(DUE, 1), firing.claim_batch(DUE, 1)
    renewed = leases.renew(kept.token, [t.pk for t in kept.rows], DUE + 2 * S)
    assert renewed == {kept.rows[0].pk}
    assert Timer.objects.get(pk=kept.rows[0].pk).claimed_until == DUE + 5 * S
    # At DUE + 4 s the unrenewed lease is over: another firer takes that row, not the other.
    taken = firing.claim_batch(DUE + 4 * S, 10)
    assert [t.pk for t in taken.rows] == [dropped.rows[0].pk]
    assert taken.suspects == taken.rows  # its attempt was spent: the lease ran out
    assert Timer.objects.get(pk=dropped.rows[0].pk).attempts == 1


def test_a_renewal_only_extends_and_never_renews_another_claims_rows() -> None:
    [execution] = start()
    old = firing.claim_batch(DUE, 10)
    pks = [t.pk for t in old.rows]
    new = firing.claim_batch(DUE + 4 * S, 10)  # the old lease ran out; taken over
    assert leases.renew(old.token, pks, DUE + 5 * S) == set()
    row = Timer.objects.get(pk=pks[0])
    assert (row.claim_token, row.claimed_until) == (new.token, DUE + 7 * S)
    assert leases.renew(new.token, pks, DUE + 3 * S) == set()  # earlier than what it holds
    assert leases.renew(new.token, pks, DUE + 5 * S) == set(pks)
    assert Timer.objects.get(pk=pks[0]).claimed_until == DUE + 8 * S
    assert nudges(execution) == 0


def test_a_renewal_never_touches_a_row_its_firer_settled_or_snoozed() -> None:
    executions = start(2)
    batch = firing.claim_batch(DUE, 10)
    deliveries.answer["value"] = Snooze(60)
    settings = {"TIMER_DELIVERIES": {"default": ANSWER}, "TIMER_FIRE_CHUNK": 1}
    with override_settings(STATECHARTS=settings):
        assert firing.fire_rows(batch.rows[:1], now=DUE) == [firing.SNOOZED]
    assert firing.fire_rows(batch.rows[1:], now=DUE) == [firing.FIRED]
    pks = [t.pk for t in batch.rows]
    assert leases.renew(batch.token, pks, DUE + 2 * S) == set()
    snoozed, fired = (Timer.objects.get(pk=pk) for pk in pks)
    assert (snoozed.status, snoozed.claimed_until) == (TimerStatus.PENDING, None)
    assert (fired.status, fired.claimed_until) == (TimerStatus.FIRED, None)
    # Snoozed, not claimed: when it is due again its claim spends no attempt.
    again = firing.claim_batch(DUE + 61 * S, 10)
    assert [t.pk for t in again.fresh] == [snoozed.pk] and snoozed.attempts == 0
    assert [nudges(e) for e in executions] == [0, 1]


# ---- a fire that hangs: the per-fire timeout still bounds it ------------------------------------


def test_a_lease_is_never_renewed_past_the_per_fire_deadline() -> None:
    with override_settings(STATECHARTS={"TIMER_FIRE_TIMEOUT_SECONDS": 30}):
        start()
    batch = firing.claim_batch(DUE, 10)
    pks = [t.pk for t in batch.rows]
    at = DUE
    while at + 2 * S < DUE + 30 * S:  # a live heartbeat, every 2 s, while the fire hangs
        at += 2 * S
        assert leases.renew(batch.token, pks, at) == set(pks)
    assert leases.renew(batch.token, pks, DUE + 31 * S) == set()
    # The fire still hangs; its lease is alive (renewed at DUE + 28 s) but its deadline passed.
    taken = firing.claim_batch(DUE + 31 * S, 10)
    assert [t.pk for t in taken.suspects] == pks
    row = Timer.objects.get(pk=pks[0])
    assert row.last_error.startswith("timed out: the per-fire timeout (30 s) passed at")
    assert row.attempts == 1


def test_a_row_without_a_per_fire_timeout_is_renewed_only_until_the_horizon() -> None:
    start()
    Timer.objects.update(fire_timeout_seconds=None)  # written before the timeout existed
    batch = firing.claim_batch(DUE, 10)
    pks = [t.pk for t in batch.rows]
    horizon = DUE + 120 * S
    assert leases.renew(batch.token, pks, DUE + 119 * S, horizon=horizon) == set(pks)
    assert leases.renew(batch.token, pks, DUE + 121 * S, horizon=horizon) == set()
    assert [t.pk for t in firing.claim_batch(DUE + 123 * S, 10).suspects] == pks


# ---- the fence: a late settle of a claim taken over is refused ----------------------------------


@pytest.mark.parametrize("count", [1, 3], ids=["alone", "chunk"])
def test_a_firer_whose_claim_was_taken_over_commits_nothing_and_the_new_claim_fires_once(
    count: int,
) -> None:
    """Firer A claims and stalls past its lease (no heartbeat could run); firer B's claim
    takes the rows over. A's late fire (one timer: ``fire_row``; a chunk: one transaction)
    delivers nothing and settles nothing; B fires each timer once; A again changes nothing."""
    executions = start(count)
    a = firing.claim_batch(DUE, 10)
    b = firing.claim_batch(DUE + lease() + S, 10)
    assert sorted(t.pk for t in b.rows) == sorted(t.pk for t in a.rows)
    with override_settings(STATECHARTS={"TIMER_DELIVERIES": {"default": RECORDING}}):
        assert firing.fire_rows(a.rows, now=DUE + 5 * S) == [firing.SKIPPED] * count
        assert deliveries.calls == []  # nothing delivered, nothing settled
        assert set(Timer.objects.values_list("status", "claim_token")) == {
            (TimerStatus.PENDING, b.token)
        }
        assert firing.fire_rows(b.rows, now=DUE + 5 * S) == [firing.FIRED] * count
        assert firing.fire_rows(a.rows, now=DUE + 6 * S) == [firing.SKIPPED] * count
    assert len(deliveries.calls) == count
    assert [nudges(e) for e in executions] == [1] * count
    assert [fired_steps(e) for e in executions] == [1] * count
    assert set(Timer.objects.values_list("status", "attempts")) == {(TimerStatus.FIRED, 1)}


def test_a_taken_over_firer_neither_snoozes_nor_spends_an_attempt_it_no_longer_owns() -> None:
    start()
    a = firing.claim_batch(DUE, 10)
    b = firing.claim_batch(DUE + lease() + S, 10)
    deliveries.answer["value"] = Snooze(60)
    with override_settings(STATECHARTS={"TIMER_DELIVERIES": {"default": ANSWER}}):
        assert firing.fire_rows(a.rows, now=DUE + 5 * S) == [firing.SKIPPED]
    deliveries.answer["value"] = "not an answer"  # a raise: an attempt is recorded...
    with override_settings(STATECHARTS={"TIMER_DELIVERIES": {"default": ANSWER}}):
        assert firing.fire_rows(a.rows, now=DUE + 5 * S) == [firing.SKIPPED]  # ...not by A
    row = Timer.objects.get(pk=a.rows[0].pk)
    assert (row.status, row.due, row.attempts, row.claim_token) == (
        TimerStatus.PENDING,
        DUE,
        1,  # the attempt B's claim spent for A's lapsed lease, and no other
        b.token,
    )


def test_a_firer_whose_lease_ran_out_unnoticed_still_owns_and_fires_its_rows() -> None:
    [execution] = start()
    a = firing.claim_batch(DUE, 10)
    # Nobody claimed meanwhile: the token is still A's, so A's late fire is the fire.
    assert firing.fire_rows(a.rows, now=DUE + 10 * S) == [firing.FIRED]
    row = Timer.objects.get(pk=a.rows[0].pk)
    assert (row.status, row.attempts) == (TimerStatus.FIRED, 0)
    assert nudges(execution) == 1


def test_a_dead_firers_rows_are_fired_once_by_another_within_its_lease_and_none_is_lost() -> None:
    executions = start(5)
    dead = firing.claim_batch(DUE, 10)  # then its process dies: nothing renews its lease
    assert len(dead.rows) == 5
    assert firing.fire_all_due(now=DUE + lease() - S).outcomes == {}  # held meanwhile
    assert firing.fire_all_due(now=DUE + lease() + S).outcomes == {firing.FIRED: 5}
    assert firing.fire_rows(dead.rows, now=DUE + lease() + 2 * S) == [firing.SKIPPED] * 5
    assert [nudges(e) for e in executions] == [1] * 5
    assert [fired_steps(e) for e in executions] == [1] * 5


# ---- the heartbeat ------------------------------------------------------------------------------


class Ticks:
    """The heartbeat thread's ``wait``: each ``tick()`` lets exactly one beat happen and
    returns once the thread waits again; ``stop()`` ends the thread."""

    def __init__(self) -> None:
        self.next: queue.Queue[bool] = queue.Queue()
        self.waiting: queue.Queue[None] = queue.Queue()

    def wait(self, interval: float) -> bool:
        self.waiting.put(None)
        return self.next.get()  # (the fixture's teardown always stops it)

    def tick(self) -> None:
        self.next.put(False)
        self.waiting.get(timeout=JOIN)

    def stop(self) -> None:
        self.next.put(True)


@pytest.fixture
def heartbeat(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[leases.Heartbeat, Ticks]]:
    """This process's heartbeat, its thread driven by ticks."""
    ticks = Ticks()
    beating = leases.Heartbeat(wait=ticks.wait)
    monkeypatch.setattr(leases, "_process", beating)
    yield beating, ticks
    ticks.stop()
    beating.stop(JOIN)


def test_a_firing_loop_holds_its_claim_under_a_running_heartbeat_and_only_then(
    heartbeat: tuple[leases.Heartbeat, Ticks],
) -> None:
    beating, _ticks = heartbeat
    seen: list[list[leases.Held]] = []
    deliveries.probes.append(lambda fire: seen.append(beating.held()))
    settings = {"TIMER_DELIVERIES": {"default": RECORDING}, "CLOCK": lambda: DUE}
    start(3)
    with override_settings(STATECHARTS=settings):
        assert firing.fire_due().fired == 3  # no heartbeat running: nothing held
    assert seen == [[]] * 3
    seen.clear()
    executions = start(3)
    with override_settings(STATECHARTS=settings), beating.running():
        assert firing.fire_due().fired == 3
    timers = Timer.objects.filter(execution__in=executions)
    tokens = set(timers.values_list("claim_token", flat=True))
    assert len(tokens) == 1
    held = [(frozenset(timers.values_list("pk", flat=True)), tokens.pop())]
    assert [[(h.pks, h.token) for h in now_held] for now_held in seen] == [held] * 3
    assert beating.held() == []  # let go once the batch is done


def test_a_drain_runs_under_its_process_heartbeat(
    heartbeat: tuple[leases.Heartbeat, Ticks],
) -> None:
    beating, _ticks = heartbeat
    start(2)
    active: list[bool] = []
    deliveries.probes.append(lambda fire: active.append(beating.active and bool(beating.held())))
    settings = {"TIMER_DELIVERIES": {"default": RECORDING}, "CLOCK": lambda: DUE}
    with override_settings(STATECHARTS=settings):
        assert dispatch.drain() == 2
    assert active == [True, True]
    assert not beating.active


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_thread_renews_what_its_process_holds_on_its_own_connection(
    heartbeat: tuple[leases.Heartbeat, Ticks],
) -> None:
    beating, ticks = heartbeat
    start(2)
    now = {"at": DUE}
    batch = firing.claim_batch(DUE, 1)
    other = firing.claim_batch(DUE, 1)  # another process's claim: not held here
    pks = [t.pk for t in batch.rows]
    threads: set[int] = set()
    renew = leases.renew

    def spy(*args: Any, **kwargs: Any) -> set[int]:
        threads.add(threading.get_ident())
        return renew(*args, **kwargs)

    with (
        override_settings(STATECHARTS={"CLOCK": lambda: now["at"]}),
        pytest.MonkeyPatch.context() as patch,
    ):
        patch.setattr(leases, "renew", spy)
        with beating.running():
            ticks.waiting.get(timeout=JOIN)  # the thread is up, waiting for its first beat
            with beating.holding(batch.token, pks, batch.claimed):
                for seconds in (1, 2, 3, 4, 5):
                    now["at"] = DUE + seconds * S
                    ticks.tick()
                    assert Timer.objects.get(pk=pks[0]).claimed_until == DUE + (seconds + 3) * S
            now["at"] = DUE + 6 * S
            ticks.tick()  # let go: no renewal any more
    assert beating.beats == 5
    assert threads and threading.get_ident() not in threads  # renewed from its own thread
    assert Timer.objects.get(pk=pks[0]).claimed_until == DUE + 8 * S
    assert Timer.objects.get(pk=other.rows[0].pk).claimed_until == DUE + 3 * S
    # The process's other claim ran out long ago: another firer takes that one only.
    assert [t.pk for t in firing.claim_batch(DUE + 6 * S, 10).rows] == [other.rows[0].pk]


def test_the_heartbeat_beats_three_times_per_lease() -> None:
    with override_settings(STATECHARTS={"TIMER_LEASE_SECONDS": 6}):
        assert leases.Heartbeat().interval == 2.0


def test_a_dead_firers_batch_is_shared_among_the_claims_that_take_it_over() -> None:
    """Its timers are suspects: one claim takes at most TIMER_FIRE_CHUNK of them and leaves
    the rest claimable, so the live firers share them (each attempt spent once, by the claim
    that takes the timer)."""
    executions = start(7)
    dead = firing.claim_batch(DUE, 10)
    later = DUE + lease() + S
    with override_settings(STATECHARTS={"TIMER_FIRE_CHUNK": 3}):
        takers = [firing.claim_batch(later, 10) for _ in range(4)]
    assert [len(b.suspects) for b in takers] == [3, 3, 1, 0]
    assert [len(b.fresh) for b in takers] == [0, 0, 0, 0]
    taken = sorted(t.pk for b in takers for t in b.suspects)
    assert taken == sorted(t.pk for t in dead.rows)
    assert set(Timer.objects.values_list("attempts", flat=True)) == {1}
    for batch in takers:
        assert firing.fire_rows(batch.suspects, now=later) == [firing.FIRED] * len(batch.suspects)
    assert [fired_steps(e) for e in executions] == [1] * 7


class FireSpy:
    """Counts the firing transactions of ``fire_due``: each unit it hands ``fire_rows`` (one
    transaction when it fires), and each lone ``fire_row`` (a unit of one, or a chunk that
    rolled back and fell back to one by one)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.units: list[list[int]] = []
        self.lone: list[int] = []
        chunked, lone = firing.fire_rows, chunks.fire_row

        def fire_rows(timers: list[Timer], **kwargs: Any) -> list[str]:
            self.units.append([timer.pk for timer in timers])
            return chunked(timers, **kwargs)

        def fire_row(timer: Timer, **kwargs: Any) -> str:
            self.lone.append(timer.pk)
            return lone(timer, **kwargs)

        monkeypatch.setattr(firing, "fire_rows", fire_rows)
        monkeypatch.setattr(chunks, "fire_row", fire_row)

    def clear(self) -> None:
        self.units.clear()
        self.lone.clear()


def test_a_first_takeover_fires_in_chunks_and_a_second_one_isolates_each_timer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A dead firer's six timers are taken over for the first time by two claims: each fires
    its three as ONE chunk (one transaction, nothing one by one). The firer of the first of
    those claims dies too: its three are then taken over for the second time in a row, and
    fired one by one, one per claim (a timer that kills every firer is isolated after one more
    death)."""
    spy = FireSpy(monkeypatch)
    executions = start(6)
    dead = firing.claim_batch(DUE, 10)  # first death: its whole claim left unsettled
    assert (len(dead.fresh), dead.suspects) == (6, [])
    first = DUE + lease() + S
    with override_settings(STATECHARTS={"TIMER_FIRE_CHUNK": 3}):
        dies_again = firing.claim_batch(first, 10)  # a first takeover, whose firer dies
        assert len(dies_again.first_takeovers) == 3 and dies_again.repeated == []
        assert firing.fire_due(now=first).outcomes == {firing.FIRED: 3}
        assert len(spy.units) == 1 and len(spy.units[0]) == 3  # one chunk of the three...
        assert spy.lone == []  # ...fired in one transaction: none on its own
        assert sorted(spy.units[0]) == sorted(
            t.pk for t in dead.rows if t.pk not in {r.pk for r in dies_again.rows}
        )
        spy.clear()
        second = first + lease() + S
        lone = firing.claim_batch(second, 10)  # one claim takes one of them, no more
        assert lone.repeated == lone.suspects and len(lone.rows) == 1
        assert firing.fire_rows(lone.rows, now=second) == [firing.FIRED]
        report = firing.fire_all_due(now=second)
    assert report.outcomes == {firing.FIRED: 2}
    taken_twice = sorted(t.pk for t in dies_again.rows)
    assert spy.lone[0] == lone.rows[0].pk
    assert spy.units == [[pk] for pk in taken_twice]  # one transaction each
    assert spy.lone == taken_twice
    attempts = dict(Timer.objects.values_list("pk", "attempts"))
    assert sorted(pk for pk, spent in attempts.items() if spent == 2) == taken_twice
    assert sorted(attempts.values()) == [1, 1, 1, 2, 2, 2]
    assert [fired_steps(e) for e in executions] == [1] * 6  # each fired once, none lost


def test_only_a_takeover_right_after_a_takeover_counts_as_the_second() -> None:
    """A row whose last attempt raised (its delivery failed: retried later) and whose next
    firer then died is on its first takeover again: fired in a chunk, not alone."""
    start(2)
    dead = firing.claim_batch(DUE, 10)
    Timer.objects.filter(pk=dead.rows[0].pk).update(last_error="RuntimeError: timed out: no")
    taken = firing.claim_batch(DUE + lease() + S, 10)
    assert [t.pk for t in taken.first_takeovers] == [t.pk for t in dead.rows]
    assert taken.units(20) == [taken.first_takeovers]
    again = firing.claim_batch(DUE + 2 * (lease() + S), 10)
    assert again.repeated == again.suspects == [dead.rows[0]]  # one per claim, alone
    assert again.units(20) == [again.repeated]
    other = firing.claim_batch(DUE + 2 * (lease() + S), 10)  # another live firer's claim
    assert other.repeated == other.suspects == [dead.rows[1]]


class Died(BaseException):
    """A firer killed mid-fire, in-process: not an ``Exception``, so no fallback catches it;
    its transaction rolls back and its claim is left unsettled, as a SIGKILL leaves it."""


def test_a_timer_that_kills_every_firer_takes_no_other_timer_down_after_its_second_death() -> None:
    """Five timers claimed together; the second kills every firer that delivers it. Its
    first two deaths take the whole chunk down with it (the fresh claim's, then the first
    takeover's); from then on it is fired alone, one claim each, while the live firers fire
    the four others (each attempt spent once: two). It ends ``failed``, "timed out", after
    ``TIMER_MAX_ATTEMPTS``; the others are each delivered once."""
    executions = start(5)
    order = list(Timer.objects.order_by("due", "pk").values_list("pk", flat=True))
    poison = order[1]

    def kill(fire: Any) -> None:
        if fire.timer.pk == poison:
            raise Died

    deliveries.probes.append(kill)
    deaths: list[int] = []  # the round of each death
    at, round_ = DUE, 0
    with override_settings(STATECHARTS={"TIMER_DELIVERIES": {"default": RECORDING}}):
        while Timer.objects.filter(status=TimerStatus.PENDING).exists() and round_ < 10:
            while True:  # the live firers at this moment, one after another
                try:
                    if not firing.fire_all_due(now=at).outcomes:
                        break
                except Died:
                    deaths.append(round_)
            at, round_ = at + lease() + S, round_ + 1
    attempts = statecharts_settings.TIMER_MAX_ATTEMPTS
    assert deaths == list(range(attempts))  # one death a round, until its attempts ran out
    rows = {t.pk: t for t in Timer.objects.all()}
    assert (rows[poison].status, rows[poison].reason) == (TimerStatus.FAILED, firing.TIMED_OUT)
    assert rows[poison].attempts == attempts
    innocent = [pk for pk in order if pk != poison]
    assert [(rows[pk].status, rows[pk].attempts) for pk in innocent] == [
        (TimerStatus.FIRED, 2)
    ] * 4  # the two deaths they shared a chunk with, no more
    steps = {Timer.objects.get(execution=e).pk: fired_steps(e) for e in executions}
    assert steps == {pk: int(pk != poison) for pk in order}  # each innocent delivered once


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_renewal_between_chunks_keeps_rows_the_heartbeat_holds_locked_for_an_instant() -> None:
    """``_keep`` (between chunks) reads the rows ``SKIP LOCKED``; a row the heartbeat is
    renewing at that instant is skipped, and is still this firer's (its token): it stays in
    the chunk, instead of being left claimed and unfired."""
    start(2)
    batch = firing.claim_batch(DUE, 10)
    pks = [t.pk for t in batch.rows]
    locked, release = threading.Event(), threading.Event()

    def beat_in_progress() -> None:
        from django.db import connection, transaction

        try:
            with transaction.atomic():
                list(Timer.objects.select_for_update().filter(pk__in=pks))
                locked.set()
                release.wait(JOIN)
        finally:
            connection.close()

    beating = threading.Thread(target=beat_in_progress, daemon=True)
    beating.start()
    try:
        assert locked.wait(JOIN)
        # Half the window has passed: _keep renews, and keeps both rows in the chunk.
        kept = claiming._keep(batch, batch.rows, batch.rows, DUE + 2 * S)
    finally:
        release.set()
        beating.join(JOIN)
    assert [t.pk for t in kept] == pks
    assert firing.fire_rows(kept, now=DUE + 2 * S) == [firing.FIRED] * 2
