"""Every automated W3C document, run through the durable stepper on a fake clock.

Every document is stored, started and driven only through the database (invocation rows and
child executions, timer rows, the outbox); ``conformance/durable_passing.json`` is the
committed result and the run must reproduce it exactly, and pass every document the in-memory
runner passes. The Basic HTTP documents run against Django's live server (the inbound view
mounted by tests/routes/urls.py); W3C 201 is listed as pending there (not applicable to the
durable mode), with the reason.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conformance.durable import (
    CORE,
    INVOKE,
    NOT_APPLICABLE_201,
    PENDING_HTTP,
    SEND,
    TIMERS,
    report,
    run,
    select,
)
from statecharts.models import Execution, ExecutionStatus
from timers.models import Timer, TimerStatus

ROOT = Path(__file__).resolve().parents[2]
EXPECTED: dict[str, Any] = json.loads((ROOT / "conformance" / "durable_passing.json").read_text())
IN_MEMORY: dict[str, Any] = json.loads((ROOT / "conformance" / "passing.json").read_text())
# Documents whose pass depends on a timer row firing (a delayed event leads to pass) or on
# <cancel> settling one (the cancelled event would lead to fail).
NEEDS_FIRING = {"175", "185", "186", "208", "210", "409", "423", "553", "579"}
NEEDS_CANCEL = {"208", "210"}
# Documents whose pass needs a child to start and talk back (params, namelist, #_parent,
# done.invoke with donedata, src files read at load, srcexpr resolved at run time).
BASIC_HTTP = {"201", "509", "510", "518", "519", "520", "522", "531", "532", "534", "567", "577"}
NEEDS_CHILDREN = {"215", "216", "226", "233", "234", "239", "253", "276", "530"}

pytestmark = pytest.mark.conformance


@pytest.mark.django_db(transaction=True)  # real commits: every step is its own durable atomic
@pytest.mark.urls("tests.routes.urls")  # the Basic HTTP inbound view, on the live server
def test_the_durable_subset_passes_exactly_as_committed(w3c_suite: Path, live_server: Any) -> None:
    outcomes, selection = run(w3c_suite, basichttp_url=f"{live_server.url}/scxml/basichttp/")
    result = report(outcomes, selection)
    assert result["failed"] == EXPECTED["failed"]
    assert result["passed"] == EXPECTED["passed"]
    # Every document ended: none was left waiting on a timer that never fired.
    assert not Execution.objects.filter(
        status=ExecutionStatus.ACTIVE, parent__isnull=True
    ).exists()
    # The children were durable ones: rows, started through the outbox.
    assert Execution.objects.filter(parent__isnull=False).count() >= 30
    # The timers were the durable ones: rows fired on the fake clock, and <cancel> settled some.
    assert Timer.objects.filter(status=TimerStatus.FIRED).exists()
    assert Timer.objects.filter(status=TimerStatus.CANCELLED).exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.urls("tests.routes.urls")
def test_basic_http_documents_fail_when_their_posts_reach_no_inbound_view(
    w3c_suite: Path, live_server: Any
) -> None:
    """Their pass is due to the POST reaching the execution through the view, not to luck
    (577 passes on the route's own refusal of a send with no target)."""
    needs_delivery = BASIC_HTTP - {"201", "577"}
    outcomes, _ = run(w3c_suite, needs_delivery, basichttp_url=f"{live_server.url}/nowhere/")
    assert {o.case.test_id for o in outcomes} == needs_delivery
    assert [o.case.test_id for o in outcomes if o.passed] == []


@pytest.mark.django_db
def test_timer_documents_fail_when_their_timer_rows_never_fire(
    monkeypatch: pytest.MonkeyPatch, w3c_suite: Path
) -> None:
    """The pass of the delayed-send documents is due to fire_all_due, not to luck."""
    from timers import firing

    monkeypatch.setattr(firing, "fire_all_due", lambda **_: firing.FireReport())
    outcomes, _ = run(w3c_suite, NEEDS_FIRING)
    assert {o.case.test_id for o in outcomes} == NEEDS_FIRING
    assert not any(o.passed for o in outcomes)


@pytest.mark.django_db
def test_invoke_documents_fail_when_no_child_is_ever_started(
    monkeypatch: pytest.MonkeyPatch, w3c_suite: Path
) -> None:
    """Their pass is due to the invocations app starting children, not to luck."""
    from invocations import children

    monkeypatch.setattr(children, "deliver_start", lambda message, more: False)
    monkeypatch.setattr(
        "statecharts.stepper.delivery._kinds", {children.START: children.deliver_start}
    )
    outcomes, _ = run(w3c_suite, NEEDS_CHILDREN)
    assert {o.case.test_id for o in outcomes} == NEEDS_CHILDREN
    assert [o.case.test_id for o in outcomes if o.passed] == []


@pytest.mark.django_db
def test_cancel_documents_fail_when_cancel_settles_nothing(settings: Any, w3c_suite: Path) -> None:
    settings.STATECHARTS = {"PERFORMERS": {"cancel_timers": None}}  # none: rows stay pending
    outcomes, _ = run(w3c_suite, NEEDS_CANCEL)
    assert {o.case.test_id: o.passed for o in outcomes} == dict.fromkeys(NEEDS_CANCEL, False)


def test_the_pass_list_is_substantial() -> None:
    passed = set(EXPECTED["passed"])
    assert len(passed) >= 181
    assert len(passed & set(EXPECTED["subset"][TIMERS])) >= 30
    assert len(passed & set(EXPECTED["subset"][INVOKE])) >= 34
    assert passed >= NEEDS_FIRING | NEEDS_CANCEL | NEEDS_CHILDREN


def test_the_selection_and_pending_lists_are_as_committed(w3c_suite: Path) -> None:
    selection = select(w3c_suite, basichttp=True)
    chosen: dict[str, list[str]] = {TIMERS: [], INVOKE: [], SEND: [], CORE: []}
    for case, category in selection.cases:
        chosen[category].append(case.test_id)
    assert {k: sorted(v) for k, v in chosen.items()} == {
        k: sorted(v) for k, v in EXPECTED["subset"].items()
    }
    committed = {item["reason"]: item["tests"] for item in EXPECTED["pending"]}
    assert selection.pending == committed
    # Every automated document runs but 201 (not applicable durably).
    assert {"207", "215", "252"} <= set(chosen[INVOKE])
    assert committed == {NOT_APPLICABLE_201: ["201"]}
    ran = {test for tests in chosen.values() for test in tests}
    assert "201" not in ran and {"509", "520", "577"} <= ran
    # Without a server for the inbound view, the Basic HTTP documents are pending.
    without = select(w3c_suite)
    assert without.pending == {PENDING_HTTP: sorted(BASIC_HTTP, key=int)}
    assert not {case.test_id for case, _ in without.cases} & BASIC_HTTP


def test_the_durable_pass_list_agrees_with_the_in_memory_one() -> None:
    in_memory = set(IN_MEMORY["mandatory"]) | set(IN_MEMORY["optional"])
    # All of them but W3C 201, which is not applicable to the durable mode.
    assert set(EXPECTED["passed"]) == in_memory - {"201"}
