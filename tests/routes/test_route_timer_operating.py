"""An operator's actions on one waiting route timer (timers.operating): fire now through the
route fire path (the row's deletion and its key in the ledger in one write; the route's own
key), cancel (the key ``cancelled`` in the ledger), reschedule (both keys kept); each with an
``operated`` history entry; a row that is no longer waiting is not found; raced against a
firer or a cancel on PostgreSQL: one fate per key."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from routes.models import DeliveryStatus, RouteDelivery
from statecharts.models import HistoryEntry
from statecharts.models.history import Disposition
from statecharts.policies import refusals
from tests.routes.recording import Recorder
from tests.routes.test_route_timers import start
from timers import firing, operating
from timers.models import RouteTimer

pytestmark = pytest.mark.django_db

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)


def test_fire_now_delivers_once_under_the_routes_own_key(recorder: type[Recorder]) -> None:
    execution = start()
    row = RouteTimer.objects.get()
    assert operating.fire_route_now(row.pk, reason="urgent", now=T0 + SECOND) == "fired"
    assert not RouteTimer.objects.exists()
    [(_config, message, key)] = recorder.deliveries
    assert (message.name, key) == ("nudge", row.key)
    assert RouteDelivery.objects.get().status == DeliveryStatus.DELIVERED
    entry = HistoryEntry.objects.get(execution=execution, disposition=Disposition.OPERATED)
    assert entry.input["action"] == "route_timer_fire_now"
    assert entry.input["row"] == {"route_timer": row.pk, "send_id": "nudge", "outcome": "fired"}
    assert entry.reason == "urgent"
    # Its due time comes: nothing left to fire, nothing delivered twice.
    assert firing.fire_all_due(now=T0 + 10 * SECOND).outcomes == {}
    assert len(recorder.deliveries) == 1


def test_cancel_records_the_operators_reason_in_the_ledger(recorder: type[Recorder]) -> None:
    start()
    row = RouteTimer.objects.get()
    assert operating.cancel_route(row.pk, reason="wrong customer", now=T0) == "cancelled"
    ledger = RouteDelivery.objects.get()
    assert (ledger.key, ledger.status) == (row.key, DeliveryStatus.CANCELLED)
    assert "wrong customer" in ledger.reason
    firing.fire_all_due(now=T0 + 10 * SECOND)
    assert recorder.deliveries == []


def test_reschedule_keeps_both_keys(recorder: type[Recorder]) -> None:
    start()
    row = RouteTimer.objects.get()
    later = T0 + 60 * SECOND
    assert operating.reschedule_route(row.pk, later, reason="after lunch", now=T0) == (
        "rescheduled"
    )
    moved = RouteTimer.objects.get()
    assert (moved.pk, moved.key, moved.send_id, moved.due) == (row.pk, row.key, "nudge", later)
    assert firing.fire_all_due(now=T0 + 10 * SECOND).outcomes == {}
    assert firing.fire_all_due(now=later).outcomes == {"fired": 1}
    assert [key for _c, _m, key in recorder.deliveries] == [row.key]


def test_a_row_no_longer_waiting_is_not_found(recorder: type[Recorder]) -> None:
    start()
    row = RouteTimer.objects.get()
    operating.cancel_route(row.pk, reason="first", now=T0)
    for act in (operating.fire_route_now, operating.cancel_route):
        with pytest.raises(RouteTimer.DoesNotExist) as gone:
            act(row.pk, reason="again", now=T0)
        refusal = refusals.refusal(gone.value)
        assert refusal is not None and refusal.reason is refusals.Reason.NOT_FOUND
    assert HistoryEntry.objects.filter(disposition=Disposition.OPERATED).count() == 1


RACE_TRIALS = 20


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("rival", ["fire", "cancel"])
def test_fire_now_racing_a_firer_or_a_cancel_delivers_at_most_once(
    recorder: type[Recorder], rival: str
) -> None:
    import threading

    from tests.timers.test_timer_races import run_threads
    from timers import routequeue

    for _ in range(RACE_TRIALS):
        start()
    rows = list(RouteTimer.objects.order_by("pk"))
    due = T0 + 10 * SECOND
    ours: dict[int, str] = {}
    theirs: dict[int, str] = {}
    barrier = threading.Barrier(2, timeout=60)

    def operator() -> None:
        for row in rows:
            barrier.wait()
            try:
                ours[row.pk] = operating.fire_route_now(row.pk, reason="race", now=due)
            except RouteTimer.DoesNotExist:
                ours[row.pk] = "gone"

    def other() -> None:
        for row in rows:
            barrier.wait()
            try:
                if rival == "fire":
                    theirs[row.pk] = routequeue.fire(row.pk, now=due)
                else:
                    theirs[row.pk] = operating.cancel_route(row.pk, reason="race", now=due)
            except RouteTimer.DoesNotExist:
                theirs[row.pk] = "gone"

    assert run_threads([operator, other], [barrier]) == []
    delivered = [key for _c, _m, key in recorder.deliveries]
    assert len(delivered) == len(set(delivered))  # never twice
    fates = dict(RouteDelivery.objects.values_list("key", "status"))
    for row in rows:
        # One fate per key: fired (delivered once) or cancelled, never both.
        acted = [f for f in (ours[row.pk], theirs[row.pk]) if f in ("fired", "cancelled")]
        assert len(acted) == 1, (ours[row.pk], theirs[row.pk])
        expected = DeliveryStatus.DELIVERED if acted == ["fired"] else DeliveryStatus.CANCELLED
        assert fates[row.key] == expected
        assert delivered.count(row.key) == (1 if acted == ["fired"] else 0)
    assert not RouteTimer.objects.exists()
