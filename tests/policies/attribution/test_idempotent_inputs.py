"""Retrying safely: an input fed twice with one idempotency key is applied once, through every
door; the same key with other content is refused; a client killed before it heard the answer
retries and nothing is applied twice (a real process, SIGKILLed, on the test database)."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db import connection, connections
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from statecharts import stepper
from statecharts.core.position import decode
from statecharts.models import Chart, Execution, HistoryEntry, StartKey
from statecharts.models.history import Disposition
from statecharts.policies import validation
from statecharts.policies.idempotency import IdempotencyConflict
from statecharts.stepper import transaction as step_transaction

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0"'
TIMEOUT = 30.0

COUNTER = f"""<scxml {NS} name="counter" datamodel="ecmascript" initial="s">
  <datamodel><data id="count" expr="0"/><data id="label" expr="''"/></datamodel>
  <state id="s">
    <transition event="go"><assign location="count" expr="count + 1"/></transition>
  </state>
</scxml>"""
# The same chart name, a new version (another source).
COUNTER_V2 = COUNTER.replace('expr="count + 1"', 'expr="count + 2"')
OTHER = COUNTER.replace('name="counter"', 'name="other"')


def count_of(execution: Execution) -> int:
    execution.refresh_from_db()
    return int(decode(bytes(execution.position)).state.datamodel["count"])


def applied(execution: Execution) -> list[HistoryEntry]:
    return list(
        HistoryEntry.objects.filter(execution=execution, disposition=Disposition.APPLIED)
        .exclude(seq=1)
        .order_by("seq")
    )


# ---- the stepper ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_send_repeated_with_its_key_applies_nothing_and_returns_the_first_result() -> None:
    execution = stepper.start(Chart.objects.load(COUNTER))
    first = stepper.send(execution.pk, "go", {"n": 1}, idempotency_key="k-1")
    again = stepper.send(execution.pk, "go", {"n": 1}, idempotency_key="k-1")
    assert not first.repeated and again.repeated
    assert again.entry.pk == first.entry.pk and again.entry.seq == 2
    assert count_of(execution) == 1 and execution.steps == 2
    assert HistoryEntry.objects.get(pk=first.entry.pk).idempotency_key == "k-1"
    # Another key is another input.
    stepper.send(execution.pk, "go", {"n": 1}, idempotency_key="k-2")
    assert count_of(execution) == 2


@pytest.mark.django_db
def test_a_repeat_matches_a_row_stored_with_its_unset_event_fields_and_one_without() -> None:
    """A history row keeps an input's event without its unset routing fields (issue 31: fewer
    bytes per step); rows written before kept them as null. A repeat with the key is the same
    input against either row, and other content is refused against either."""
    execution = stepper.start(Chart.objects.load(COUNTER))
    first = stepper.send(execution.pk, "go", {"n": 1}, idempotency_key="k")
    stored = HistoryEntry.objects.get(pk=first.entry.pk).input
    assert stored == {"kind": "event", "event": {"name": "go", "type": "external",
                                                 "data": {"n": 1}}}
    assert stepper.send(execution.pk, "go", {"n": 1}, idempotency_key="k").repeated
    # The row as a release before this one wrote it: every field, unset ones as null.
    HistoryEntry.objects.filter(pk=first.entry.pk).update(input={
        "kind": "event", "event": {"name": "go", "type": "external", "data": {"n": 1},
                                   "sendid": None, "origin": None, "origintype": None,
                                   "invokeid": None}})
    assert stepper.send(execution.pk, "go", {"n": 1}, idempotency_key="k").repeated
    with pytest.raises(IdempotencyConflict):
        stepper.send(execution.pk, "go", {"n": 2}, idempotency_key="k")
    assert count_of(execution) == 1
    # A field that is set is kept (an outbox or timer event's sendid, origin, ...).
    from statecharts.stepper.recording import stored_form

    event = {"name": "e", "type": "external", "data": None, "sendid": "s1", "origin": "#_x",
             "origintype": None, "invokeid": None}
    assert stored_form({"kind": "event", "event": event})["event"] == {
        "name": "e", "type": "external", "data": None, "sendid": "s1", "origin": "#_x"}


@pytest.mark.django_db
def test_the_same_key_with_other_content_is_refused_and_nothing_is_written() -> None:
    execution = stepper.start(Chart.objects.load(COUNTER))
    stepper.send(execution.pk, "go", {"n": 1}, idempotency_key="k")
    with pytest.raises(IdempotencyConflict, match="'k' was used for another input"):
        stepper.send(execution.pk, "go", {"n": 2}, idempotency_key="k")
    with pytest.raises(IdempotencyConflict):
        stepper.cancel(execution.pk, idempotency_key="k")
    execution.refresh_from_db()
    assert execution.steps == 2 and execution.status == "active"


@pytest.mark.django_db
def test_a_cancel_repeated_with_its_key_is_one_cancel() -> None:
    execution = stepper.start(Chart.objects.load(COUNTER))
    first = stepper.cancel(execution.pk, idempotency_key="c")
    again = stepper.cancel(execution.pk, idempotency_key="c")
    assert again.repeated and again.entry.pk == first.entry.pk
    assert first.disposition == Disposition.APPLIED
    execution.refresh_from_db()
    assert execution.status == "cancelled" and execution.steps == 2  # no "discarded" entry


@pytest.mark.django_db
def test_a_key_is_checked_like_any_text_from_outside() -> None:
    execution = stepper.start(Chart.objects.load(COUNTER))
    for bad in ["", "x" * 201, "tab\there", 7]:
        with pytest.raises(validation.InvalidInput, match="idempotency_key"):
            stepper.send(execution.pk, "go", idempotency_key=bad)  # type: ignore[arg-type]
    assert execution.steps == 1


@pytest.mark.django_db
def test_a_start_repeated_with_its_key_starts_nothing_even_across_a_new_chart_version() -> None:
    v1 = Chart.objects.load(COUNTER, version="1")
    first = stepper.start_result(v1, data={"count": 5}, business_key="b-1", idempotency_key="s")
    v2 = Chart.objects.load(COUNTER_V2, version="2", new_version=True)
    # The retry resolves "counter" to its latest version now; it must not start twice (nor
    # trip over the business key its first attempt took).
    again = stepper.start_result(v2, data={"count": 5}, business_key="b-1", idempotency_key="s")
    assert again.repeated and again.execution.pk == first.execution.pk
    assert again.execution.chart_id == v1.pk
    assert again.entry.seq == 1 and again.entry.idempotency_key == "s"
    assert Execution.objects.count() == 1
    assert stepper.start(v1, data={"count": 5}, business_key="b-1", idempotency_key="s").pk == (
        first.execution.pk
    )
    # Other data under the key: refused, nothing started.
    with pytest.raises(IdempotencyConflict, match="already started execution"):
        stepper.start(v1, data={"count": 6}, business_key="b-1", idempotency_key="s")
    # The key is unique per chart name: another chart may use it.
    other = stepper.start(Chart.objects.load(OTHER), idempotency_key="s")
    assert other.pk != first.execution.pk
    assert Execution.objects.count() == 2 and StartKey.objects.count() == 2


@pytest.mark.django_db
def test_a_start_without_a_key_starts_every_time() -> None:
    chart = Chart.objects.load(COUNTER)
    stepper.start(chart)
    stepper.start(chart)
    assert Execution.objects.count() == 2 and not StartKey.objects.exists()


# ---- the API -----------------------------------------------------------------------------------


@pytest.fixture
def api() -> APIClient:
    client = APIClient()
    client.force_authenticate(User.objects.create_superuser("op", "op@example.com", "pw"))
    return client


@pytest.mark.django_db
def test_the_api_replays_a_send_with_its_idempotency_key_and_refuses_other_content(
    api: APIClient,
) -> None:
    execution = stepper.start(Chart.objects.load(COUNTER))
    url = f"/api/executions/{execution.pk}/send/"

    def send(data: Any, key: str = "abc") -> Any:
        body = {"name": "go", "data": data}
        return api.post(url, body, format="json", HTTP_IDEMPOTENCY_KEY=key)

    first = send({"n": 1})
    assert first.status_code == 200 and first.json()["repeated"] is False
    assert "Idempotent-Replayed" not in first
    again = send({"n": 1})
    assert again.status_code == 200, again.content
    assert again.json()["repeated"] is True and again.json()["seq"] == first.json()["seq"]
    assert again["Idempotent-Replayed"] == "true"
    conflict = send({"n": 2})
    assert conflict.status_code == 422
    assert "was used for another input" in conflict.json()["detail"]
    bad = send({"n": 1}, key="k" * 201)
    assert bad.status_code == 400 and "Idempotency-Key" in bad.json()
    assert count_of(execution) == 1 and execution.steps == 2


@pytest.mark.django_db
def test_the_api_replays_a_start_and_a_cancel(api: APIClient) -> None:
    chart = Chart.objects.load(COUNTER)
    body = {"chart": chart.pk, "data": {"count": 1}}
    first = api.post("/api/executions/", body, format="json", HTTP_IDEMPOTENCY_KEY="start-1")
    assert first.status_code == 201, first.content
    again = api.post("/api/executions/", body, format="json", HTTP_IDEMPOTENCY_KEY="start-1")
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
    assert again["Idempotent-Replayed"] == "true"
    other = {"chart": chart.pk, "data": {"count": 2}}
    refused = api.post("/api/executions/", other, format="json", HTTP_IDEMPOTENCY_KEY="start-1")
    assert refused.status_code == 422
    assert Execution.objects.count() == 1
    pk = first.json()["id"]
    cancel = f"/api/executions/{pk}/cancel/"
    assert api.post(cancel, HTTP_IDEMPOTENCY_KEY="stop").json()["repeated"] is False
    replay = api.post(cancel, HTTP_IDEMPOTENCY_KEY="stop")
    assert replay.status_code == 200 and replay.json()["repeated"] is True
    assert replay.json()["disposition"] == "applied"  # the first cancel's, not a discard


# ---- the admin: a token issued with each rendered form ----------------------------------------


@pytest.mark.django_db
def test_posting_one_rendered_admin_form_twice_applies_its_input_once(client: Client) -> None:
    client.force_login(User.objects.create_superuser("admin", "a@example.com", "pw"))
    execution = stepper.start(Chart.objects.load(COUNTER))
    page = client.get(reverse("admin:statecharts_execution_change", args=[execution.pk]))
    tokens = page.context["send_form"]["idempotency_token"].value()
    cancel_token = page.context["cancel_form"]["idempotency_token"].value()
    assert tokens.startswith("admin:") and cancel_token.startswith("admin:")
    assert tokens != cancel_token
    body = page.content.decode()
    assert f'name="idempotency_token" value="{tokens}"' in body
    assert f'name="idempotency_token" value="{cancel_token}"' in body
    # Another rendering issues another token.
    again = client.get(reverse("admin:statecharts_execution_change", args=[execution.pk]))
    assert again.context["send_form"]["idempotency_token"].value() != tokens

    send = reverse("admin:statecharts_execution_send", args=[execution.pk])
    form = {"name": "go", "data": "", "idempotency_token": tokens}
    client.post(send, form)
    answer = client.post(send, form, follow=True)  # the double click
    assert count_of(execution) == 1
    assert "This form was already posted (step 2)" in answer.content.decode()
    # The same token with another event: refused, nothing applied.
    refused = client.post(send, {**form, "name": "other"}, follow=True)
    assert "was used for another input" in refused.content.decode()
    cancel = reverse("admin:statecharts_execution_cancel", args=[execution.pk])
    client.post(cancel, {"idempotency_token": cancel_token})
    client.post(cancel, {"idempotency_token": cancel_token})
    execution.refresh_from_db()
    assert execution.status == "cancelled" and execution.steps == 3


@pytest.mark.django_db
def test_the_admin_start_form_carries_a_token(client: Client) -> None:
    client.force_login(User.objects.create_superuser("admin", "a@example.com", "pw"))
    chart = Chart.objects.load(COUNTER)
    page = client.get(reverse("admin:statecharts_chart_change", args=[chart.pk]))
    token = page.context["start_form"]["idempotency_token"].value()
    start = reverse("admin:statecharts_chart_start", args=[chart.pk])
    form = {"data": '{"count": 3}', "business_key": "", "idempotency_token": token}
    client.post(start, form)
    client.post(start, form)
    assert Execution.objects.count() == 1


# ---- the command -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_command_takes_an_idempotency_key() -> None:
    execution = stepper.start(Chart.objects.load(COUNTER))
    out = io.StringIO()
    args = ["statechart", "send", str(execution.pk), "go", "--idempotency-key", "cli-1"]
    call_command(*args, stdout=out)
    call_command(*args, stdout=out)
    assert "was used by step 2; nothing was applied again" in out.getvalue()
    assert count_of(execution) == 1
    with pytest.raises(CommandError, match="--idempotency-key is refused"):
        call_command("statechart", "cancel", str(execution.pk), "--idempotency-key", "")
    with pytest.raises(CommandError, match="was used for another input"):
        call_command(*args, "--data", "1", stdout=out)
    call_command("statechart", "start", "counter", "--idempotency-key", "s-1", stdout=out)
    call_command("statechart", "start", "counter", "--idempotency-key", "s-1", stdout=out)
    assert "started it before; nothing was started" in out.getvalue()
    assert Execution.objects.count() == 2


# ---- a real client, killed before it heard the answer -----------------------------------------

Spawn = Callable[..., "subprocess.Popen[str]"]


def run_until_killed(
    spawn: Spawn, phase: str, *args: str, while_frozen: Callable[[], None]
) -> None:
    """Run the client until it is frozen at ``phase``, call ``while_frozen``, SIGKILL it."""
    with tempfile.TemporaryFile("w+") as stderr:
        client = spawn(
            ["idempotent_client.py", phase, *args], stdout=subprocess.PIPE, stderr=stderr
        )
        try:
            assert client.stdout is not None
            line = client.stdout.readline().strip()
            if line != f"AT {phase}":
                client.wait(timeout=TIMEOUT)
                stderr.seek(0)
                pytest.fail(f"the client never reached {phase} ({line!r}):\n{stderr.read()}")
            while_frozen()
            os.kill(client.pid, signal.SIGKILL)
            assert client.wait(timeout=TIMEOUT) == -signal.SIGKILL
        finally:
            if client.poll() is None:
                client.kill()
                client.wait(timeout=TIMEOUT)
            if client.stdout is not None:
                client.stdout.close()


@pytest.mark.django_db(transaction=True)
def test_a_client_killed_after_the_commit_retries_and_the_event_is_applied_once(
    spawn: Spawn,
) -> None:
    """The answer was lost (the client died after the step committed): the retry with the
    same key finds the first attempt's entry and applies nothing."""
    execution = stepper.start(Chart.objects.load(COUNTER))
    run_until_killed(
        spawn,
        "committed",
        "send",
        str(execution.pk),
        "key-1",
        '{"n": 1}',
        while_frozen=lambda: None,
    )
    assert count_of(execution) == 1  # the killed client's step is committed
    retry = stepper.send(execution.pk, "go", {"n": 1}, idempotency_key="key-1")
    assert retry.repeated and retry.entry.caller_context == {"client": "killed"}
    assert count_of(execution) == 1 and len(applied(execution)) == 1

    chart = Chart.objects.load(COUNTER_V2, new_version=True)
    run_until_killed(
        spawn,
        "committed",
        "start",
        str(chart.pk),
        "start-1",
        '{"count": 7}',
        while_frozen=lambda: None,
    )
    started = Execution.objects.exclude(pk=execution.pk).get()
    again = stepper.start_result(chart, data={"count": 7}, idempotency_key="start-1")
    assert again.repeated and again.execution.pk == started.pk
    assert Execution.objects.count() == 2


def _waiting_on_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND datname = current_database()"
        )
        (waiting,) = cursor.fetchone()
    return bool(waiting)


def _until(condition: Callable[[], bool], what: str) -> None:
    """Poll until another process is in the state we need (not a sleep standing in for a
    timer: the other side is a real process we cannot signal)."""
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting until {what}")
        time.sleep(0.01)


def _in_thread(
    work: Callable[[], Any], name: str = "retry"
) -> tuple[threading.Thread, dict[str, Any]]:
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = work()
        except BaseException as exc:  # reported by the test
            outcome["error"] = exc
        finally:
            connections.close_all()

    thread = threading.Thread(target=run, name=name)
    thread.start()
    return thread, outcome


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_retry_waits_for_a_client_killed_mid_step_and_then_applies_the_event_once(
    spawn: Spawn,
) -> None:
    """The client died holding the execution's lock, before its commit: the retry (sent on a
    timeout, while the first attempt is still in the database) waits on the lock, the
    database rolls the dead client's transaction back, and the retry applies the event."""
    execution = stepper.start(Chart.objects.load(COUNTER))
    holder: dict[str, Any] = {}

    def retry_while_frozen() -> None:
        thread, outcome = _in_thread(
            lambda: stepper.send(execution.pk, "go", {"n": 1}, idempotency_key="key-2")
        )
        holder.update(thread=thread, outcome=outcome)
        _until(_waiting_on_a_lock, "the retry waits on the dead client's lock")

    run_until_killed(
        spawn,
        "before_commit",
        "send",
        str(execution.pk),
        "key-2",
        '{"n": 1}',
        while_frozen=retry_while_frozen,
    )
    holder["thread"].join(TIMEOUT)
    outcome = holder["outcome"]
    assert "error" not in outcome, outcome.get("error")
    assert not outcome["result"].repeated  # the first attempt never committed
    assert count_of(execution) == 1 and len(applied(execution)) == 1
    assert stepper.send(execution.pk, "go", {"n": 1}, idempotency_key="key-2").repeated
    assert count_of(execution) == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_concurrent_starts_with_one_key_start_one_execution() -> None:
    """The first attempt has written its key but not committed; the second finds nothing yet,
    starts, and waits on the unique key; when the first commits, the second's insert fails and
    it answers with the first's execution (its own work rolled back)."""
    chart = Chart.objects.load(COUNTER)
    frozen, release = threading.Event(), threading.Event()

    def hold_the_first(phase: str) -> None:
        if phase == "before_commit" and threading.current_thread().name == "first":
            frozen.set()
            release.wait(TIMEOUT)

    step_transaction.fault_hook = hold_the_first
    try:
        first, first_outcome = _in_thread(
            lambda: stepper.start_result(chart, data={"count": 1}, idempotency_key="race"),
            name="first",
        )
        assert frozen.wait(TIMEOUT)
        assert not StartKey.objects.exists()  # written, not committed
        second, second_outcome = _in_thread(
            lambda: stepper.start_result(chart, data={"count": 1}, idempotency_key="race")
        )
        _until(_waiting_on_a_lock, "the second start waits on the first's key")
        release.set()
        first.join(TIMEOUT)
        second.join(TIMEOUT)
    finally:
        step_transaction.fault_hook = None
        release.set()
    assert "error" not in first_outcome and "error" not in second_outcome, (
        first_outcome,
        second_outcome,
    )
    winner, loser = first_outcome["result"], second_outcome["result"]
    assert not winner.repeated and loser.repeated
    assert loser.execution.pk == winner.execution.pk
    assert Execution.objects.count() == 1 and StartKey.objects.count() == 1


RUNAWAY = f"""<scxml {NS} name="runaway" datamodel="ecmascript" initial="idle">
  <state id="idle"><transition event="spin" target="b"/></state>
  <state id="b"><transition target="c"/></state>
  <state id="c"><transition target="b"/></state>
</scxml>"""


@pytest.mark.django_db
def test_the_api_answers_a_refusal_with_409_and_replays_it_as_a_refusal(api: APIClient) -> None:
    """A halted execution refuses inputs (recorded): 409, never a 500; the replay of a refused
    request with its key is answered as the first was, a 409, and records nothing more."""
    from django.test import override_settings

    execution = stepper.start(Chart.objects.load(RUNAWAY))
    url = f"/api/executions/{execution.pk}/send/"
    with override_settings(STATECHARTS={"ROUND_BUDGET": 40}):
        halting = api.post(url, {"name": "spin"}, format="json", HTTP_IDEMPOTENCY_KEY="h")
    assert halting.status_code == 409, halting.content
    assert halting.json()["disposition"] == "refused" and halting.json()["status"] == "halted"
    replay = api.post(url, {"name": "spin"}, format="json", HTTP_IDEMPOTENCY_KEY="h")
    assert replay.status_code == 409 and replay.json()["status"] == "halted"
    assert "refused this input (history entry 2)" in replay.json()["detail"]
    execution.refresh_from_db()
    assert execution.steps == 2


@pytest.mark.django_db
def test_the_bulk_cancel_confirmation_carries_one_token_used_per_execution(
    client: Client,
) -> None:
    from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME

    user = User.objects.create_superuser("admin", "a@example.com", "pw")
    client.force_login(user)
    chart = Chart.objects.load(COUNTER)
    executions = [stepper.start(chart) for _ in range(2)]
    url = reverse("admin:statecharts_execution_changelist")
    form = {"action": "cancel_selected", ACTION_CHECKBOX_NAME: [str(e.pk) for e in executions]}
    page = client.post(url, form)
    token = page.context["form"]["idempotency_token"].value()
    assert token.startswith("admin:") and f'value="{token}"' in page.content.decode()
    client.post(url, {**form, "post": "yes", "idempotency_token": token})
    for execution in executions:
        last = HistoryEntry.objects.filter(execution=execution).order_by("-seq").first()
        assert last is not None and last.input["kind"] == "cancel"
        assert last.idempotency_key == f"{token}:{execution.pk}"
        assert last.caller_context["user"] == {"id": user.pk, "username": "admin"}
    # The same confirmation posted again (a re-post after a lost answer) records nothing.
    client.post(url, {**form, "post": "yes", "idempotency_token": token})
    assert HistoryEntry.objects.filter(execution__in=executions).count() == 4
