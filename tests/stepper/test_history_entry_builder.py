"""``HistoryEntry.of``, the one builder of history entries (the stepper's, a migration's, the
stand-in for a pruned start): what it reads from the execution, and the defaults it fills."""

from __future__ import annotations

from datetime import UTC, datetime

from statecharts.models import Execution, ExecutionStatus, HistoryEntry
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
