"""Payload codecs (docs/payload-codecs.md): which codec wrote each row's event data, the
encrypting codec with key rotation, and the worker's answers to a codec or key that is not
deployed (snoozed / waiting, no attempt spent) and to a corrupt payload (undecodable).

The clock is injected; nothing waits."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.core.checks import run_checks
from django.test import override_settings

from statecharts import stepper
from statecharts.core.events import Event
from statecharts.core.position import decode
from statecharts.drivers.durable import Input
from statecharts.models import Chart, Execution, HistoryEntry, OutboxMessage
from statecharts.models.outbox import OutboxStatus
from statecharts.operations.inspection import history_row
from statecharts.operations.replay import Verdict, replay
from statecharts.policies import codecs
from statecharts.stepper.stepping import feed_step
from timers import firing
from timers.models import Timer, TimerStatus

pytestmark = pytest.mark.django_db

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
T0 = datetime(2031, 3, 1, 9, 0, tzinfo=UTC)
DUE = T0 + timedelta(seconds=10)

CHART = f"""<scxml {NS} initial="a">
  <datamodel><data id="got" expr="null"/><data id="card" expr="null"/></datamodel>
  <state id="a">
    <onentry>
      <send id="later" event="later" delay="10s"><param name="secret" expr="'timer-secret'"/></send>
    </onentry>
    <transition event="later"><assign location="got" expr="_event.data.secret"/></transition>
    <transition event="note"><assign location="got" expr="_event.data.secret"/></transition>
    <transition event="tell">
      <send event="told" targetexpr="'#_scxml_' + _event.data.peer">
        <param name="secret" expr="'outbox-secret'"/>
      </send>
    </transition>
    <transition event="told"><assign location="got" expr="_event.data.secret"/></transition>
  </state>
</scxml>"""

OLD, NEW = Fernet.generate_key().decode(), Fernet.generate_key().decode()
CODECS = {"json": "statecharts.policies.codecs.JSONCodec",
    "encrypted": "statecharts.policies.codecs.EncryptingCodec"}


def encrypted(*keys: tuple[str, str], codec: str = "encrypted", **more: Any) -> override_settings:
    return override_settings(
        STATECHARTS={
            "PAYLOAD_CODECS": CODECS,
            "PAYLOAD_CODEC": codec,
            "PAYLOAD_KEYS": [{"id": kid, "key": key} for kid, key in keys],
            **more,
        }
    )


def got(execution: Execution) -> Any:
    execution.refresh_from_db()
    return decode(bytes(execution.position)).state.datamodel["got"]


def start(**kwargs: Any) -> Execution:
    return stepper.start(Chart.objects.load(CHART), now=T0, **kwargs)


def stored_text(*values: Any) -> str:
    return json.dumps(values)


# ---- the default: JSON, in clear, named on the row ------


def test_by_default_rows_name_the_json_codec_and_keep_event_data_as_it_is() -> None:
    execution = start(data={"card": "4111"})
    stepper.send(execution.pk, "note", {"secret": "plain"}, now=T0)
    timer = Timer.objects.get(execution=execution)
    assert timer.codec == "json" and timer.event["data"] == {"secret": "timer-secret"}
    entries = list(HistoryEntry.objects.filter(execution=execution).order_by("seq"))
    assert [e.codec for e in entries] == ["json", "json"]
    assert entries[0].input["data"] == {"card": "4111"}
    assert entries[1].input["event"]["data"] == {"secret": "plain"}


# ---- the encrypting codec ------


def test_encrypted_rows_hold_no_event_data_in_clear_and_every_reader_decodes_them() -> None:
    with encrypted(("k1", OLD)):
        peer = start(session_id="peer")
        execution = start(data={"card": "4111-card"})
        stepper.send(execution.pk, "note", {"secret": "input-secret"}, now=T0)
        stepper.send(execution.pk, "tell", {"peer": "peer"}, now=T0)
        timer = Timer.objects.get(execution=execution)
        message = OutboxMessage.objects.get(sender=execution)
        entries = list(HistoryEntry.objects.filter(execution=execution).order_by("seq"))
        at_rest = stored_text(timer.event, message.event, *[(e.input, e.effects) for e in entries])
        for secret in ("timer-secret", "outbox-secret", "input-secret", "4111-card"):
            assert secret not in at_rest
        # What stays in clear: names, targets, the codec and key id.
        assert timer.codec == message.codec == "encrypted"
        assert {e.codec for e in entries} == {"encrypted"}
        assert timer.event["name"] == "later" and timer.event["data"]["key"] == "k1"
        assert message.event["name"] == "told"
        # Every reader decodes: the outbox delivery (the peer got the data), the timer...
        assert message.status == OutboxStatus.DELIVERED and got(peer) == "outbox-secret"
        assert firing.fire_all_due(now=DUE).outcomes == {"fired": 2}  # (the peer's too)
        assert got(execution) == "timer-secret"
        # ... the timeline, and replay.
        rows = [history_row(e) for e in HistoryEntry.objects.filter(execution=execution)]
        assert '"4111-card"' in rows[0].data and '"input-secret"' in rows[1].data
        assert any("outbox-secret" in effect.detail for effect in rows[2].effects)
        assert replay(execution.pk).verdict is Verdict.MATCHES


def test_rotation_the_newest_key_writes_and_every_listed_key_reads() -> None:
    with encrypted(("k1", OLD)):
        execution = start()
    with encrypted(("k2", NEW), ("k1", OLD)):
        stepper.send(execution.pk, "note", {"secret": "new"}, now=T0)
        entries = list(HistoryEntry.objects.filter(execution=execution).order_by("seq"))
        assert Timer.objects.get(execution=execution).event["data"]["key"] == "k1"
        assert entries[1].input["event"]["data"]["key"] == "k2"
        assert firing.fire_all_due(now=DUE).outcomes == {"fired": 1}  # written under k1
        assert got(execution) == "timer-secret"
        assert replay(execution.pk).verdict is Verdict.MATCHES


def test_an_idempotent_repeat_of_an_encrypted_input_is_recognised() -> None:
    with encrypted(("k1", OLD)):
        execution = start()
        first = stepper.feed(
            execution.pk,
            Input.external(Event("note", data={"secret": "x"})),
            now=T0,
            idempotency_key="once",
        )
        again = stepper.feed(
            execution.pk,
            Input.external(Event("note", data={"secret": "x"})),
            now=T0,
            idempotency_key="once",
        )
    assert again.repeated and again.entry.pk == first.entry.pk


# ---- environment facts: snoozed or waiting, no attempt spent ------


def test_a_timer_written_under_a_key_not_deployed_here_is_snoozed_without_spending_an_attempt() -> (
    None
):
    with encrypted(("k2", NEW), ("k1", OLD)):
        execution = start()
    with encrypted(("k1", OLD), TIMER_SNOOZE_SECONDS=60):  # a node that has not got k2 yet
        assert firing.fire_all_due(now=DUE).outcomes == {"snoozed": 1}
    timer = Timer.objects.get(execution=execution)
    assert timer.status == TimerStatus.PENDING and timer.attempts == 0
    assert timer.due == DUE + timedelta(seconds=60)
    assert "payload key 'k2' is not deployed here" in timer.reason
    with encrypted(("k2", NEW), ("k1", OLD)):  # the key is deployed: it fires
        assert firing.fire_all_due(now=DUE + timedelta(minutes=1)).outcomes == {"fired": 1}
    assert got(execution) == "timer-secret"


def test_a_timer_naming_a_codec_not_registered_here_is_snoozed_without_spending_an_attempt() -> (
    None
):
    execution = start()
    Timer.objects.filter(execution=execution).update(codec="from-a-newer-node")
    assert firing.fire_all_due(now=DUE).outcomes == {"snoozed": 1}
    timer = Timer.objects.get(execution=execution)
    assert (timer.status, timer.attempts) == (TimerStatus.PENDING, 0)
    assert "payload codec 'from-a-newer-node' is not in PAYLOAD_CODECS here" in timer.reason


def test_an_outbox_message_under_a_key_not_deployed_waits_pending_and_is_delivered_later() -> None:
    with encrypted(("k1", OLD)):
        peer = start(session_id="peer")
        execution = start()
    outbox: list[int] = []
    with encrypted(("k2", NEW), ("k1", OLD)):
        feed_step(execution.pk, Input.external(Event("tell", data={"peer": "peer"})), T0, outbox)
    with encrypted(("k1", OLD)):
        assert stepper.deliver(outbox) == 0
        message = OutboxMessage.objects.get(pk=outbox[0])
        assert message.status == OutboxStatus.PENDING
        assert "payload key 'k2' is not deployed here" in message.last_error
    with encrypted(("k2", NEW), ("k1", OLD)):
        assert stepper.deliver(outbox) == 1
    assert got(peer) == "outbox-secret"


# ---- facts about the row: undecodable ------


def test_a_corrupt_encrypted_payload_is_undecodable_and_the_timer_discarded() -> None:
    with encrypted(("k1", OLD)):
        execution = start()
        timer = Timer.objects.get(execution=execution)
        event = dict(timer.event)
        event["data"] = {"key": "k1", "token": event["data"]["token"][:-8] + "AAAAAAA="}
        Timer.objects.filter(pk=timer.pk).update(event=event)
        assert firing.fire_all_due(now=DUE).outcomes == {"discarded": 1}
    timer.refresh_from_db()
    assert timer.status == TimerStatus.DISCARDED
    assert timer.reason.startswith("undecodable: the payload does not authenticate")


def test_a_corrupt_outbox_payload_is_undeliverable_and_its_sender_told() -> None:
    with encrypted(("k1", OLD)):
        start(session_id="peer")
        execution = start()
        outbox: list[int] = []
        feed_step(execution.pk, Input.external(Event("tell", data={"peer": "peer"})), T0, outbox)
        OutboxMessage.objects.filter(pk=outbox[0]).update(
            event={"name": "told", "data": "not an encrypted payload"}
        )
        stepper.deliver(outbox)
        message = OutboxMessage.objects.get(pk=outbox[0])
        assert message.status == OutboxStatus.UNDELIVERABLE
        assert message.reason.startswith("undecodable: not an encrypted payload")
        last = HistoryEntry.objects.filter(execution=execution).order_by("-seq").first()
        assert last is not None and last.input["event"]["name"] == "error.communication"


# ---- the codec round trip, and the system check ------


@pytest.mark.parametrize(
    "value", [None, 0, "ünïcode \x00", [1, {"a": [True, None]}], {"nested": {"x": 1.5}}]
)
def test_the_encrypting_codec_round_trips_every_json_value(value: Any) -> None:
    with encrypted(("k1", OLD)):
        codec = codecs.resolve("encrypted")
        stored = codec.encode(value)
        assert json.loads(json.dumps(stored)) == stored  # JSON, for the column
        assert codec.decode(stored) == value


def test_the_system_check_refuses_a_writing_codec_that_cannot_work_and_warns_of_others() -> None:
    def ids(**statecharts: Any) -> set[str]:
        with override_settings(STATECHARTS=statecharts):
            return {m.id for m in run_checks() if m.id and m.id.startswith("statecharts.")}

    assert ids(PAYLOAD_CODEC="nope") >= {"statecharts.E021"}
    assert "statecharts.E024" in ids(PAYLOAD_CODECS=CODECS, PAYLOAD_CODEC="encrypted")
    assert "statecharts.W021" in ids(PAYLOAD_CODECS=CODECS)  # registered, no key: warned
    missing = {**CODECS, "gone": "no.such.Codec"}
    assert "statecharts.W020" in ids(PAYLOAD_CODECS=missing, PAYLOAD_KEYS=[{"id": "k", "key": OLD}])
    assert "statecharts.E023" in ids(PAYLOAD_CODECS=CODECS, PAYLOAD_KEYS=[{"id": "k", "key": "x"}])
    assert (
        ids(
            PAYLOAD_CODECS=CODECS, PAYLOAD_CODEC="encrypted", PAYLOAD_KEYS=[{"id": "k", "key": OLD}]
        )
        == set()
    )


# ---- export and import (statecharts.operations.transfer) --


def test_an_export_carries_timer_data_decoded_and_an_import_writes_it_with_this_codec() -> None:
    from statecharts.operations.transfer import export_execution, import_execution

    with encrypted(("k1", OLD)):
        execution = start()
        document = export_execution(execution)
    (timer,) = document["parts"]["timers"]
    assert timer["event"]["data"] == {"secret": "timer-secret"}  # decoded: portable
    Timer.objects.filter(execution=execution).delete()
    execution.delete()
    with encrypted(("k2", NEW)):  # another deployment, another key
        imported = import_execution(document)
        row = Timer.objects.get(execution=imported)
        assert row.codec == "encrypted" and row.event["data"]["key"] == "k2"
        assert firing.fire_all_due(now=DUE).outcomes == {"fired": 1}
    assert got(imported) == "timer-secret"
