"""The state index (issue 31): the ``ExecutionState`` table, kept by the database's triggers,
equals every execution's ``active_states`` after whatever wrote it, and the execution row
keeps no index on a column a step writes, so a step's UPDATE of it is HOT on PostgreSQL."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection

from statecharts import stepper
from statecharts.models import Chart, Execution, ExecutionState, HistoryEntry
from statecharts.operations import retention
from statecharts.operations.chart_migration import MigrationPlan, Verdict, migrate
from statecharts.operations.transfer import export_execution, import_execution
from statecharts.stepper.recording import _RUNNING_STEP_FIELDS
from statecharts.testing import Workbench
from tests.operations.world import T0, world
from timers.models import Timer

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0"'
# Nested and parallel: a step enters and exits several states at once, of several depths.
ORDER = f"""<scxml {NS} name="order" initial="shopping">
  <state id="shopping">
    <transition event="checkout" target="paying"/>
  </state>
  <state id="fulfilment" initial="paying">
    <transition event="restart" target="shopping"/>
    <state id="paying"><transition event="paid" target="shipping"/></state>
    <parallel id="shipping">
      <state id="packing" initial="boxing">
        <state id="boxing"><transition event="boxed" target="boxed"/></state>
        <state id="boxed"/>
      </state>
      <state id="billing"><state id="invoiced"/></state>
    </parallel>
  </state>
  <final id="done"/>
</scxml>"""
# Every step changes the configuration: the worst case for a state index.
CYCLE = f"""<scxml {NS} initial="a">
  <state id="a"><transition event="next" target="b"/></state>
  <state id="b"><transition event="next" target="c"/></state>
  <state id="c"><transition event="next" target="a"/></state>
</scxml>"""


def membership() -> set[tuple[int, int, str]]:
    return set(ExecutionState.objects.values_list("execution_id", "chart_id", "state"))


def expected() -> set[tuple[int, int, str]]:
    return {
        (pk, chart_id, state)
        for pk, chart_id, active in Execution.objects.values_list("pk", "chart_id", "active_states")
        for state in active
    }


def assert_consistent() -> None:
    assert membership() == expected()


@pytest.mark.django_db
def test_the_rows_follow_start_steps_cancel_and_an_update_by_any_writer() -> None:
    chart = Chart.objects.load(ORDER)
    a, b, c = (stepper.start(chart) for _ in range(3))
    assert_consistent()
    assert {s for e, _, s in membership() if e == a.pk} == {"shopping"}
    for execution, events in ((b, ["checkout"]), (c, ["checkout", "paid", "boxed"])):
        for event in events:
            stepper.send(execution, event)
            assert_consistent()
    assert {s for e, _, s in membership() if e == c.pk} == {
        "fulfilment",
        "shipping",
        "packing",
        "boxed",
        "billing",
        "invoiced",
    }
    stepper.send(c, "restart")  # five states exited, one entered
    assert_consistent()
    stepper.send(b, "unknown")  # a step that changes no configuration
    assert_consistent()
    stepper.cancel(a)
    assert_consistent()
    # Writers the stepper does not see: an update of the column, of the chart, raw SQL.
    Execution.objects.filter(pk=b.pk).update(active_states=["fulfilment", "paying", "x"])
    assert_consistent()
    other = Chart.objects.load(ORDER.replace('name="order"', 'name="other"'))
    Execution.objects.filter(pk=b.pk).update(chart=other)
    assert_consistent()
    assert set(Execution.objects.in_state("x").filter(chart=other)) == {b}
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE statecharts_execution SET active_states = %s WHERE id = %s",
            [json.dumps(["shopping"]), c.pk],
        )
    assert_consistent()
    assert set(Execution.objects.in_state("shopping")) == {c}


@pytest.mark.django_db
def test_the_rows_of_a_repeated_or_damaged_value() -> None:
    """One row per distinct string of the array, whatever else a writer put there; a value
    that is not an array holds no state (the write is not refused: a damaged row must still
    be stepped, cancelled or deleted)."""
    chart = Chart.objects.load(ORDER)
    execution = stepper.start(chart)

    def states_after(value: Any) -> set[str]:
        Execution.objects.filter(pk=execution.pk).update(active_states=value)
        assert_consistent_with(execution.pk, value)
        return {s for e, _, s in membership() if e == execution.pk}

    assert states_after(["a", "b", "a"]) == {"a", "b"}
    assert states_after(["b", "c", "c", "d", "e"]) == {"b", "c", "d", "e"}  # one moved, 2 in
    assert states_after(["e", 1, None, {"x": "y"}, ["z"], "f"]) == {"e", "f"}
    assert states_after({"a": "b"}) == set()  # an object: its keys are not states
    assert states_after("a") == set()  # a string, not an array
    assert states_after(["a", "b"]) == {"a", "b"}
    assert states_after([]) == set()
    assert states_after(["shopping"]) == {"shopping"}
    execution.delete()
    assert membership() == set()


def assert_consistent_with(pk: int, value: Any) -> None:
    strings = {s for s in value if isinstance(s, str)} if isinstance(value, list) else set()
    assert {s for e, _, s in membership() if e == pk} == strings
    others = Execution.objects.exclude(pk=pk).values_list("pk", "active_states")
    assert {(e, s) for e, _, s in membership() if e != pk} == {
        (e, s) for e, active in others for s in active
    }


@pytest.mark.django_db
def test_the_rows_go_with_the_execution_whatever_deletes_it() -> None:
    chart = Chart.objects.load(ORDER)
    a, b, c, d = (stepper.start(chart) for _ in range(4))
    stepper.send(d, "checkout")
    a.delete()  # the model's delete (its history goes by CASCADE)
    assert_consistent()
    Execution.objects.filter(pk=b.pk).delete()  # a queryset's
    assert_consistent()
    HistoryEntry.objects.filter(execution=c).delete()
    with connection.cursor() as cursor:  # raw SQL
        cursor.execute("DELETE FROM statecharts_execution WHERE id = %s", [c.pk])
    assert_consistent()
    assert {e for e, _, _ in membership()} == {d.pk}


@pytest.mark.django_db
def test_the_rows_follow_a_chart_migration(statecharts: Workbench) -> None:
    execution = statecharts.start(statecharts.load(ORDER))
    statecharts.send(execution, "checkout")
    v2 = Chart.objects.load(ORDER.replace('"paying"', '"charging"'), new_version=True)
    [report] = list(migrate(MigrationPlan.make(v2, {"paying": "charging"}), now=statecharts.now))
    assert report.verdict is Verdict.MIGRATED, report.reason
    assert_consistent()
    assert set(Execution.objects.in_state("charging").filter(chart=v2)) == {execution}
    assert not Execution.objects.in_state("paying").exists()


@pytest.mark.django_db
def test_the_rows_follow_an_import(statecharts: Workbench) -> None:
    execution = statecharts.start(statecharts.load(ORDER))
    statecharts.send(execution, "checkout")
    execution = statecharts.refresh(execution)
    document = json.loads(json.dumps(export_execution(execution)))
    Timer.objects.filter(execution=execution).delete()
    HistoryEntry.objects.filter(execution=execution).delete()
    Execution.objects.filter(pk=execution.pk).delete()
    assert membership() == set()
    imported = import_execution(document, now=statecharts.now)
    assert_consistent()
    assert set(Execution.objects.in_state("paying")) == {imported}


@pytest.mark.django_db
def test_the_rows_follow_a_retention_prune() -> None:
    w = world()
    assert_consistent()
    day = timedelta(days=1)
    everything = dict.fromkeys(("executions", "history", "outbox", "timers", "invocations"), day)
    report = retention.prune(now=T0 + 100 * day, retention=everything)
    assert {s.name: s.deleted for s in report.stages}["executions"] >= 1
    assert not Execution.objects.filter(pk=w.finished.pk).exists()
    assert_consistent()


NUDGE = f"""<scxml {NS} initial="waiting">
  <state id="waiting">
    <onentry><send event="nudge" delay="1d"/></onentry>
    <transition event="nudge" target="nudged"/>
  </state>
  <state id="nudged"/>
</scxml>"""


@pytest.mark.django_db
def test_the_rows_follow_a_chunk_of_timer_fires() -> None:
    """A chunk's steps write together (on PostgreSQL, held and sent as one UPDATE of several
    rows: the row trigger fires for each)."""
    from django.test import override_settings

    from timers import firing

    t0 = T0 + timedelta(days=400)
    chart = Chart.objects.load(NUDGE)
    executions = [stepper.start(chart, now=t0) for _ in range(4)]
    with override_settings(STATECHARTS={"TIMER_FIRE_CHUNK": 50}):
        report = firing.fire_due(now=t0 + timedelta(days=1))
    assert report.outcomes == {"fired": 4}
    assert_consistent()
    assert set(Execution.objects.in_state("nudged")) == set(executions)


@pytest.mark.django_db
def test_the_execution_row_has_no_index_on_a_column_every_step_writes() -> None:
    """Every running step writes these columns; an index on one of them makes the UPDATE
    non-HOT on PostgreSQL (a new entry in every index of the table, every step). ``status``
    changes only when an execution ends or halts, and stays indexed."""
    written = set(_RUNNING_STEP_FIELDS) - {"status"}
    assert {"position", "configuration", "active_states", "steps", "updated"} <= written
    meta = Execution._meta
    indexed = {f.name for f in meta.get_fields() if getattr(f, "db_index", False)}
    indexed |= {f.name for f in meta.get_fields() if getattr(f, "unique", False)}
    for index in meta.indexes:
        indexed |= set(index.fields)
        if index.condition is not None:
            indexed |= {child[0].split("__")[0] for child in index.condition.children}
    for constraint in meta.constraints:
        indexed |= set(getattr(constraint, "fields", ()))
        condition = getattr(constraint, "condition", None)
        if condition is not None:
            indexed |= {child[0].split("__")[0] for child in condition.children}
    indexed = {meta.get_field(name).name for name in indexed}
    assert indexed & written == set(), indexed
    columns = {meta.get_field(name).column for name in written}
    with connection.cursor() as cursor:
        indexes = connection.introspection.get_constraints(cursor, Execution._meta.db_table)
    covered = {c for i in indexes.values() if i["index"] or i["unique"] for c in i["columns"]}
    assert columns & covered == set(), indexes
    if connection.vendor == "postgresql":  # expressions and predicates too
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT indexdef FROM pg_indexes WHERE tablename = 'statecharts_execution'"
            )
            definitions = [row[0] for row in cursor.fetchall()]
        for definition in definitions:
            assert not any(column in definition for column in columns), definition


# -- PostgreSQL: HOT updates and WAL, in committed transactions ---------------------------


def _fresh_pages() -> None:
    """HOT needs room on the row's page: earlier tests' rolled-back rows may have filled it
    (a page is pruned only once under 10% of it is free), so start from vacuumed pages."""
    with connection.cursor() as cursor:
        cursor.execute("VACUUM statecharts_execution")


def _stats() -> tuple[int, int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
    with connection.cursor() as cursor:  # (the flush happens between the two statements)
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables"
            " WHERE relname = 'statecharts_execution'"
        )
        upd, hot = cursor.fetchone()
    return upd, hot


def _flushed_wal_end(cursor: Any) -> Any:
    """The WAL's end now, once PostgreSQL has written it to disk, as pg_walinspect reads only
    flushed WAL. The test database commits without waiting for the disk (tests/conftest.py), so the
    steps' records may not be yet: a commit of a transaction that wrote WAL, made with
    ``synchronous_commit`` on, returns once its commit record and all before it are (one that
    only took an xid commits asynchronously). The write changes nothing: a row set to itself,
    after the range the test reads."""
    cursor.execute("SELECT pg_current_wal_insert_lsn()")
    (end,) = cursor.fetchone()
    cursor.execute("SET synchronous_commit = on")
    try:
        cursor.execute(  # (autocommit: its own transaction)
            "UPDATE django_migrations SET applied = applied"
            " WHERE id = (SELECT min(id) FROM django_migrations)"
        )
    finally:
        cursor.execute("RESET synchronous_commit")
    return end


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_on_postgresql_a_step_updates_its_execution_row_hot() -> None:
    _fresh_pages()
    chart = Chart.objects.load(CYCLE)
    executions = [stepper.start(chart) for _ in range(2)]  # (fresh rows: room on the page)
    before = _stats()
    for _ in range(3):
        for execution in executions:
            stepper.send(execution, "next")  # each its own committed transaction
    upd, hot = (after - first for after, first in zip(_stats(), before, strict=True))
    assert upd >= 6, (upd, hot)
    assert hot == upd, f"{upd} updates of the execution row, {hot} of them HOT"
    assert_consistent()


def _walinspect() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'pg_walinspect'")
        if cursor.fetchone() is None:
            return False
        try:
            cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        except Exception:  # (no privilege to create it)
            return False
    return True


# WAL records a step of a fresh execution of CYCLE writes to this database's relations (the
# COMMIT names none and is not counted): the execution's lock and HOT update, the history row
# and its two index entries, the state row moved and its one index entry: 7 measured, plus a
# prune now and then. With the GIN index back it was 12 (10 without this table: the GIN's
# entry and one in each of the execution table's four other indexes: the UPDATE is not HOT).
WAL_RECORDS_PER_STEP_BUDGET = 8


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_on_postgresql_a_step_writes_no_index_entry_of_the_execution_table() -> None:
    if not _walinspect():
        pytest.skip("pg_walinspect is not available")
    _fresh_pages()
    chart = Chart.objects.load(CYCLE)
    executions = [stepper.start(chart) for _ in range(2)]
    with connection.cursor() as cursor:
        cursor.execute("SELECT oid FROM pg_database WHERE datname = current_database()")
        (database,) = cursor.fetchone()
        cursor.execute(
            "SELECT c.relname, pg_relation_filenode(c.oid) FROM pg_class c"
            " WHERE c.oid = 'statecharts_execution'::regclass OR c.oid IN"
            " (SELECT indexrelid FROM pg_index WHERE indrelid = 'statecharts_execution'::regclass)"
        )
        nodes = {f"/{database}/{node} ": name for name, node in cursor.fetchall()}
        cursor.execute("SELECT pg_current_wal_insert_lsn()")
        (start,) = cursor.fetchone()
    steps = 0
    for _ in range(3):
        for execution in executions:
            stepper.send(execution, "next")
            steps += 1
    with connection.cursor() as cursor:
        end = _flushed_wal_end(cursor)
        cursor.execute(
            "SELECT resource_manager, record_type, coalesce(block_ref, '')"
            " FROM pg_get_wal_records_info(%s, %s)",
            [start, end],
        )
        records = cursor.fetchall()
    ours = [r for r in records if f"/{database}/" in r[2]]
    on_execution: dict[str, list[str]] = {}
    for manager, kind, ref in ours:
        for node, name in nodes.items():
            if node in ref + " ":
                on_execution.setdefault(name, []).append(f"{manager}/{kind}")
    heap = on_execution.pop("statecharts_execution", [])
    assert heap.count("Heap/HOT_UPDATE") == steps, heap
    assert "Heap/UPDATE" not in heap, heap
    assert on_execution == {}, f"index entries of the execution table: {on_execution}"
    assert len(ours) <= WAL_RECORDS_PER_STEP_BUDGET * steps, _mix(ours)
    assert_consistent()


def _mix(records: list[Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for manager, kind, _ in records:
        counts[f"{manager}/{kind}"] = counts.get(f"{manager}/{kind}", 0) + 1
    return counts


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_on_postgresql_a_step_calls_no_function_but_the_trigger() -> None:
    """The trigger's work per step is its function and the statements that write the rows:
    it calls no other function (migration 0015's called an SQL function four times a step,
    planned again at every call: about 370 us of server CPU per step, 8x what the function
    of migration 0016 costs; benchmarks/JOURNAL.md, 2026-12-07). Counted by the server
    (``track_functions = 'all'`` counts PL/pgSQL and SQL functions alike), not timed."""
    with connection.cursor() as cursor:
        try:
            cursor.execute("SET track_functions = 'all'")
        except Exception:  # (a superuser setting)
            pytest.skip("no privilege to set track_functions")
    try:
        chart = Chart.objects.load(CYCLE)
        executions = [stepper.start(chart) for _ in range(2)]
        before = _function_calls()
        for _ in range(3):
            for execution in executions:
                stepper.send(execution, "next")
        calls = {
            name: count - before.get(name, 0)
            for name, count in _function_calls().items()
            if count != before.get(name, 0)
        }
        assert calls == {"statecharts_execution_states": 6}, calls
        assert_consistent()
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET track_functions")


def _function_calls() -> dict[str, int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT funcname, calls FROM pg_stat_user_functions")
        return dict(cursor.fetchall())


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_on_postgresql_the_first_step_of_executions_on_filled_pages_is_hot() -> None:
    """The execution table's pages keep room for a step's new row version (migration 0017's
    fillfactor): executions written one after another and never stepped since (as most are,
    among many executions each stepped rarely) fill their pages, and their first steps are
    still HOT. Without the room, the first UPDATE on a full page moves its row to another
    page and writes an entry in each of the table's indexes (84% of the steps' UPDATEs at
    100,000 executions, benchmarks/JOURNAL.md; every one of them here)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT reloptions FROM pg_class WHERE oid = 'statecharts_execution'::regclass"
        )
        (options,) = cursor.fetchone()
    assert "fillfactor=80" in (options or []), options
    _fresh_pages()
    chart = Chart.objects.load(CYCLE)
    template = stepper.start(chart)
    # Copies of its row, written by one INSERT (packed as the table's fill allows; none of
    # them updated since): several pages of executions waiting for their first step.
    columns = [
        f.column for f in Execution._meta.concrete_fields if f.column not in ("id", "session_id")
    ]
    listed = ", ".join(columns)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO statecharts_execution (session_id, {listed})"
            f" SELECT 'filled-' || g, {listed} FROM statecharts_execution,"
            " generate_series(1, 80) g WHERE id = %s RETURNING id",
            [template.pk],
        )
        copies = [row[0] for row in cursor.fetchall()]
        # One execution of each page the copies filled (not the first, which may hold the
        # template's old version, nor the last, which may have room anyway): the first step
        # on a page none of whose rows was ever updated.
        cursor.execute(
            "SELECT min(id) FROM statecharts_execution WHERE id = ANY(%s)"
            " GROUP BY (ctid::text::point)[0] ORDER BY (ctid::text::point)[0]",
            [copies],
        )
        firsts = [row[0] for row in cursor.fetchall()][1:-1]
    assert len(firsts) >= 3, firsts
    before = _stats()
    for pk in firsts:
        stepper.send(pk, "next")
    upd, hot = (after - first for after, first in zip(_stats(), before, strict=True))
    assert upd == len(firsts), (upd, hot)
    assert hot == upd, f"{upd} first updates on filled pages, {hot} of them HOT"
    assert_consistent()


# A constant datamodel value a step does not change, longer than everything a step does.
_LONG = "x" * 600
STILL = f"""<scxml {NS} datamodel="ecmascript" initial="a">
  <datamodel><data id="settings" expr="'{_LONG}'"/></datamodel>
  <state id="a"><transition event="next" target="b"/></state>
  <state id="b"><transition event="next" target="a"/></state>
</scxml>"""


def _execution_update_bytes(monkeypatch: pytest.MonkeyPatch, version: int) -> list[int]:
    """The WAL bytes (without full-page images) of each HOT update of the execution row, in
    6 steps of two fresh executions of STILL, their positions written in format ``version``."""
    from functools import partial

    from statecharts.core import position
    from statecharts.stepper import applying

    monkeypatch.setattr(applying, "encode", partial(position.encode, version=version))
    _fresh_pages()
    chart = Chart.objects.load(STILL)
    executions = [stepper.start(chart) for _ in range(2)]
    for execution in executions:  # (both rows now written in ``version``)
        stepper.send(execution, "next")
    with connection.cursor() as cursor:
        cursor.execute("SELECT oid FROM pg_database WHERE datname = current_database()")
        (database,) = cursor.fetchone()
        cursor.execute("SELECT pg_relation_filenode('statecharts_execution')")
        (node,) = cursor.fetchone()
        cursor.execute("SELECT pg_current_wal_insert_lsn()")
        (start,) = cursor.fetchone()
    for _ in range(3):
        for execution in executions:
            stepper.send(execution, "next")
    with connection.cursor() as cursor:
        end = _flushed_wal_end(cursor)
        cursor.execute(
            "SELECT record_length - fpi_length FROM pg_get_wal_records_info(%s, %s)"
            " WHERE record_type = 'HOT_UPDATE' AND fpi_length = 0 AND block_ref LIKE %s",
            [start, end, f"%/{database}/{node} %"],
        )
        return [length for (length,) in cursor.fetchall()]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_on_postgresql_a_step_logs_the_changed_tail_of_its_position_not_all_of_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Position format 3 writes what a step changes last: PostgreSQL logs a HOT update as the
    bytes after those the new row shares with the old one, so a step that changes only the
    configuration and counters does not log the 600-byte datamodel value it leaves alone
    (format 2, whose configuration came before the datamodel, logged it at every step)."""
    if not _walinspect():
        pytest.skip("pg_walinspect is not available")
    compact = _execution_update_bytes(monkeypatch, 3)
    whole = _execution_update_bytes(monkeypatch, 2)
    assert len(compact) >= 4 and len(whole) >= 4, (compact, whole)  # (a checkpoint: fewer)
    assert max(compact) < 300 < len(_LONG) < min(whole), (compact, whole)
