"""The payload codec on route timer and invocation rows, and re-encrypting stored rows
(``statecharts.operations.reencryption``, ``statechart reencrypt``): docs/payload-codecs.md.

Dumps are raw SQL reads of the columns (what a database dump holds). The clock is injected;
nothing waits."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.core.management import CommandError, call_command
from django.db import OperationalError, connection, transaction
from django.test import override_settings
from django.utils.module_loading import import_string

from invocations import tasks
from invocations.models import Invocation
from routes.models import DeliveryStatus, RouteDelivery
from statecharts import stepper
from statecharts.core.position import decode
from statecharts.models import Chart, Execution, HistoryEntry, OutboxMessage
from statecharts.operations import reencryption
from statecharts.operations.replay import Verdict, replay
from statecharts.policies import codecs
from tests.routes.recording import Recorder, settings_with
from timers import firing
from timers.models import RouteTimer, Timer

pytestmark = pytest.mark.django_db(transaction=True)

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
T0 = datetime(2031, 5, 1, 9, 0, tzinfo=UTC)
A, B, C = (Fernet.generate_key().decode() for _ in range(3))
CODECS = {"json": "statecharts.policies.codecs.JSONCodec",
    "encrypted": "statecharts.policies.codecs.EncryptingCodec"}
SECRETS = ("timer-secret", "route-secret", "invoke-secret", "start-secret", "task-secret")

CHILD = f"""<scxml {NS} initial="idle">
  <datamodel><data id="who" expr="null"/></datamodel>
  <state id="idle">
    <onentry><send target="#_parent" event="hello"><param name="who" expr="who"/></send></onentry>
  </state>
</scxml>"""

# Every kind of row at once: history (the start's data, inputs), outbox (the child's hello),
# a timer, a route timer, and an invocation (its params).
CHART = f"""<scxml {NS} initial="a">
  <datamodel><data id="heard" expr="null"/><data id="got" expr="null"/></datamodel>
  <state id="a">
    <onentry>
      <send id="later" event="later" delay="10s"><param name="secret" expr="'timer-secret'"/></send>
      <send id="nudge" type="record" target="ada" event="nudge" delay="3s">
        <param name="secret" expr="'route-secret'"/></send>
    </onentry>
    <invoke id="kid" type="scxml">
      <param name="who" expr="'invoke-secret'"/>
      <content>{CHILD}</content>
    </invoke>
    <transition event="hello"><assign location="heard" expr="_event.data.who"/></transition>
    <transition event="later"><assign location="got" expr="_event.data.secret"/></transition>
  </state>
</scxml>"""

TASK = f"""<scxml {NS} initial="paying">
  <datamodel><data id="receipt" expr="null"/><data id="why" expr="null"/></datamodel>
  <state id="paying">
    <invoke id="pay" type="task" src="charge"><param name="card" expr="'task-secret'"/></invoke>
    <transition event="done.invoke.pay" target="paid">
      <assign location="receipt" expr="_event.data"/></transition>
    <transition event="error.*" target="failed">
      <assign location="why" expr="_event.data.message"/></transition>
  </state>
  <state id="paid"/><state id="failed"/>
</scxml>"""

charged: list[dict[str, Any]] = []


def charge(card: str) -> dict[str, Any]:
    charged.append({"card": card})
    return {"charged": True}


def using(*keys: tuple[str, str], codec: str = "encrypted", **more: Any) -> override_settings:
    """The test settings with the recording route, the task above, and these codec keys."""
    return override_settings(
        STATECHARTS=settings_with(
            PAYLOAD_CODECS=CODECS,
            PAYLOAD_CODEC=codec,
            PAYLOAD_KEYS=[{"id": kid, "key": key} for kid, key in keys],
            TASKS={"charge": f"{__name__}.charge"},
            INVOKERS={"task": "invocations.handlers.TaskInvoker"},
            TIMER_SNOOZE_SECONDS=60,
            **more,
        )
    )


@pytest.fixture(autouse=True)
def inline(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Handlers run when enqueued (the django-q2 queue, inline); the recorder cleared."""
    charged.clear()
    Recorder.deliveries.clear()
    monkeypatch.setattr(
        tasks,
        "enqueue",
        lambda func, pk: import_string(func)(pk, now=T0)
        if func == tasks.RUN
        else import_string(func)(pk),
    )
    yield
    Recorder.deliveries.clear()


def start(source: str = CHART, **kwargs: Any) -> Execution:
    execution = stepper.start(Chart.objects.load(source), now=T0, **kwargs)
    execution.refresh_from_db()
    return execution


def datamodel(execution: Execution) -> dict[str, Any]:
    execution.refresh_from_db()
    return decode(bytes(execution.position)).state.datamodel


def dump(table: str, *columns: str) -> str:
    """What a database dump holds of these columns: a raw SQL read, no ORM decoding."""
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {', '.join(map(quote, columns))} FROM {quote(table)}")
        return json.dumps([list(row) for row in cursor.fetchall()], default=str)


def dump_all() -> str:
    return " ".join(
        [
            dump("timers_routetimer", "message", "codec"),
            dump("invocations_invocation", "params", "codec"),
            dump("timers_timer", "event", "codec"),
            dump("statecharts_outboxmessage", "event", "codec"),
            dump("statecharts_historyentry", "input", "effects", "codec"),
        ]
    )


def key_ids() -> set[str]:
    """The key ids every encrypted value in every row kind names."""
    found: set[str] = set()

    def note(stored: Any) -> Any:
        if isinstance(stored, dict) and "key" in stored:
            found.add(stored["key"])
        return stored

    for kind in reencryption.registered():
        rows = kind.model._default_manager.filter(kind.rows()).exclude(codec="json")
        for values in rows.values(*kind.fields):
            kind.convert(values, note)
    return found


# ---- route timers and invocations: encoded at rest, decoded where they are read ------


def test_route_timer_and_invocation_rows_hold_no_event_data_in_clear_with_encryption_on() -> None:
    with using(("a", A)):
        execution = start(data={"card": "start-secret"})
        paying = start(TASK)
        route_row = RouteTimer.objects.get(execution=execution)
        invocation = Invocation.objects.get(parent=execution)
        at_rest = dump_all()
        for secret in SECRETS:
            assert secret not in at_rest, secret
        assert route_row.codec == invocation.codec == "encrypted"
        # Names, route, target, key stay in clear (the delivery ledger keeps them too).
        assert (route_row.message["name"], route_row.message["target"]) == ("nudge", "ada")
        assert route_row.message["data"]["key"] == "a"
        # Every reader decodes: the child got its param, the task its card, the route its data.
        assert datamodel(execution)["heard"] == "invoke-secret"
        assert charged == [{"card": "task-secret"}]
        assert datamodel(paying)["receipt"] == {"charged": True}
        assert firing.fire_all_due(now=T0 + timedelta(seconds=3)).outcomes == {"fired": 1}
        [(_config, message, _key)] = Recorder.deliveries
        assert message.data == {"secret": "route-secret"}
        # The API, the admin: the params decoded.
        assert invocation.shown_params == {"value": {"who": "invoke-secret"}, "unreadable": ""}


def test_the_api_and_the_admin_show_invocation_params_decoded(admin_client: Any) -> None:
    with using(("a", A)):
        execution = start()
        invocation = Invocation.objects.get(parent=execution)
        body = admin_client.get(f"/api/invocations/{invocation.pk}/").json()
        assert body["params"] == {"who": "invoke-secret"} and body["params_unreadable"] == ""
        assert body["codec"] == "encrypted"
        page = admin_client.get(
            f"/admin/invocations/invocation/{invocation.pk}/change/"
        ).content.decode()
        assert "invoke-secret" in page and '"token"' not in page
    with using(("b", B)):  # the key is not deployed: shown as stored, with the reason
        body = admin_client.get(f"/api/invocations/{invocation.pk}/").json()
        assert body["params"]["key"] == "a"
        assert "payload key 'a' is not deployed here" in body["params_unreadable"]


def test_a_route_timer_under_a_key_not_deployed_is_snoozed_and_fires_once_it_is() -> None:
    with using(("a", A)):
        execution = start()
    with using(("b", B)):
        assert firing.fire_all_due(now=T0 + timedelta(seconds=3)).outcomes == {"snoozed": 1}
    row = RouteTimer.objects.get(execution=execution)
    assert row.due == T0 + timedelta(seconds=63)
    assert "payload key 'a' is not deployed here" in row.reason
    assert not Recorder.deliveries and not RouteDelivery.objects.exists()
    with using(("a", A)):  # (the 10 s SCXML timer fires too)
        assert firing.fire_all_due(now=T0 + timedelta(seconds=63)).outcomes == {"fired": 2}
    [(_config, message, _key)] = Recorder.deliveries
    assert message.data == {"secret": "route-secret"}


def test_a_corrupt_route_timer_payload_is_discarded_undecodable_with_its_reason_in_the_ledger() -> (
    None
):
    with using(("a", A)):
        execution = start()
        row = RouteTimer.objects.get(execution=execution)
        RouteTimer.objects.filter(pk=row.pk).update(
            message={**row.message, "data": "not an encrypted payload"}
        )
        assert firing.fire_all_due(now=T0 + timedelta(seconds=3)).outcomes == {"discarded": 1}
    assert not RouteTimer.objects.filter(pk=row.pk).exists() and not Recorder.deliveries
    ledger = RouteDelivery.objects.get(key=row.key)
    assert ledger.status == DeliveryStatus.DISCARDED
    assert ledger.reason.startswith("undecodable: not an encrypted payload")


def test_a_task_whose_params_key_is_not_deployed_is_snoozed_then_runs_and_corrupt_ones_fail(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tasks, "enqueue", lambda func, pk: None)  # run by hand below
    with using(("a", A)):
        paying, other = start(TASK), start(TASK)
    invocation = Invocation.objects.get(parent=paying)
    with using(("b", B)):  # a node without key a: snoozed, no attempt spent
        assert tasks.run(invocation.pk, now=T0) == "snoozed"
    invocation.refresh_from_db()
    assert invocation.attempts == 0 and invocation.next_attempt_at is not None
    assert "payload key 'a' is not deployed here" in invocation.last_error
    assert charged == []
    with using(("a", A)):
        assert tasks.run(invocation.pk, now=T0) == "skipped"  # its retry is not due yet
        assert tasks.run(invocation.pk, now=invocation.next_attempt_at) == "started"
        assert charged == [{"card": "task-secret"}]
        assert datamodel(paying)["receipt"] == {"charged": True}
        # A corrupt payload: the invocation fails, the parent is told.
        row = Invocation.objects.get(parent=other)
        Invocation.objects.filter(pk=row.pk).update(params={"key": "a", "token": "AAAA"})
        assert tasks.run(row.pk, now=T0) == "failed"
        assert "undecodable params" in datamodel(other)["why"]
    assert charged == [{"card": "task-secret"}]


def test_a_child_whose_params_key_is_not_deployed_waits_and_corrupt_params_fail_the_invoke() -> (
    None
):
    with using(("a", A)):
        execution = start()
    invocation = Invocation.objects.get(parent=execution)
    # Run its start again as if it had not been delivered, on a node without the key.
    Invocation.objects.filter(pk=invocation.pk).update(status="starting", child=None)
    Execution.objects.filter(parent=execution).delete()
    start_message = OutboxMessage.objects.get(sender=execution, kind="invocations.start")
    OutboxMessage.objects.filter(pk=start_message.pk).update(status="pending")
    with using(("b", B)):
        assert stepper.deliver([start_message.pk]) == 0
    start_message.refresh_from_db()
    assert start_message.status == "pending" and start_message.attempts == 0
    assert "payload key 'a' is not deployed here" in start_message.last_error
    with using(("a", A)):
        Invocation.objects.filter(pk=invocation.pk).update(params="corrupt")
        assert stepper.deliver([start_message.pk]) == 1
    invocation.refresh_from_db()
    assert invocation.status == "failed" and invocation.reason.startswith("undecodable params")
    last = HistoryEntry.objects.filter(execution=execution).order_by("-seq").first()
    assert last is not None and last.input["event"]["name"] == "error.execution"


def test_an_export_carries_route_timer_data_decoded_and_an_import_encodes_it_again() -> None:
    from statecharts.operations.transfer import export_execution, import_execution

    source = CHART.replace("<invoke", "<!--").replace("</invoke>", "-->")
    with using(("a", A)):
        execution = start(source)
        document = export_execution(execution)
    (waiting,) = document["parts"]["route_timers"]
    assert waiting["message"]["data"] == {"secret": "route-secret"}
    RouteTimer.objects.all().delete()
    Timer.objects.all().delete()
    execution.delete()
    with using(("b", B)):
        imported = import_execution(document)
        row = RouteTimer.objects.get(execution=imported)
        assert row.codec == "encrypted" and row.message["data"]["key"] == "b"
        assert firing.fire_all_due(now=T0 + timedelta(seconds=3)).outcomes == {"fired": 1}
    [(_config, message, _key)] = Recorder.deliveries
    assert message.data == {"secret": "route-secret"}


# ---- re-encrypting -------------------------------------------------------------------------


def test_rotation_rows_written_under_a_reencrypted_under_b_stay_readable_once_a_is_removed() -> (
    None
):
    with using(("a", A)):
        execution = start(data={"card": "start-secret"})
        start(TASK)
    assert key_ids() == {"a"}
    with using(("b", B), ("a", A)):
        report = reencryption.reencrypt(batch=2)
        assert key_ids() == {"b"}
        assert report.skipped == [] and report.changed == report.examined > 0
        kinds = {kind.name: kind for kind in report.kinds}
        assert set(kinds) == {"history", "outbox", "timers", "route_timers", "invocations"}
        assert all(kinds[name].changed for name in kinds)
        again = reencryption.reencrypt()  # idempotent: nothing is left to change
        assert again.changed == 0 and again.examined == report.examined
    with using(("b", B)):  # key a removed: everything is still readable
        for secret in SECRETS[:4]:
            assert secret not in dump_all()
        assert replay(execution.pk).verdict is Verdict.MATCHES
        outcomes = firing.fire_all_due(now=T0 + timedelta(seconds=10)).outcomes
        assert outcomes == {"fired": 2}
        assert datamodel(execution)["got"] == "timer-secret"
        [(_config, message, _key)] = Recorder.deliveries
        assert message.data == {"secret": "route-secret"}
        for invocation in Invocation.objects.all():
            assert invocation.shown_params["unreadable"] == ""
        for message_row in OutboxMessage.objects.filter(kind="event"):
            codecs.decode_event(message_row.event, message_row.codec)


def test_turning_encryption_on_then_reencrypting_leaves_no_event_data_in_clear() -> None:
    with using(codec="json"):
        execution = start(data={"card": "start-secret"})
        start(TASK)
    assert "route-secret" in dump_all() and "invoke-secret" in dump_all()
    with using(("a", A)):
        report = reencryption.reencrypt()
        assert report.changed > 0
        at_rest = dump_all()
        for secret in SECRETS:
            assert secret not in at_rest, secret
        assert replay(execution.pk).verdict is Verdict.MATCHES


def test_a_dry_run_counts_what_would_change_and_changes_nothing() -> None:
    with using(("a", A)):
        start()
    before = dump_all()
    with using(("b", B), ("a", A)):
        report = reencryption.reencrypt(dry_run=True, batch=3)
        assert report.dry_run and report.changed == report.examined > 0
        assert dump_all() == before
        assert reencryption.reencrypt().changed == report.changed  # what it said it would


def test_a_row_under_a_key_not_deployed_is_reported_and_left_and_the_rest_reencrypted() -> None:
    with using(("c", C)):
        execution = start()
    unknown = RouteTimer.objects.get(execution=execution)
    with using(("a", A)):
        start()
    corrupt = Timer.objects.exclude(execution=execution).get()
    Timer.objects.filter(pk=corrupt.pk).update(
        event={**corrupt.event, "data": {"key": "a", "token": "AAAA"}}
    )
    before = {
        "unknown": RouteTimer.objects.get(pk=unknown.pk).message,
        "corrupt": Timer.objects.get(pk=corrupt.pk).event,
    }
    with using(("b", B), ("a", A)):
        report = reencryption.reencrypt()
    skipped = {(s.kind, s.pk): s.reason for s in report.skipped}
    assert skipped[("route_timers", unknown.pk)].startswith(
        "not deployed here: payload key 'c' is not deployed here"
    )
    assert skipped[("timers", corrupt.pk)].startswith("undecodable: the payload does not")
    # Left as they were (never dropped); every other row is under b now.
    assert RouteTimer.objects.get(pk=unknown.pk).message == before["unknown"]
    assert Timer.objects.get(pk=corrupt.pk).event == before["corrupt"]
    # Every row of the execution written under c is skipped, each reported; of the rest,
    # only the corrupt one still names key a.
    assert key_ids() == {"a", "b", "c"}
    assert all(s.codec == "encrypted" for s in report.skipped)
    assert len(report.skipped) == report.examined - report.changed - report.current
    assert ("invocations", Invocation.objects.get(parent=execution).pk) in skipped
    # The command says so, and fails so a script does not drop key c.
    out = StringIO()
    with using(("b", B), ("a", A)), pytest.raises(CommandError, match="could not be read here"):
        call_command("statechart", "reencrypt", stdout=out)
    assert f"skipped route_timers #{unknown.pk} (encrypted)" in out.getvalue()


def test_each_batch_locks_the_owning_executions_before_it_rewrites_their_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with using(("a", A)):
        execution = start()
    locked: list[tuple[set[int], set[str]]] = []
    real = stepper.lock_many

    def spy(pks: set[int]) -> dict[int, Execution]:
        locked.append((set(pks), key_ids()))  # what the rows say when the lock is taken
        return real(pks)

    monkeypatch.setattr(stepper, "lock_many", spy)
    with using(("b", B), ("a", A)):
        report = reencryption.reencrypt(only=["timers", "route_timers"], batch=1)
    assert report.changed == 2 and len(locked) == 2
    assert all(pks == {execution.pk} for pks, _ in locked)
    assert "a" in locked[0][1]  # locked before anything was rewritten


def test_it_resumes_after_a_row_id_and_refuses_a_writing_codec_with_no_key() -> None:
    with using(("a", A)):
        start()
        start()
    first, second = Timer.objects.order_by("pk")
    with using(("b", B), ("a", A)):
        report = reencryption.reencrypt(only=["timers"], after={"timers": first.pk})
        assert report.kinds[0].examined == 1 and report.kinds[0].last == second.pk
    assert Timer.objects.get(pk=first.pk).event["data"]["key"] == "a"
    assert Timer.objects.get(pk=second.pk).event["data"]["key"] == "b"
    with using(), pytest.raises(reencryption.ReencryptRefused, match="no key"):
        reencryption.reencrypt()
    with pytest.raises(ValueError, match="no encoded row kind named 'nope'"):
        reencryption.reencrypt(only=["nope"])


def test_the_command_dry_run_says_what_would_change_and_the_run_its_rows_per_second() -> None:
    with using(("a", A)):
        start()
    out = StringIO()
    with using(("b", B), ("a", A)):
        call_command("statechart", "reencrypt", "--dry-run", stdout=out)
        text = out.getvalue()
        assert "route_timers: 1 row(s) examined, 1 would be re-encoded" in text
        assert "dry run: nothing was written" in text
        assert key_ids() == {"a"}
        out = StringIO()
        call_command("statechart", "reencrypt", "--batch", "2", stdout=out)
    assert "invocations: 1 row(s) examined, 1 re-encoded, 0 already current" in out.getvalue()
    assert "re-encoded with 'encrypted'" in out.getvalue()
    assert key_ids() == {"b"}
    with pytest.raises(CommandError, match="no encoded row kind named 'nope'"):
        call_command("statechart", "reencrypt", "--only", "nope")


@pytest.mark.postgres
def test_on_postgresql_a_batch_waits_for_the_holder_of_its_execution_and_writes_nothing() -> None:
    """The lock order, with a real second connection: a step (here, a transaction holding
    the execution's row lock) blocks the batch that would rewrite that execution's rows; the
    batch's lock wait runs out (``lock_timeout``) and it rolls back, having written nothing."""
    with using(("a", A)):
        execution = start()
    held, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def hold() -> None:
        try:
            with transaction.atomic():
                Execution.objects.select_for_update().get(pk=execution.pk)
                held.set()
                release.wait(timeout=120)
        except BaseException as exc:  # (reported below, not lost in the thread)
            errors.append(exc)
            held.set()
        finally:
            connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(timeout=120) and not errors
        with using(("b", B), ("a", A)):
            with connection.cursor() as cursor:
                cursor.execute("SET lock_timeout = '300ms'")
            with pytest.raises(OperationalError, match="lock"):
                reencryption.reencrypt(only=["timers"])
            assert key_ids() == {"a"}
    finally:
        release.set()
        holder.join()
        with connection.cursor() as cursor:
            cursor.execute("RESET lock_timeout")
    assert not errors
    with using(("b", B), ("a", A)):
        assert reencryption.reencrypt(only=["timers"]).changed == 1
