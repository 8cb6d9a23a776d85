"""Who did it: the caller context through every door, the history, timers, the outbox, and
the attribution of a fired timer's step to the step that scheduled it."""

from __future__ import annotations

import io
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client, override_settings
from django.urls import reverse
from rest_framework.test import APIClient

from statecharts import stepper
from statecharts.models import Chart, Execution, HistoryEntry, OutboxMessage
from statecharts.operations.inspection import cause_of, history_row
from statecharts.policies import attribution, validation
from timers import firing
from timers.models import Timer, TimerStatus

pytestmark = pytest.mark.django_db

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0"'
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
TRACE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

NUDGE = f"""<scxml {NS} name="nudge" datamodel="ecmascript" initial="waiting">
  <datamodel><data id="nudges" expr="0"/></datamodel>
  <state id="waiting">
    <transition event="arm"><send id="nudge" event="nudge" delay="1h"/></transition>
    <transition event="nudge"><assign location="nudges" expr="nudges + 1"/></transition>
    <transition event="stop"><cancel sendid="nudge"/></transition>
    <transition event="finish" target="done"/>
  </state>
  <final id="done"/>
</scxml>"""

PONG = f"""<scxml {NS} name="pong" datamodel="ecmascript" initial="w">
  <state id="w"><transition event="ping"/></state>
</scxml>"""

PING = f"""<scxml {NS} name="ping" datamodel="ecmascript" initial="s">
  <state id="s">
    <transition event="go"><send event="ping" targetexpr="'#_scxml_' + _event.data"/></transition>
  </state>
</scxml>"""


def start(source: str = NUDGE, **kwargs: Any) -> Execution:
    return stepper.start(Chart.objects.load(source), now=T0, **kwargs)


def entries(execution: Execution) -> list[HistoryEntry]:
    return list(HistoryEntry.objects.filter(execution=execution).order_by("seq"))


# ---- the stepper: stored with the input, whatever became of it ---------------------------------


def test_start_send_and_cancel_record_their_caller_context_with_the_input() -> None:
    execution = start(caller_context={"request_id": "r-start"})
    stepper.send(execution.pk, "arm", caller_context={"request_id": "r-send"}, now=T0)
    execution.cancel(caller_context={"request_id": "r-cancel"})
    contexts = [entry.caller_context for entry in entries(execution)]
    assert contexts == [
        {"request_id": "r-start"},
        {"request_id": "r-send"},
        {"request_id": "r-cancel"},
    ]
    # An input to a finished execution is recorded as discarded, still attributed.
    result = stepper.send(execution.pk, "arm", caller_context={"request_id": "late"})
    assert result.disposition == "discarded"
    assert result.entry.caller_context == {"request_id": "late"}
    assert HistoryEntry.objects.get(pk=result.entry.pk).caller_context == {"request_id": "late"}


def test_the_manager_start_takes_a_caller_context() -> None:
    execution = Execution.objects.start(Chart.objects.load(NUDGE), caller_context={"ticket": "T-1"})
    assert entries(execution)[0].caller_context == {"ticket": "T-1"}


def test_a_caller_context_that_is_not_a_json_object_is_refused_and_nothing_is_written() -> None:
    execution = start()
    with pytest.raises(validation.InvalidInput, match="caller_context"):
        stepper.send(execution.pk, "arm", caller_context=["not", "an", "object"])  # type: ignore[arg-type]
    assert len(entries(execution)) == 1


# ---- timers: carried on the row, handed back at fire and at cancel time ------------------------


def test_a_timer_carries_the_scheduling_steps_context_and_its_fire_records_it_and_its_cause() -> (
    None
):
    execution = start()
    scheduling = stepper.send(execution.pk, "arm", caller_context={"request_id": "r-7"}, now=T0)
    timer = Timer.objects.get(execution=execution)
    assert timer.context == {"request_id": "r-7"}
    assert timer.scheduled_in == scheduling.entry.seq == 2

    firing.fire_all_due(now=T0 + timedelta(hours=2))
    fired = entries(execution)[-1]
    assert fired.input["event"]["name"] == "nudge"
    # Handed back: the fired step is attributed to the request that armed the timer...
    assert fired.caller_context == {"request_id": "r-7"}
    # ...and caused by this timer, which the step that scheduled it wrote.
    assert fired.cause == {"timer": timer.pk, "ordinal": timer.ordinal, "scheduled_in": 2}
    cause = cause_of(fired.cause)
    assert cause is not None and cause.seq == 2
    assert cause.text == f"timer {timer.pk} (ordinal {timer.ordinal}), scheduled in step 2"


def test_a_cancel_records_on_each_timer_what_cancelled_it_as_the_cancel_effect_does() -> None:
    execution = start()
    stepper.send(execution.pk, "arm", caller_context={"request_id": "arm-1"}, now=T0)
    stepper.send(execution.pk, "arm", caller_context={"request_id": "arm-2"}, now=T0)
    stopping = stepper.send(execution.pk, "stop", caller_context={"request_id": "stop"}, now=T0)
    timers = list(Timer.objects.filter(execution=execution).order_by("ordinal"))
    assert [t.status for t in timers] == [TimerStatus.CANCELLED] * 2
    # Each row keeps its own scheduling context, and what cancelled it.
    assert [t.context for t in timers] == [{"request_id": "arm-1"}, {"request_id": "arm-2"}]
    [cancel_effect] = [e for e in stopping.entry.effects if e.get("kind") == "cancel"]
    for timer in timers:
        assert timer.cancelled_by == {
            "seq": stopping.entry.seq,
            "ordinal": cancel_effect["ordinal"],
            "content_index": cancel_effect["content_index"],
            "owner": cancel_effect["owner"],
            "context": {"request_id": "stop"},
        }
    assert isinstance(cancel_effect["content_index"], int) and cancel_effect["owner"]
    # Handed back at cancel time: the cancelling step records the timers it cancelled, each
    # with the context of the step that armed it.
    assert cancel_effect["cancelled_timers"] == [
        {"timer": t.pk, "ordinal": t.ordinal, "scheduled_in": t.scheduled_in, "context": t.context}
        for t in timers
    ]
    # The cancel's ordinal follows the two sends' (one per-execution counter).
    assert cancel_effect["ordinal"] > timers[-1].ordinal


def test_the_caller_context_is_never_part_of_a_timer_key() -> None:
    """Two steps with different contexts that schedule the same send make two rows (their
    ordinals differ); the context is row data only."""
    execution = start()
    stepper.send(execution.pk, "arm", caller_context={"a": 1}, now=T0)
    stepper.send(execution.pk, "arm", caller_context={"a": 2}, now=T0)
    ordinals = list(Timer.objects.filter(execution=execution).values_list("ordinal", flat=True))
    assert len(set(ordinals)) == 2


# ---- the outbox: the sender's context reaches the target's step ------------------------------


def test_an_outbox_message_carries_the_senders_context_to_the_targets_step() -> None:
    pong = start(PONG)
    ping = start(PING)
    stepper.send(ping.pk, "go", pong.session_id, caller_context={"request_id": "r-9"})
    message = OutboxMessage.objects.get(sender=ping)
    assert message.caller_context == {"request_id": "r-9"}
    received = entries(pong)[-1]
    assert received.input["event"]["name"] == "ping"
    assert received.caller_context == {"request_id": "r-9"}
    assert received.cause == {"message": message.pk, "sender": ping.pk}


# ---- deriving it from a request -----------------------------------------------------------------


def test_traceparent_is_kept_only_when_valid() -> None:
    assert attribution.traceparent(TRACE) == TRACE
    assert attribution.traceparent(TRACE.upper()) == TRACE
    for bad in [
        "",
        "garbage",
        "00-" + "0" * 32 + "-00f067aa0ba902b7-01",  # all-zero trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-" + "0" * 16 + "-01",  # all-zero parent
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # version ff
        TRACE + "-extra",
    ]:
        assert attribution.traceparent(bad) is None


@override_settings(STATECHARTS={"CALLER_CONTEXT_MAX_BYTES": 64})
def test_a_given_caller_context_is_bounded() -> None:
    assert attribution.parse_given('{"ticket": "T-1"}', "X") == {"ticket": "T-1"}
    with pytest.raises(validation.InvalidInput, match="longer than 64 bytes"):
        attribution.parse_given(json.dumps({"k": "x" * 100}), "X-Caller-Context")
    with pytest.raises(validation.InvalidInput, match="JSON object"):
        attribution.parse_given("[1]", "X-Caller-Context")
    with pytest.raises(validation.InvalidInput, match="not valid JSON"):
        attribution.parse_given("{nope", "X-Caller-Context")


def test_describe_says_who_and_through_which_door() -> None:
    context = {"door": "admin", "user": {"id": 1, "username": "alice"}, "request_id": "r-1"}
    assert attribution.describe(context) == "alice via admin, request r-1"
    assert attribution.describe({"door": "api", "traceparent": TRACE}) == (
        "via api, trace 4bf92f3577b34da6a3ce929d0e0e4736"
    )
    assert attribution.describe("odd") == ""


@pytest.fixture
def operator() -> User:
    return User.objects.create_superuser("alice", "alice@example.com", "pw")


def test_the_api_records_the_request_id_trace_user_and_given_context(operator: User) -> None:
    api = APIClient()
    api.force_authenticate(operator)
    chart = Chart.objects.load(NUDGE)
    headers = {
        "HTTP_X_REQUEST_ID": "req-1",
        "HTTP_TRACEPARENT": TRACE,
        "HTTP_X_CALLER_CONTEXT": '{"ticket": "T-9"}',
    }
    started = api.post("/api/executions/", {"chart": chart.pk}, format="json", **headers)
    assert started.status_code == 201, started.content
    pk = started.json()["id"]
    sent = api.post(
        f"/api/executions/{pk}/send/", {"name": "arm"}, format="json", HTTP_X_REQUEST_ID="req-2"
    )
    assert sent.status_code == 200, sent.content
    cancelled = api.post(f"/api/executions/{pk}/cancel/", HTTP_TRACEPARENT="not-a-trace")
    assert cancelled.status_code == 200, cancelled.content
    user = {"id": operator.pk, "username": "alice"}
    assert [e.caller_context for e in entries(Execution.objects.get(pk=pk))] == [
        {
            "door": "api",
            "request_id": "req-1",
            "traceparent": TRACE,
            "user": user,
            "given": {"ticket": "T-9"},
        },
        {"door": "api", "request_id": "req-2", "user": user},
        {"door": "api", "user": user},  # an invalid traceparent is ignored, not refused
    ]
    history = api.get(f"/api/executions/{pk}/history/").json()["results"]
    assert history[1]["caller_context"]["request_id"] == "req-2"
    assert "cause" in history[1] and history[1]["cause"] is None


def test_the_api_refuses_a_bad_caller_context_header_with_a_400_and_applies_nothing(
    operator: User,
) -> None:
    api = APIClient()
    api.force_authenticate(operator)
    execution = start()
    for header, value in [
        ("HTTP_X_CALLER_CONTEXT", "[1, 2]"),
        ("HTTP_X_CALLER_CONTEXT", "{broken"),
        ("HTTP_X_CALLER_CONTEXT", json.dumps({"big": "x" * 5000})),
        ("HTTP_X_REQUEST_ID", "r" * 201),
    ]:
        answer = api.post(
            f"/api/executions/{execution.pk}/send/",
            {"name": "arm"},
            format="json",
            **{header: value},
        )
        assert answer.status_code == 400, (header, answer.content)
        named = "X-Caller-Context" if "CALLER" in header else "X-Request-ID"
        assert named in answer.json(), answer.json()
    assert len(entries(execution)) == 1
    chart = Chart.objects.load(NUDGE)
    refused = api.post(
        "/api/executions/", {"chart": chart.pk}, format="json", HTTP_X_CALLER_CONTEXT="7"
    )
    assert refused.status_code == 400
    assert Execution.objects.count() == 1


def test_the_admin_records_the_user_and_shows_who_and_what_caused_each_step(
    client: Client, operator: User
) -> None:
    client.force_login(operator)
    execution = start()
    url = reverse("admin:statecharts_execution_send", args=[execution.pk])
    answer = client.post(url, {"name": "arm", "data": ""}, HTTP_X_REQUEST_ID="adm-1")
    assert answer.status_code == 302
    armed = entries(execution)[-1]
    assert armed.caller_context == {
        "door": "admin",
        "request_id": "adm-1",
        "user": {"id": operator.pk, "username": "alice"},
    }
    assert history_row(armed).caller == "alice via admin, request adm-1"
    firing.fire_all_due(now=T0 + timedelta(hours=2))
    page = client.get(reverse("admin:statecharts_execution_change", args=[execution.pk]))
    body = page.content.decode()
    timer = Timer.objects.get(execution=execution)
    # The fired step's row links to the row of the step that scheduled the timer.
    link = re.search(r'<a href="\?history=(\d+)#history-(\d+)">timer (\d+) ', body)
    assert link is not None and link.groups() == ("1", "2", str(timer.pk))
    assert '<tr id="history-2">' in body
    assert "alice via admin, request adm-1" in body


def test_the_command_records_its_caller_context_and_refuses_a_bad_one() -> None:
    execution = start()
    out = io.StringIO()
    call_command(
        "statechart",
        "send",
        str(execution.pk),
        "arm",
        "--caller-context",
        '{"ticket": "T-3"}',
        stdout=out,
    )
    assert entries(execution)[-1].caller_context == {"door": "command", "given": {"ticket": "T-3"}}
    with pytest.raises(CommandError, match="--caller-context is refused"):
        call_command(
            "statechart", "cancel", str(execution.pk), "--caller-context", "[]", stdout=out
        )
    assert len(entries(execution)) == 2
    call_command("statechart", "show", str(execution.pk), stdout=out)
    assert "#2 event arm: applied -> active [waiting]; via command" in out.getvalue()


# ---- operators: the timers panel and erasure ------------------------------------------------


def test_the_timers_panel_says_which_step_cancelled_a_timer() -> None:
    from timers.inspection import read_timers

    execution = start()
    stepper.send(execution.pk, "arm", now=T0)
    stepper.send(execution.pk, "stop", caller_context={"request_id": "stop"}, now=T0)
    execution.refresh_from_db()
    section = read_timers(execution, T0)
    [row] = section.past
    assert row.cancelled_in == 3 and row.steps_text == "scheduled in step 2, cancelled in step 3"
    assert row.document()["cancelled_in"] == 3


def test_erasing_an_execution_erases_who_acted_on_it() -> None:
    from statecharts.models import StartKey
    from statecharts.operations import erasure

    pong = start(PONG)
    ping = start(
        PING, caller_context={"user": {"id": 1, "username": "alice"}}, idempotency_key="alice"
    )
    stepper.send(ping.pk, "go", pong.session_id, caller_context={"user": {"id": 1}})
    execution = start(caller_context={"user": {"id": 1}})
    stepper.send(execution.pk, "arm", caller_context={"user": {"id": 1}}, now=T0)
    stepper.send(execution.pk, "stop", caller_context={"user": {"id": 2}}, now=T0)
    erasure.erase([ping, execution], reason="asked", cancel=True)
    erased = HistoryEntry.objects.filter(execution__in=[ping, execution]).exclude(
        disposition="erased"
    )
    assert erased.count() == 7  # 3 of ping's (start, go, cancel), 4 of the other's
    assert all(entry.caller_context is None for entry in erased)
    assert OutboxMessage.objects.get(sender=ping).caller_context is None
    timer = Timer.objects.get(execution=execution)
    assert timer.context is None and timer.cancelled_by["context"] is None
    assert timer.cancelled_by["seq"] == 3  # what cancelled it stays (not personal data)
    assert not StartKey.objects.filter(execution=ping).exists()  # the start's key, too


def test_the_user_who_sends_is_recorded_in_the_caller_context() -> None:
    alice = User.objects.create_superuser("alice", "alice@example.com", "pw")
    execution = start()
    stepper.send(execution.pk, "arm", user=alice, caller_context={"ticket": "T-1"}, now=T0)
    assert entries(execution)[-1].caller_context == {
        "ticket": "T-1",
        "user": {"id": alice.pk, "username": "alice"},
    }
    # A context that names the user already (a door that derived it) is kept as it is.
    given = {"door": "api", "user": {"id": alice.pk, "username": "alice"}}
    stepper.send(execution.pk, "arm", user=alice, caller_context=given, now=T0)
    assert entries(execution)[-1].caller_context == given
    out = io.StringIO()
    call_command("statechart", "send", str(execution.pk), "arm", "--as-user", "alice", stdout=out)
    assert entries(execution)[-1].caller_context == {
        "door": "command",
        "user": {"id": alice.pk, "username": "alice"},
    }
