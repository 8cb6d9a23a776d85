"""``HistoryEntry.of``, the one builder of history entries (the stepper's, a migration's, the
stand-in for a pruned start): what it reads from the execution, and the defaults it fills."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from statecharts.models import Chart, Execution, ExecutionStatus, HistoryEntry
from statecharts.models.history import Disposition

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def execution_after_a_step() -> Execution:
    return Execution(status=ExecutionStatus.ACTIVE, configuration=["b"], steps=3)


def test_an_entry_reads_its_seq_status_and_configuration_from_the_execution() -> None:
    execution = execution_after_a_step()
    entry = HistoryEntry.of(
        execution,
        input={"kind": "event", "event": {"name": "go"}},
        codec="custom",
        disposition=Disposition.APPLIED,
        effects=[{"kind": "log"}],
        reason="why",
        created=NOW,
    )
    assert entry.execution is execution
    assert (entry.seq, entry.status_after, entry.configuration_after) == (3, "active", ["b"])
    assert (entry.input, entry.codec, entry.disposition) == (
        {"kind": "event", "event": {"name": "go"}},
        "custom",
        "applied",
    )
    assert (entry.effects, entry.reason, entry.created) == ([{"kind": "log"}], "why", NOW)


def test_what_is_not_given_is_the_model_default_and_seq_may_be_given() -> None:
    entry = HistoryEntry.of(
        execution_after_a_step(),
        seq=1,
        input={"kind": "start"},
        disposition=Disposition.APPLIED,
        idempotency_key="k",
        created=NOW,
    )
    assert entry.seq == 1
    assert entry.idempotency_key == "k"
    built_by_hand = HistoryEntry(input={"kind": "start"})
    for name in ("codec", "effects", "reachability", "registered_types", "position_sha256",
                 "reason", "cause", "caller_context"):  # fmt: skip
        assert getattr(entry, name) == getattr(built_by_hand, name), name


CHART = """<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" name="builder" initial="a">
  <state id="a"><transition event="go" target="b"/></state>
  <state id="b"/>
</scxml>"""


@pytest.mark.django_db
def test_a_start_repeated_after_its_history_was_pruned_answers_with_a_stand_in_entry() -> None:
    from statecharts import stepper

    first = stepper.start_result(Chart.objects.load(CHART), idempotency_key="start-1")
    execution = first.execution
    stepper.send(execution.pk, "go")
    HistoryEntry.objects.filter(execution=execution).delete()
    again = stepper.start_result(Chart.objects.load(CHART), idempotency_key="start-1")
    execution.refresh_from_db()
    assert again.repeated and again.execution.pk == execution.pk
    entry = again.entry
    assert entry.pk is None  # not stored: the history stays as retention left it
    assert (entry.seq, entry.input, entry.disposition, entry.idempotency_key) == (
        1,
        {"kind": "start"},
        "applied",
        "start-1",
    )
    assert (entry.status_after, entry.configuration_after) == ("active", ["b"])
    assert entry.created == execution.created
