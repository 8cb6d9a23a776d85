"""Delayed route sends: the route timer queue (timers.routequeue) and its firing, on the clock
the tests inject. Two keys (cancellation: execution and send id; dedup: the route's key), one
delivery per key before and after the fire, liveness deletion with its reason in the ledger,
an unregistered route snoozed, no queue refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.core.checks import run_checks
from django.test import override_settings

from routes.models import DeliveryStatus, RouteDelivery
from routes.queue import TimerEntry, configured_queue
from statecharts import stepper
from statecharts.models import Chart, Execution
from statecharts.operations.inspection import datamodel_of
from tests.routes.recording import Recorder, settings_with
from timers import firing, routequeue
from timers.models import RouteTimer

pytestmark = pytest.mark.django_db

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)

# A sign-up nudge in miniature: "later" after 3 s unless the user signs up (the cancel).
CHART = f"""<scxml {NS} initial="waiting">
  <datamodel><data id="errors" expr="[]"/></datamodel>
  <state id="waiting">
    <onentry>
      <send id="nudge" type="record" target="ada" event="nudge" delay="3s">
        <param name="who" expr="'ada'"/></send>
    </onentry>
    <transition event="signed_up" target="done"><cancel sendid="nudge"/></transition>
    <transition event="again">
      <send id="nudge" type="record" target="ada" event="nudge" delay="3s"/></transition>
    <transition event="quit" target="gone"/>
    <transition event="error.*">
      <assign location="errors" expr="errors.concat([[_event.name, _event.sendid || null]])"/>
    </transition>
  </state>
  <state id="done"/>
  <final id="gone"/>
</scxml>"""


def start() -> Execution:
    return stepper.start(Chart.objects.load(CHART, name="nudge"), now=T0)


def fire_at(when: datetime) -> dict[str, int]:
    return firing.fire_all_due(now=when).outcomes


def test_a_delayed_send_waits_in_its_row_and_is_delivered_once_when_due(
    recorder: type[Recorder],
) -> None:
    execution = start()
    row = RouteTimer.objects.get()
    assert (row.execution_id, row.send_id, row.key) == (
        execution.pk, "nudge", f"{execution.session_id}:1",
    )
    assert (row.route, row.due, row.config["label"]) == ("record", T0 + 3 * SECOND, "settings")
    assert fire_at(T0 + 2 * SECOND) == {}  # not due yet
    assert fire_at(T0 + 3 * SECOND) == {"fired": 1}
    assert not RouteTimer.objects.exists()  # deleted at fire
    [(_config, message, key)] = recorder.deliveries
    assert (message.name, message.data, message.delayed, key) == (
        "nudge", {"who": "ada"}, True, row.key,
    )
    ledger = RouteDelivery.objects.get()
    assert (ledger.key, ledger.status, ledger.delayed) == (row.key, DeliveryStatus.DELIVERED, True)


def test_a_repeat_schedule_before_the_fire_and_after_it_never_delivers_twice(
    recorder: type[Recorder],
) -> None:
    execution = start()
    row = RouteTimer.objects.get()
    queue = configured_queue()
    assert queue is not None
    from routes.base import RouteMessage

    entry = TimerEntry(
        scope=execution.pk, send_id=row.send_id, key=row.key, route=row.route, config=row.config,
        message=RouteMessage.from_dict(row.message), due=row.due, created=T0, scheduled_in=1,
    )
    queue.schedule(entry)  # before the fire: a no-op (one row per key)
    assert RouteTimer.objects.count() == 1
    fire_at(T0 + 3 * SECOND)
    queue.schedule(entry)  # after the fire: the ledger knows the key, no row is added
    assert not RouteTimer.objects.exists()
    fire_at(T0 + 10 * SECOND)
    assert len(recorder.deliveries) == 1
    # Another send under the same send id is another key: both are kept.
    stepper.send(execution, "again", now=T0 + 4 * SECOND)
    assert RouteTimer.objects.get().key == f"{execution.session_id}:2"


def test_cancel_deletes_this_executions_rows_only_and_records_it(
    recorder: type[Recorder],
) -> None:
    mine, other = start(), start()
    stepper.send(mine, "again", now=T0)  # two rows under ("nudge") for mine, two keys
    assert RouteTimer.objects.filter(execution=mine).count() == 2
    stepper.send(mine, "signed_up", now=T0 + SECOND)
    assert not RouteTimer.objects.filter(execution=mine).exists()
    assert RouteTimer.objects.filter(execution=other).count() == 1  # same send id, untouched
    cancelled = RouteDelivery.objects.filter(execution=mine)
    assert {(d.status, d.reason) for d in cancelled} == {
        (DeliveryStatus.CANCELLED, "cancelled by <cancel> in step 3")
    }
    assert cancelled.count() == 2
    fire_at(T0 + 10 * SECOND)
    assert [m.session_id for _, m, _ in recorder.deliveries] == [other.session_id]


@pytest.mark.parametrize(
    ("ending", "reason"),
    [
        ("quit", "execution completed before it was due"),
        ("cancel", "execution cancelled before it was due"),
        ("delete", "execution missing"),
    ],
)
def test_a_row_of_a_finished_or_missing_execution_is_deleted_undelivered_with_its_reason(
    recorder: type[Recorder], ending: str, reason: str
) -> None:
    execution = start()
    key = RouteTimer.objects.get().key
    if ending == "quit":
        stepper.send(execution, "quit", now=T0 + SECOND)
    elif ending == "cancel":
        stepper.cancel(execution, now=T0 + SECOND)
    else:
        Execution.objects.filter(pk=execution.pk).delete()
    assert RouteTimer.objects.count() == 1  # (kept until its fire decides)
    assert fire_at(T0 + 3 * SECOND) == {"discarded": 1}
    assert not RouteTimer.objects.exists()
    ledger = RouteDelivery.objects.get()
    assert (ledger.key, ledger.status, ledger.reason) == (key, DeliveryStatus.DISCARDED, reason)
    assert recorder.deliveries == []


def test_a_held_execution_snoozes_its_rows(recorder: type[Recorder]) -> None:
    execution = start()
    Execution.objects.filter(pk=execution.pk).update(status="halted")
    assert fire_at(T0 + 3 * SECOND) == {"snoozed": 1}
    row = RouteTimer.objects.get()
    assert row.reason == "execution halted: snoozed"
    assert row.due == T0 + 3 * SECOND + timedelta(seconds=300)
    assert recorder.deliveries == [] and not RouteDelivery.objects.exists()


def test_a_route_unregistered_since_is_snoozed_with_a_visible_reason_and_a_check(
    recorder: type[Recorder],
) -> None:
    start()
    with override_settings(STATECHARTS=settings_with(ROUTES={})):
        assert fire_at(T0 + 3 * SECOND) == {"snoozed": 1}
        row = RouteTimer.objects.get()
        assert row.reason == "route 'record' is not registered here: snoozed"
        assert [m for m in run_checks() if m.id == "timers.W001"] == []  # (no database read)
        warnings = [m for m in run_checks(databases=["default"]) if m.id == "timers.W001"]
        assert len(warnings) == 1 and "'record'" in warnings[0].msg
    assert not RouteDelivery.objects.exists()  # no attempt spent, nothing decided
    assert fire_at(row.due) == {"fired": 1}  # registered again: delivered
    assert len(recorder.deliveries) == 1
    assert [m for m in run_checks(databases=["default"]) if m.id == "timers.W001"] == []


def test_a_failed_delayed_delivery_tells_the_sender(recorder: type[Recorder]) -> None:
    execution = start()
    routes = {"record": {**settings_with()["ROUTES"]["record"], "OPTIONS": {"fail": True}}}
    with override_settings(STATECHARTS=settings_with(ROUTES=routes)):
        # (the row keeps the configuration it was scheduled with: fail is False there)
        RouteTimer.objects.update(config={"label": "x", "fail": True})
        assert fire_at(T0 + 3 * SECOND) == {"fired": 1}
    assert RouteDelivery.objects.get().status == DeliveryStatus.FAILED
    execution.refresh_from_db()
    assert datamodel_of(execution)["errors"] == [["error.communication", "nudge"]]  # type: ignore[index]


def test_without_a_route_timer_queue_a_delayed_route_send_is_refused(
    recorder: type[Recorder],
) -> None:
    with override_settings(STATECHARTS=settings_with(ROUTE_TIMER_QUEUE=None)):
        assert stepper.registered_types().route_timers is False
        execution = start()
    assert not RouteTimer.objects.exists()
    assert datamodel_of(execution)["errors"] == [["error.communication", "nudge"]]  # type: ignore[index]


def test_route_timers_are_part_of_the_pending_work(recorder: type[Recorder]) -> None:
    from statecharts import work

    start()
    assert work.next_due() == T0 + 3 * SECOND
    assert work.run_due(T0 + 3 * SECOND) == 1
    assert len(recorder.deliveries) == 1
    assert routequeue.next_due() is None


def test_a_queue_outside_the_installed_apps_is_unavailable_and_not_imported() -> None:
    from routes.queue import QueueUnavailable, load_queue

    with pytest.raises(QueueUnavailable, match="not in an installed app"):
        load_queue("nowhere.queues.Queue")
    with pytest.raises(QueueUnavailable, match="no schedule"):
        load_queue("statecharts.models.Chart")  # an installed app's class, not a queue


def test_a_waiting_route_send_travels_with_an_exported_execution(
    recorder: type[Recorder],
) -> None:
    from statecharts.operations.transfer import export_execution, import_execution

    execution = start()
    key = RouteTimer.objects.get().key
    document = export_execution(execution)
    assert [t["key"] for t in document["parts"]["route_timers"]] == [key]
    redacted = export_execution(execution, redact=True)
    assert redacted["parts"]["route_timers"][0]["message"]["data"] != {"who": "ada"}
    RouteTimer.objects.all().delete()
    Execution.objects.filter(pk=execution.pk).delete()  # (moved to another database)
    imported = import_execution(document, now=T0 + SECOND)
    row = RouteTimer.objects.get()
    assert (row.key, row.execution_id, row.message["execution_id"]) == (
        key, imported.pk, imported.pk,
    )
    assert fire_at(T0 + 3 * SECOND) == {"fired": 1}
    [(_config, message, delivered_key)] = recorder.deliveries
    assert (message.execution_id, delivered_key) == (imported.pk, key)
