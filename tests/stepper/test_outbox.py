"""The outbox: the sender owns its messages, the target records what it applied, exactly once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import override_settings

from statecharts import stepper
from statecharts.core.position import decode
from statecharts.exceptions import InvalidInput
from statecharts.models import AppliedMessage, Chart, Execution, OutboxMessage
from statecharts.models.outbox import OutboxStatus
from statecharts.stepper import sweeper
from statecharts.stepper import transaction as step_transaction

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
SENDER = f"""<scxml {NS} initial="s">
  <datamodel><data id="errors" expr="0"/></datamodel>
  <state id="s">
    <transition event="go"><send event="ping" targetexpr="'#_scxml_' + _event.data"/></transition>
    <transition event="error.communication"><assign location="errors" expr="errors + 1"/>
    </transition>
  </state>
</scxml>"""
RECEIVER = f"""<scxml {NS} initial="w">
  <datamodel><data id="pings" expr="0"/></datamodel>
  <state id="w">
    <transition event="ping"><assign location="pings" expr="pings + 1"/></transition>
    <transition event="stop" target="end"/>
  </state>
  <final id="end"/>
</scxml>"""


def datamodel(execution: Execution) -> dict[str, Any]:
    execution.refresh_from_db()
    return decode(bytes(execution.position)).state.datamodel


def send_and_die_after_the_senders_commit(sender: Execution, target_session_id: str) -> None:
    """The sender's step commits; its process dies before delivering the message."""

    def die(phase: str) -> None:
        if phase == "committed":
            raise SystemExit("died after the commit")

    step_transaction.fault_hook = die
    try:
        with pytest.raises(SystemExit):
            stepper.send(sender, "go", target_session_id)
    finally:
        step_transaction.fault_hook = None


@pytest.mark.django_db(transaction=True)
def test_a_message_its_target_applied_before_finishing_is_delivered_not_undeliverable() -> None:
    receiver = stepper.start(Chart.objects.load(RECEIVER))
    sender = stepper.start(Chart.objects.load(SENDER))
    seen = 0

    def die_after_the_delivery_commits(phase: str) -> None:
        nonlocal seen
        if phase == "committed":
            seen += 1
            if seen == 2:  # the sender's step, then the receiver's delivery step
                raise SystemExit("died before the bookkeeping")

    step_transaction.fault_hook = die_after_the_delivery_commits
    try:
        with pytest.raises(SystemExit):
            stepper.send(sender, "go", receiver.session_id)
    finally:
        step_transaction.fault_hook = None
    (message,) = OutboxMessage.objects.all()
    assert message.status == OutboxStatus.PENDING
    assert AppliedMessage.objects.filter(message=message, execution=receiver).exists()
    stepper.send(receiver, "stop")  # the receiver finishes before anyone re-delivers

    assert stepper.deliver_pending() == 0  # nothing applied again
    message.refresh_from_db()
    assert message.status == OutboxStatus.DELIVERED
    assert datamodel(receiver)["pings"] == 1
    assert datamodel(sender)["errors"] == 0  # it was delivered: the sender is told nothing


@pytest.mark.django_db(transaction=True)
def test_retrying_an_undeliverable_message_never_tells_the_sender_twice() -> None:
    sender = stepper.start(Chart.objects.load(SENDER))
    with override_settings(STATECHARTS={"OUTBOX_BATCH": 1_000}):
        stepper.send(sender, "go", "not-yet")  # no such session: the core says unreachable
    assert datamodel(sender)["errors"] == 1  # error.communication in the sending step itself
    assert not OutboxMessage.objects.exists()

    receiver = stepper.start(Chart.objects.load(RECEIVER), session_id="later")
    send_and_die_after_the_senders_commit(sender, receiver.session_id)
    stepper.send(receiver, "stop")
    assert stepper.deliver_pending() == 0
    (message,) = OutboxMessage.objects.all()
    assert message.status == OutboxStatus.UNDELIVERABLE and "completed" in message.reason
    assert datamodel(sender)["errors"] == 2  # told once, in a step of its own
    steps = Execution.objects.get(pk=sender.pk).steps

    # Retrying while the target is still finished marks it undeliverable again, untold.
    assert stepper.retry_message(message.pk, reason="target back") is False
    message.refresh_from_db()
    assert message.status == OutboxStatus.UNDELIVERABLE
    # The retry is recorded on the sender (an operator's action), and nothing else happens.
    assert Execution.objects.get(pk=sender.pk).steps == steps + 1
    last = sender.history.order_by("-seq").first()
    assert last is not None and last.disposition == "operated"
    assert last.input == {
        "kind": "operation",
        "action": "outbox_retry",
        "row": {"message": message.pk, "target": message.target_session_id},
    }
    assert datamodel(sender)["errors"] == 2  # not told again
    with pytest.raises(InvalidInput):
        stepper.retry_message(message.pk, reason=" ")
    # Only undeliverable messages are retried.
    OutboxMessage.objects.filter(pk=message.pk).update(status=OutboxStatus.DELIVERED)
    assert stepper.retry_message(message.pk, reason="target back") is False
    assert Execution.objects.get(pk=sender.pk).steps == steps + 1  # nothing recorded


@pytest.mark.django_db(transaction=True)
def test_a_retried_message_reaches_a_target_that_came_back() -> None:
    receiver = stepper.start(Chart.objects.load(RECEIVER))
    sender = stepper.start(Chart.objects.load(SENDER))
    send_and_die_after_the_senders_commit(sender, receiver.session_id)
    # The target is (for whatever reason: an operator, a migration) not active for a while.
    Execution.objects.filter(pk=receiver.pk).update(status="needs_migration")
    stepper.deliver_pending()
    (message,) = OutboxMessage.objects.all()
    assert message.status == OutboxStatus.UNDELIVERABLE
    Execution.objects.filter(pk=receiver.pk).update(status="active")

    assert stepper.retry_message(message.pk, reason="target back") is True
    message.refresh_from_db()
    assert message.status == OutboxStatus.DELIVERED
    assert datamodel(receiver)["pings"] == 1


@pytest.mark.django_db(transaction=True)
def test_the_sweeper_delivers_only_what_was_left_pending_long_enough() -> None:
    t0 = datetime(2031, 5, 1, tzinfo=UTC)
    clock = {"now": t0}
    receiver = stepper.start(Chart.objects.load(RECEIVER), now=t0)
    sender = stepper.start(Chart.objects.load(SENDER), now=t0)
    with override_settings(
        STATECHARTS={"CLOCK": lambda: clock["now"], "OUTBOX_SWEEP_AGE_SECONDS": 5}
    ):
        send_and_die_after_the_senders_commit(sender, receiver.session_id)
        assert sweeper.sweep() == 0  # its writer may still be delivering it
        clock["now"] = t0 + timedelta(seconds=6)
        assert sweeper.sweep() == 1
    assert datamodel(receiver)["pings"] == 1


@pytest.mark.django_db(transaction=True)
def test_migrating_puts_the_outbox_sweeper_on_the_django_q2_schedule() -> None:
    from django_q.models import Schedule

    # (a transactional test's database is flushed and post_migrate runs again before it)
    schedule = Schedule.objects.get(name=sweeper.SCHEDULE_NAME)
    assert (schedule.func, schedule.schedule_type, schedule.minutes) == (
        sweeper.SWEEP,
        Schedule.MINUTES,
        1,
    )
