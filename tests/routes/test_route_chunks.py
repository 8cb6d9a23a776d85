"""Route timers fired in chunks (``timers.routequeue.fire_rows``): one transaction for a chunk
of rows, yet each row gets exactly the fate it would get alone: a live one is delivered once,
a finished or missing execution's is deleted undelivered with its reason, a cancelled one
never fires, a held one is snoozed, a key decided before is not delivered again, a failing
delivery fails alone (its sender told), and a ``deliver_atomic`` route acts in the chunk's
transaction. SQLite and PostgreSQL (the races with real threads: test_route_races.py)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from routes.models import DeliveryStatus, RouteDelivery
from statecharts import stepper
from statecharts.models import Execution
from statecharts.operations.inspection import datamodel_of
from tests.routes.recording import ROUTES, AtomicRecorder, Recorder, settings_with
from tests.routes.test_route_timers import SECOND, T0, start
from timers import firing, routequeue
from timers.models import RouteTimer

pytestmark = pytest.mark.django_db

DUE = T0 + 3 * SECOND
WHEN = T0 + 5 * SECOND


def with_atomic() -> dict[str, Any]:
    routes = {
        **ROUTES,
        "atomic": {"ROUTE": "tests.routes.recording.AtomicRecorder", "TYPES": ["atomic"]},
    }
    return settings_with(ROUTES=routes)


def statuses() -> dict[str, tuple[str, str]]:
    return {d.key: (d.status, d.reason) for d in RouteDelivery.objects.all()}


def test_a_chunk_mixing_every_fate_gives_each_row_exactly_its_own(
    recorder: type[Recorder],
) -> None:
    live, twice, finished, missing, cancelled, held, failing, decided = (
        start() for _ in range(8)
    )
    stepper.send(twice, "again", now=T0)  # two rows of one execution, two keys
    stepper.send(finished, "quit", now=T0 + SECOND)
    stepper.send(decided, "again", now=T0)  # its second row's key: decided before (below)
    Execution.objects.filter(pk=missing.pk).delete()
    Execution.objects.filter(pk=held.pk).update(status="halted")
    RouteTimer.objects.filter(execution=failing).update(config={"label": "x", "fail": True})
    key_of = {
        (row.execution_id, row.key.rsplit(":", 1)[1]): row.key for row in RouteTimer.objects.all()
    }
    decided_key = key_of[(decided.pk, "2")]
    RouteDelivery.objects.create(
        key=decided_key, execution_id=decided.pk, route="record", send_type="record",
        status=DeliveryStatus.DELIVERED, created=T0,
    )

    rows = routequeue.claim_rows(WHEN, 100)
    assert len(rows) == 10
    # Read (claimed) by the firer, then cancelled before its chunk takes the locks.
    stepper.send(cancelled, "signed_up", now=WHEN)
    outcomes = routequeue.fire_rows(rows, now=WHEN)

    by_row = dict(zip([(r.execution_id, r.key) for r in rows], outcomes, strict=True))
    assert by_row == {
        (live.pk, key_of[(live.pk, "1")]): "fired",
        (twice.pk, key_of[(twice.pk, "1")]): "fired",
        (twice.pk, key_of[(twice.pk, "2")]): "fired",
        (finished.pk, key_of[(finished.pk, "1")]): "discarded",
        (missing.pk, key_of[(missing.pk, "1")]): "discarded",
        (cancelled.pk, key_of[(cancelled.pk, "1")]): "skipped",
        (held.pk, key_of[(held.pk, "1")]): "snoozed",
        (failing.pk, key_of[(failing.pk, "1")]): "fired",
        (decided.pk, key_of[(decided.pk, "1")]): "fired",
        (decided.pk, decided_key): "skipped",
    }
    ledger = statuses()
    assert ledger == {
        key_of[(live.pk, "1")]: (DeliveryStatus.DELIVERED, ""),
        key_of[(twice.pk, "1")]: (DeliveryStatus.DELIVERED, ""),
        key_of[(twice.pk, "2")]: (DeliveryStatus.DELIVERED, ""),
        key_of[(finished.pk, "1")]: (
            DeliveryStatus.DISCARDED, "execution completed before it was due"
        ),
        key_of[(missing.pk, "1")]: (DeliveryStatus.DISCARDED, "execution missing"),
        key_of[(cancelled.pk, "1")]: (
            DeliveryStatus.CANCELLED, "cancelled by <cancel> in step 2"
        ),
        key_of[(failing.pk, "1")]: (
            DeliveryStatus.FAILED, "ConnectionError: the far side is down"
        ),
        key_of[(decided.pk, "1")]: (DeliveryStatus.DELIVERED, ""),
        decided_key: (DeliveryStatus.DELIVERED, ""),  # (untouched: written before)
    }
    # Only the held row is left, snoozed with its reason.
    [left] = RouteTimer.objects.all()
    assert (left.execution_id, left.reason) == (held.pk, "execution halted: snoozed")
    delivered = Counter(key for _, _, key in recorder.deliveries)
    assert delivered == {
        key_of[(live.pk, "1")]: 1,
        key_of[(twice.pk, "1")]: 1,
        key_of[(twice.pk, "2")]: 1,
        key_of[(decided.pk, "1")]: 1,
    }
    failing.refresh_from_db()
    assert datamodel_of(failing)["errors"] == [["error.communication", "nudge"]]  # type: ignore[index]

    # The same rows fired again (a second firer holding a stale claim): nothing is
    # delivered twice, no ledger row changes.
    assert routequeue.fire_rows(rows, now=WHEN) == ["skipped"] * 10
    assert firing.fire_all_due(now=WHEN + 10 * SECOND).outcomes == {}
    assert statuses() == ledger
    assert Counter(key for _, _, key in recorder.deliveries) == delivered


def test_the_loop_fires_route_timers_in_chunks_of_their_own_chunk_setting(
    recorder: type[Recorder],
) -> None:
    for _ in range(7):
        start()
    calls: list[int] = []
    real = routequeue.fire_rows

    def spy(rows: list[RouteTimer], *, now: Any = None) -> list[str]:
        calls.append(len(rows))
        return real(rows, now=now)

    with (
        override_settings(
            # the route chunk is its own setting: SCXML timers' chunk size does not apply
            STATECHARTS={**settings_with(), "TIMER_ROUTE_FIRE_CHUNK": 3, "TIMER_FIRE_CHUNK": 50}
        ),
        pytest.MonkeyPatch.context() as patch,
    ):
        patch.setattr(routequeue, "fire_rows", spy)
        assert firing.fire_all_due(now=WHEN).outcomes == {"fired": 7}
    assert calls == [3, 3, 1]
    assert len(recorder.deliveries) == 7
    assert Counter(RouteDelivery.objects.values_list("status", flat=True)) == {
        DeliveryStatus.DELIVERED: 7
    }


def test_a_chunks_statements_do_not_grow_with_its_rows(recorder: type[Recorder]) -> None:
    """Lock, take, ledger insert, commit, settle: the same statements for 12 rows as for 2.
    (The first chunk on a connection also reads its chart once on PostgreSQL, where the lock
    does not join it: ``statecharts.stepper.postgres.NarrowLock``.)"""
    for _ in range(2):  # (the chart's first sight: not counted)
        start()
    assert routequeue.fire_rows(routequeue.claim_rows(WHEN, 100), now=WHEN) == ["fired"] * 2
    recorder.deliveries.clear()
    counts = []
    for size in (2, 12):
        for _ in range(size):
            start()
        rows = routequeue.claim_rows(WHEN, 100)
        with CaptureQueriesContext(connection) as queries:
            assert routequeue.fire_rows(rows, now=WHEN) == ["fired"] * size
        counts.append(len(queries))
    assert counts[0] == counts[1], counts
    assert len(recorder.deliveries) == 14


def test_deliver_atomic_routes_are_settled_in_the_chunks_transaction() -> None:
    AtomicRecorder.done.clear()
    Recorder.deliveries.clear()
    with override_settings(STATECHARTS=with_atomic()):
        chart_xml = (
            '<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="null">'
            '<state id="s"><onentry>'
            '<send id="a" type="atomic" target="x" event="a" delay="3s"/>'
            '<send id="r" type="record" target="ada" event="r" delay="3s"/>'
            "</onentry></state></scxml>"
        )
        from statecharts.models import Chart

        execution = stepper.start(Chart.objects.load(chart_xml, name="atomic"), now=T0)
        rows = routequeue.claim_rows(WHEN, 100)
        assert routequeue.fire_rows(rows, now=WHEN) == ["fired", "fired"]
    keys = {row.route: row.key for row in rows}
    assert AtomicRecorder.done == [keys["atomic"]]
    assert [key for _, _, key in Recorder.deliveries] == [keys["record"]]
    assert {d.key: d.status for d in RouteDelivery.objects.filter(execution=execution)} == {
        keys["atomic"]: DeliveryStatus.DELIVERED,
        keys["record"]: DeliveryStatus.DELIVERED,
    }
    Recorder.deliveries.clear()


def test_a_chunk_that_raises_is_rolled_back_and_fired_row_by_row(
    recorder: type[Recorder],
) -> None:
    """Anything raising inside the chunk's transaction (here the ledger insert, once) rolls
    it all back; each row is then fired alone, and still gets its one fate."""
    for _ in range(3):
        start()
    rows = routequeue.claim_rows(WHEN, 100)
    real = routequeue.ledger.write_many
    raised: list[int] = []

    def flaky(entries: Any, now: Any) -> dict[str, int]:
        if not raised:
            raised.append(len(entries))
            real(entries, now)  # written, then rolled back with the chunk
            raise RuntimeError("the connection went away")
        return real(entries, now)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(routequeue.ledger, "write_many", flaky)
        assert routequeue.fire_rows(rows, now=WHEN) == ["fired"] * 3
    assert raised == [3]
    assert sorted(key for _, _, key in recorder.deliveries) == sorted(r.key for r in rows)
    assert RouteDelivery.objects.filter(status=DeliveryStatus.DELIVERED).count() == 3
    assert not RouteTimer.objects.exists()
