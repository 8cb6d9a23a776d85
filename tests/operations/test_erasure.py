"""Erasure (statecharts.operations.erasure.erase, ``statechart erase``): what a person gave is
gone from
every row, the erasure is recorded, and replay reports "erased" instead of diverging."""

from __future__ import annotations

import io
import json

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from invocations.models import Invocation
from statecharts import stepper
from statecharts.models import AppliedMessage, Chart, Execution, HistoryEntry, OutboxMessage
from statecharts.operations import erasure
from statecharts.operations.inspection import Unreadable, inspect
from statecharts.operations.replay import Verdict, replay
from tests.operations.world import EMAIL, NS, T0, peer, signup
from timers.models import Timer

pytestmark = pytest.mark.django_db

MODELS = (Execution, HistoryEntry, OutboxMessage, AppliedMessage, Timer, Invocation)


def where_found(text: str) -> set[tuple[str, int]]:
    """Every (model, id) of a row holding ``text`` in any column, the position blob included."""
    found: set[tuple[str, int]] = set()
    for model in MODELS:
        for row in model.objects.values():
            for value in row.values():
                if isinstance(value, bytes | memoryview):
                    value = bytes(value).decode("utf-8", "replace")
                if text in json.dumps(value, default=str, ensure_ascii=False):
                    found.add((model.__name__, row["id"]))
    return found


def told_and_finished() -> tuple[Execution, Execution]:
    listener = peer()
    execution = signup("user-42")
    stepper.send(execution, "tell", {"peer": listener.session_id}, now=T0)
    stepper.send(execution, "signed_up", {"email": EMAIL}, now=T0)
    return Execution.objects.get(pk=execution.pk), listener


def test_erasing_an_execution_leaves_no_trace_of_what_the_person_gave_in_its_rows() -> None:
    execution, listener = told_and_finished()
    before = where_found(EMAIL)
    assert ("Execution", execution.pk) in before  # its datamodel, donedata
    assert {"HistoryEntry", "OutboxMessage", "Timer"} <= {model for model, _ in before}

    report = erasure.erase([execution], reason="GDPR request 17", requested_by="dpo")

    assert report.execution_ids == (execution.pk,)
    assert report.rows["history"] == 3 and report.rows["outbox"] == 1
    assert report.rows["timers"] == 1 and report.rows["executions"] == 1
    # What it sent to the peer is the peer's now: only the peer's rows still hold it.
    listener_history = set(
        HistoryEntry.objects.filter(execution=listener).values_list("pk", flat=True)
    )
    left = where_found(EMAIL)
    assert left and all(
        (model == "Execution" and pk == listener.pk)
        or (model == "HistoryEntry" and pk in listener_history)
        for model, pk in left
    ), left
    erased = Execution.objects.get(pk=execution.pk)
    assert erased.business_key is None and erased.donedata is None and erased.metadata == {}
    assert erased.erased is not None and erased.status == "completed"
    assert erased.configuration == ["done"]  # where it stands is not personal data
    marker = HistoryEntry.objects.get(execution=erased, disposition="erased")
    assert marker.seq == erased.steps and marker.input == {"kind": "erasure"}
    assert marker.reason == "personal data erased by dpo: GDPR request 17"
    assert {"kind": "erased", "stage": "timers", "rows": 1} in marker.effects
    # The audit trail keeps what happened: the kinds and the event names, not the data.
    names = [
        (entry.input.get("kind"), (entry.input.get("event") or {}).get("name"))
        for entry in HistoryEntry.objects.filter(execution=erased).exclude(disposition="erased")
    ]
    assert names == [("start", None), ("event", "tell"), ("event", "signed_up")]

    erasure.erase([listener], cancel=True)
    assert where_found(EMAIL) == set()


def test_replay_and_every_door_say_erased_rather_than_failing() -> None:
    execution, _ = told_and_finished()
    assert replay(execution.pk).ok
    erasure.erase([execution])
    report = replay(execution.pk)
    assert report.verdict is Verdict.ERASED and not report.diverged
    assert str(report).startswith("not replayed: erased (step 4: personal data erased")
    out = io.StringIO()
    call_command("statechart", "replay", str(execution.pk), stdout=out)  # exit 0
    assert "not replayed: erased" in out.getvalue()
    view = inspect(Execution.objects.get(pk=execution.pk))
    assert isinstance(view.datamodel, Unreadable) and "erased" in view.datamodel.reason
    document = view.document()
    assert document["erased"] is not None and document["datamodel"] is None
    assert document["history"][-1]["disposition"] == "erased"
    out = io.StringIO()
    call_command("statechart", "show", str(execution.pk), stdout=out)
    assert "datamodel: (unreadable: personal data erased at" in out.getvalue()
    api = APIClient()
    api.force_authenticate(User.objects.create_superuser("root", "r@example.com", "pw"))
    detail = api.get(f"/api/executions/{execution.pk}/").json()
    assert detail["erased"] is not None and detail["datamodel"] is None
    assert detail["business_key"] is None and detail["donedata"] is None
    assert detail["unreadable"]["datamodel"].startswith("personal data erased at")


def test_an_input_after_the_erasure_is_recorded_as_for_any_finished_execution() -> None:
    execution, _ = told_and_finished()
    erasure.erase([execution])
    result = stepper.send(execution.pk, "signed_up", {"again": 1})
    assert result.disposition == "discarded"
    assert stepper.cancel(execution.pk).disposition == "discarded"
    # Erasing again removes what came since, and says so once more.
    erasure.erase([execution])
    assert HistoryEntry.objects.filter(execution=execution, disposition="erased").count() == 2
    assert "again" not in json.dumps(list(HistoryEntry.objects.values_list("input", flat=True)))


PARENT = f"""<scxml {NS} name="parent" initial="working">
  <datamodel><data id="email" expr="''"/></datamodel>
  <state id="working">
    <invoke id="kid" type="scxml"><param name="email" expr="email"/>
      <content><scxml {NS} initial="w"><datamodel><data id="email" expr="''"/></datamodel>
        <state id="w"/></scxml></content>
    </invoke>
    <transition event="finish" target="end"/>
  </state>
  <final id="end"/>
</scxml>"""


def test_running_executions_are_refused_unless_cancelled_first_children_included() -> None:
    parent = stepper.start(Chart.objects.load(PARENT), data={"email": EMAIL}, business_key="k")
    (child,) = Execution.objects.filter(parent=parent)
    assert child.status == "active"
    before = where_found(EMAIL)
    assert ("Invocation", Invocation.objects.get().pk) in before
    with pytest.raises(erasure.ErasureRefused, match="2 execution\\(s\\) may still step"):
        erasure.erase([parent])
    assert where_found(EMAIL) == before  # nothing erased

    report = erasure.erase([parent], cancel=True)

    assert report.execution_ids == (parent.pk, child.pk)
    assert parent.pk in report.cancelled
    for execution in Execution.objects.all():
        assert execution.status == "cancelled" and execution.erased is not None
        kinds = list(execution.history.values_list("input__kind", flat=True))
        assert kinds[-1] == "erasure"
    assert HistoryEntry.objects.filter(execution=parent, input__kind="cancel").exists()
    assert where_found(EMAIL) == set()


def test_erasing_a_business_key_erases_it_in_every_chart() -> None:
    first = signup("user-7")
    stepper.send(first, "signed_up", now=T0)
    other = stepper.start(Chart.objects.load(PEER_WITH_KEY), business_key="user-7")
    stepper.send(other, "stop")
    unrelated = signup("user-8")
    stepper.send(unrelated, "signed_up", now=T0)
    report = erasure.erase_business_key("user-7")
    assert set(report.execution_ids) == {first.pk, other.pk}
    assert Execution.objects.get(pk=unrelated.pk).erased is None
    assert erasure.erase_business_key("user-7").execution_ids == ()  # the key is gone too
    assert str(erasure.erase_business_key("nobody")) == "nothing to erase"
    assert erasure.erase([999_999]).execution_ids == ()  # no such execution


PEER_WITH_KEY = f"""<scxml {NS} name="other" initial="a">
  <state id="a"><transition event="stop" target="z"/></state><final id="z"/>
</scxml>"""


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("statechart", *args, stdout=out)
    return out.getvalue()


def test_the_erase_command(monkeypatch: pytest.MonkeyPatch) -> None:
    execution, _ = told_and_finished()
    with pytest.raises(CommandError, match="Pass --yes"):
        run("erase", str(execution.pk))  # no terminal here to ask on
    assert Execution.objects.get(pk=execution.pk).erased is None
    with pytest.raises(CommandError, match="one of them"):
        run("erase", str(execution.pk), "--key", "user-42", "--yes")
    with pytest.raises(CommandError, match="no execution has the business key"):
        run("erase", "--key", "nobody", "--yes")
    with pytest.raises(CommandError, match="--reason"):
        run("erase", "--key", "user-42", "--reason", "a\x00b", "--yes")
    with pytest.raises(CommandError, match="--caller-context is refused"):
        run("erase", "--key", "user-42", "--caller-context", "[1]", "--yes")
    assert Execution.objects.get(pk=execution.pk).erased is None
    out = run(
        "erase",
        *("--key", "user-42", "--chart", "signup", "--reason", "ticket 9", "--yes"),
        *("--caller-context", '{"ticket": 9}'),
    )
    assert "erased 1 execution(s)" in out and f"executions: {execution.pk}" in out
    marker = HistoryEntry.objects.get(execution=execution, disposition="erased")
    assert marker.reason == "personal data erased by statechart erase: ticket 9"
    assert marker.caller_context == {"door": "command", "given": {"ticket": 9}}

    running = signup("user-43")
    with pytest.raises(CommandError, match="may still step"):
        run("erase", str(running.pk), "--yes")
    answers: list[str] = []

    def ask(question: str) -> str:
        answers.append(question)
        return "y"

    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", ask)
    assert "erased 1 execution(s), 1 cancelled first" in run("erase", str(running.pk), "--cancel")
    assert answers and "cannot be undone" in answers[0]


def test_the_erase_command_asks_and_a_no_erases_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    execution, _ = told_and_finished()
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda question: "n")
    with pytest.raises(CommandError, match="nothing erased"):
        run("erase", str(execution.pk))
    assert Execution.objects.get(pk=execution.pk).erased is None
