"""A chunk of timer fires holds its steps' writes and sends them together (PostgreSQL).

``timers.firing.fire_rows`` runs a chunk's steps in one transaction inside
``stepper.batched_writes``: on PostgreSQL each step's execution UPDATE and history INSERT
are held and flushed as one statement (``statecharts.stepper.postgres.WriteBehind``); on
SQLite every step writes as it goes. Either way the rows must be exactly the ones the
per-step statements write, every fired timer must leave exactly one history row, and
nothing in the transaction may see a held row missing.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import DatabaseError, connection, connections, transaction
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from statecharts import signals, stepper
from statecharts.core.events import EXTERNAL, Event
from statecharts.core.position import decode
from statecharts.models import Chart, Execution, HistoryEntry
from statecharts.stepper import postgres
from timers import firing
from timers.models import Timer

pytestmark = pytest.mark.django_db

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0"'
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
DAY = timedelta(days=1)

NUDGE = f"""<scxml {NS} datamodel="ecmascript" initial="waiting">
  <datamodel><data id="nudges" expr="0"/></datamodel>
  <state id="waiting">
    <onentry><send id="nudge" event="nudge" delay="1d"><param name="n" expr="7"/></send></onentry>
    <transition event="nudge" target="nudged">
      <assign location="nudges" expr="nudges + _event.data.n"/>
    </transition>
  </state>
  <state id="nudged"/>
</scxml>"""

# Three timers of one execution in the same chunk: its later steps see the earlier ones.
SEVERAL = f"""<scxml {NS} datamodel="ecmascript" initial="s">
  <datamodel><data id="got" expr="[]"/></datamodel>
  <state id="s">
    <onentry>
      <foreach array="[1, 2, 3]" item="i">
        <send id="tick" event="tick" delayexpr="i + 's'"><param name="i" expr="i"/></send>
      </foreach>
    </onentry>
    <transition event="tick"><assign location="got" expr="got.concat([_event.data.i])"/>
    </transition>
  </state>
</scxml>"""

# Its timer's step schedules five timers: over DELAYED_SENDS_BUDGET (3 here), it halts.
HALTING = f"""<scxml {NS} datamodel="ecmascript" initial="s">
  <state id="s">
    <onentry><send id="go" event="go" delay="2s"/></onentry>
    <transition event="go" target="t">
      <foreach array="[1, 2, 3, 4, 5]" item="i"><send event="later" delay="1d"/></foreach>
    </transition>
  </state>
  <state id="t"/>
</scxml>"""

# Finishes when its timer fires: the step's UPDATE writes the ending columns too.
ENDING = NUDGE.replace('<state id="nudged"/>', '<final id="nudged"/>')

SETTINGS = {"TIMER_FIRE_CHUNK": 50, "DELAYED_SENDS_BUDGET": 3}


def postgres_with_held_writes() -> bool:
    return connection.vendor == "postgresql" and postgres.prepared_statements(connection)


def need_held_writes() -> None:
    if not postgres_with_held_writes():
        pytest.skip("steps' writes are held on PostgreSQL with prepared statements only")


def start_mix(prefix: str) -> dict[str, list[Execution]]:
    """Executions whose timers are all due at T0 + 1 day, one chunk: plain ones, one that
    halts, one whose three timers share the chunk, one that finishes, one that needs
    migration (its timer is snoozed without a step)."""
    made: dict[str, list[Execution]] = {}

    def add(kind: str, source: str, count: int = 1) -> None:
        chart = Chart.objects.load(source)
        for _ in range(count):
            kept = made.setdefault(kind, [])
            session = f"{prefix}-{kind}-{len(kept)}"
            kept.append(stepper.start(chart, now=T0, session_id=session))

    add("plain", NUDGE, 2)
    add("halting", HALTING)
    add("several", SEVERAL)
    add("plain", NUDGE, 1)
    add("ending", ENDING)
    add("migrating", NUDGE)
    Execution.objects.filter(pk=made["migrating"][0].pk).update(status="needs_migration")
    return made


def fire_chunk() -> firing.FireReport:
    with override_settings(STATECHARTS=SETTINGS):
        return firing.fire_due(now=T0 + DAY)


def datamodel(execution: Execution) -> dict[str, Any]:
    execution.refresh_from_db()
    return decode(bytes(execution.position)).state.datamodel


def test_a_chunk_leaves_exactly_one_history_row_per_fired_timer_and_settles_each() -> None:
    made = start_mix("a")
    report = fire_chunk()
    # plain x3, several x3, ending x1 fired; the halting step and the migrating one snoozed
    assert report.outcomes == {"fired": 7, "snoozed": 2}
    for timer in Timer.objects.filter(status="fired"):
        caused = [
            entry
            for entry in HistoryEntry.objects.filter(execution_id=timer.execution_id)
            if (entry.cause or {}).get("timer") == timer.pk
        ]
        assert len(caused) == 1, timer
        assert caused[0].disposition == "applied"
    for execution in made["plain"]:
        assert datamodel(execution)["nudges"] == 7
        assert (execution.configuration, execution.steps) == (["nudged"], 2)
    (several,) = made["several"]
    assert datamodel(several)["got"] == [1, 2, 3]
    assert several.steps == 4
    (ending,) = made["ending"]
    ending.refresh_from_db()
    assert (ending.status, ending.ended) == ("completed", T0 + DAY)
    (halting,) = made["halting"]
    halting.refresh_from_db()
    assert halting.status == "halted"
    (refused,) = HistoryEntry.objects.filter(execution=halting, seq=2)
    assert refused.disposition == "refused"
    assert Timer.objects.get(execution=halting, send_id="go").status == "pending"
    (migrating,) = made["migrating"]
    assert HistoryEntry.objects.filter(execution=migrating).count() == 1  # its start only
    for execution in Execution.objects.all():
        seqs = list(
            HistoryEntry.objects.filter(execution=execution)
            .order_by("seq")
            .values_list("seq", flat=True)
        )
        assert seqs == list(range(1, execution.steps + 1))


def rows(prefix: str) -> dict[str, Any]:
    """Every execution and history row of the mix, without ids (timer ids as send ids)."""
    sends = dict(Timer.objects.values_list("pk", "send_id"))
    executions = {}
    for execution in Execution.objects.order_by("session_id"):
        key = execution.session_id.removeprefix(prefix)
        fields = ("position", "status", "configuration", "active_states", "steps", "updated")
        executions[key] = {name: getattr(execution, name) for name in fields}
        executions[key].update(
            {name: getattr(execution, name) for name in ("ended", "outcome", "donedata")}
        )
        executions[key]["position"] = bytes(execution.position).replace(
            prefix.encode(), b"<prefix>"
        )
        history = []
        for entry in HistoryEntry.objects.filter(execution=execution).order_by("seq"):
            values = {
                field.attname: getattr(entry, field.attname)
                for field in HistoryEntry._meta.concrete_fields
                if field.attname not in ("id", "execution_id")
            }
            cause = dict(values["cause"] or {})
            if "timer" in cause:
                cause["timer"] = sends[cause["timer"]]
            values["cause"] = cause
            values.pop("position_sha256")  # (the blob names the session: compared above)
            history.append(repr(values).replace(prefix, "<prefix>"))
        executions[key]["history"] = history
    return executions


def test_held_writes_and_per_step_statements_write_identical_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    need_held_writes()
    start_mix("held")
    with CaptureQueriesContext(connection) as held_queries:
        held_report = fire_chunk()
    held = rows("held")
    assert any("WITH u AS (UPDATE" in q["sql"] for q in held_queries.captured_queries)

    Timer.objects.all().delete()
    HistoryEntry.objects.all().delete()
    Execution.objects.all().delete()
    monkeypatch.setattr(postgres, "held_writes", lambda conn: None)  # the per-step statements
    start_mix("solo")
    with CaptureQueriesContext(connection) as plain_queries:
        plain_report = fire_chunk()
    assert not any("WITH u AS (UPDATE" in q["sql"] for q in plain_queries.captured_queries)
    assert plain_report.outcomes == held_report.outcomes
    plain = rows("solo")
    for key, row in held.items():
        for name, value in row.items():
            assert plain[key][name] == value, (key, name)
    assert plain.keys() == held.keys()


def test_a_chunk_sends_its_steps_writes_as_one_statement() -> None:
    need_held_writes()
    chart = Chart.objects.load(NUDGE)
    for _ in range(5):
        stepper.start(chart, now=T0)
    with CaptureQueriesContext(connection) as queries:
        report = fire_chunk()
    assert report.outcomes == {"fired": 5}
    statements = [q["sql"] for q in queries.captured_queries]
    assert sum("WITH u AS (UPDATE" in sql for sql in statements) == 1
    assert not any("WITH updated AS (UPDATE" in sql for sql in statements)  # the per-step one
    assert sum("nextval" in sql for sql in statements) == 1  # the history ids, reserved once
    assert HistoryEntry.objects.filter(seq=2).count() == 5


@pytest.fixture
def receiver() -> Iterator[list[Any]]:
    """Connect a ``step_finished`` receiver for the test; the list it is given is what it
    does per step (callables of the entry)."""
    actions: list[Any] = []

    def on_step(sender: Any, execution: Execution, entry: HistoryEntry, **kwargs: Any) -> None:
        for action in actions:
            action(execution, entry)

    signals.step_finished.connect(on_step, dispatch_uid="test_chunk_writes")
    try:
        yield actions
    finally:
        signals.step_finished.disconnect(dispatch_uid="test_chunk_writes")


def test_a_step_finished_receiver_sees_its_entry_with_an_id_and_every_held_row_written(
    receiver: list[Any],
) -> None:
    chart = Chart.objects.load(NUDGE)
    executions = [stepper.start(chart, now=T0) for _ in range(3)]
    seen: list[tuple[int | None, bool, int]] = []

    def look(execution: Execution, entry: HistoryEntry) -> None:
        # A query in the chunk's transaction: the held rows (this step's too) are there.
        seen.append(
            (
                entry.pk,
                HistoryEntry.objects.filter(pk=entry.pk, seq=2).exists(),
                Execution.objects.get(pk=execution.pk).steps,
            )
        )

    receiver.append(look)
    assert fire_chunk().outcomes == {"fired": 3}
    assert len(seen) == 3
    for pk, found, steps in seen:
        assert pk is not None and found and steps == 2
    ids = [pk for pk, _found, _steps in seen]
    assert ids == sorted(ids)  # reserved in step order
    assert {e.pk for e in HistoryEntry.objects.filter(seq=2)} == set(ids)
    assert all(e.steps == 2 for e in Execution.objects.filter(pk__in=[e.pk for e in executions]))


def test_a_savepoint_rolled_back_later_in_the_chunk_keeps_the_earlier_steps_rows(
    receiver: list[Any],
) -> None:
    chart = Chart.objects.load(NUDGE)
    for _ in range(4):
        stepper.start(chart, now=T0)

    def savepoint_rolled_back(execution: Execution, entry: HistoryEntry) -> None:
        try:
            with transaction.atomic():
                Execution.objects.filter(pk=execution.pk).update(business_key="scratch")
                raise LookupError("rolled back")
        except LookupError:
            pass

    receiver.append(savepoint_rolled_back)
    assert fire_chunk().outcomes == {"fired": 4}
    assert HistoryEntry.objects.filter(seq=2).count() == 4
    assert set(Execution.objects.values_list("steps", "business_key")) == {(2, None)}


def test_a_flush_that_fails_rolls_the_chunk_back_and_every_timer_fires_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    need_held_writes()
    chart = Chart.objects.load(NUDGE)
    for _ in range(4):
        stepper.start(chart, now=T0)
    real = postgres.WriteBehind.flush
    failures = []

    def failing_once(self: postgres.WriteBehind) -> None:
        if self.held and not failures:
            failures.append(len(self.held))
            self.held = []
            raise DatabaseError("the flush failed")
        real(self)

    monkeypatch.setattr(postgres.WriteBehind, "flush", failing_once)
    assert fire_chunk().outcomes == {"fired": 4}
    assert failures == [4]
    assert HistoryEntry.objects.filter(seq=2).count() == 4
    assert HistoryEntry.objects.filter(seq=3).count() == 0  # nothing fired twice
    assert set(Timer.objects.values_list("status", "attempts")) == {("fired", 0)}


def test_a_failed_flush_swallowed_inside_the_batch_still_fails_the_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    need_held_writes()
    chart = Chart.objects.load(NUDGE)
    execution = stepper.start(chart, now=T0)
    with pytest.raises(DatabaseError), transaction.atomic(), stepper.batched_writes(2):
        locked = stepper.lock(execution.pk)
        behind = postgres.held_writes(connections[stepper.database()])
        assert behind is not None
        event = Event(name="nudge", data={"n": 1}, type=EXTERNAL)
        stepper.step_locked(locked, stepper.Input.external(event), T0, [])
        behind.failed = DatabaseError("an earlier flush failed")  # (and was swallowed)
    execution.refresh_from_db()
    assert execution.steps == 1
