"""Fire vs cancel of the same route timer row, with real threads (each on its own
connection): the test runs it 200 times (tests/routes/test_route_races.py), one row per fire
and in chunks, the benchmark 1,000 times (benchmarks/route_races.py). Needs PostgreSQL
(SQLite ignores row locks).

Each trial: an execution whose entry scheduled ``nudge`` on the recording route, due at
T0 + 3 s; at T0 + 5 s one thread fires the row while another runs the step that cancels it
(``signed_up``), released together by a barrier. Every row must end with exactly one fate:
fired (delivered once; the ledger says delivered; the cancel step found nothing) or cancelled
(never delivered; the ledger says cancelled; the fire found nothing)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from routes.models import DeliveryStatus, RouteDelivery
from statecharts import stepper
from statecharts.models import Chart
from tests.routes.recording import Recorder
from tests.timers.test_timer_races import JOIN_TIMEOUT, run_threads, start_many
from timers import routequeue
from timers.models import RouteTimer

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="null"'
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
NUDGE = f"""<scxml {NS} initial="waiting">
  <state id="waiting">
    <onentry><send id="nudge" type="record" target="ada" event="nudge" delay="3s"/></onentry>
    <transition event="signed_up" target="done"><cancel sendid="nudge"/></transition>
  </state>
  <state id="done"/>
</scxml>"""


def race_fire_and_cancel(trials: int, pairs: int = 8, chunk: int = 1) -> Counter[str]:
    """Run the trials; assert each row's one fate; return how many went each way.

    ``chunk`` > 1: the firer fires ``chunk`` rows at a time in one transaction
    (``routequeue.fire_rows``), while its partner cancels the same rows one step at a time,
    in the opposite order, both released together."""
    Recorder.deliveries.clear()
    chart = Chart.objects.load(NUDGE, name="race")
    pks = start_many(chart, trials, T0)
    rows = {
        row.execution_id: row for row in RouteTimer.objects.filter(execution_id__in=pks)
    }
    row_of = {pk: row.pk for pk, row in rows.items()}
    key_of = {pk: row.key for pk, row in rows.items()}
    assert len(row_of) == trials
    when = T0 + timedelta(seconds=5)
    fired: dict[int, str] = {}
    barriers = [threading.Barrier(2, timeout=JOIN_TIMEOUT) for _ in range(pairs)]

    def groups(mine: list[int]) -> list[list[int]]:
        return [mine[start : start + chunk] for start in range(0, len(mine), chunk)]

    def firer(mine: list[int], barrier: threading.Barrier) -> Callable[[], None]:
        def run() -> None:
            for group in groups(mine):
                barrier.wait()
                if chunk == 1:
                    [pk] = group
                    fired[pk] = routequeue.fire(row_of[pk], now=when)
                    continue
                outcomes = routequeue.fire_rows([rows[pk] for pk in group], now=when)
                fired.update(zip(group, outcomes, strict=True))

        return run

    def canceller(mine: list[int], barrier: threading.Barrier) -> Callable[[], None]:
        def run() -> None:
            for group in groups(mine):
                barrier.wait()
                for pk in reversed(group):
                    stepper.send(pk, "signed_up", now=when)

        return run

    targets: list[Callable[[], None]] = []
    for k, barrier in enumerate(barriers):
        mine = pks[k::pairs]
        targets += [firer(mine, barrier), canceller(mine, barrier)]
    errors = run_threads(targets, barriers)
    assert errors == [], errors[:3]
    assert not RouteTimer.objects.filter(execution_id__in=pks).exists()  # every row decided
    ledger = {
        d.execution_id: d
        for d in RouteDelivery.objects.filter(execution_id__in=pks)
    }
    assert len(ledger) == trials  # one ledger row per key, whichever way it went
    delivered = Counter(key for _, _, key in Recorder.deliveries)
    fates: Counter[str] = Counter()
    for pk in pks:
        entry = ledger[pk]
        assert entry.key == key_of[pk]
        if entry.status == DeliveryStatus.DELIVERED:
            fates["fired"] += 1
            assert fired[pk] == routequeue.FIRED
            assert delivered[entry.key] == 1
        else:
            fates["cancelled"] += 1
            assert entry.status == DeliveryStatus.CANCELLED, (pk, entry.status)
            assert fired[pk] == routequeue.SKIPPED
            assert delivered[entry.key] == 0
    assert sum(delivered.values()) == fates["fired"]
    return fates
