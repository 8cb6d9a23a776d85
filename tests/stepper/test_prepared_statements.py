"""On PostgreSQL a step's own statements (the lock, the UPDATE with the history INSERT) run as
server-side prepared statements (``STATECHARTS["PREPARED_STATEMENTS"]``, default True), and
write exactly the rows the unprepared statements write; off, nothing is prepared."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext, override_settings

from statecharts import stepper
from statecharts.models import Chart, Execution, HistoryEntry

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
COUNTER = f"""<scxml {NS} initial="idle">
  <datamodel><data id="count" expr="0"/><data id="limit" expr="3"/></datamodel>
  <state id="idle"><transition event="advance" target="busy"/></state>
  <state id="busy">
    <transition event="advance" cond="count &lt; limit" target="idle">
      <assign location="count" expr="count + 1"/>
    </transition>
    <transition event="advance" target="done"/>
  </state>
  <final id="done"/>
</scxml>"""
EVENTS = ["advance"] * 9
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
# Columns that differ between two executions of the same chart whatever the statements (the
# position's hash covers the session id; the position itself is compared without it).
OWN = {"id", "session_id", "execution", "position_sha256"}


@pytest.fixture
def fresh_session() -> Iterator[None]:
    """A new database session: no statement prepared by an earlier test on this connection."""
    connection.close()
    yield
    connection.close()


def settings(prepared: bool) -> Any:
    return override_settings(STATECHARTS={"CLOCK": lambda: NOW, "PREPARED_STATEMENTS": prepared})


def prepared_statements() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


def step_all(prepared: bool) -> tuple[int, list[str]]:
    """Start an execution and send it every event; the statements prepared afterwards."""
    with settings(prepared):
        chart = Chart.objects.filter(source=COUNTER).first() or Chart.objects.load(COUNTER)
        execution = stepper.start(chart)
        for event in EVENTS:
            stepper.send(execution.pk, event)
        return execution.pk, prepared_statements()


def values(row: Any, session_id: str) -> dict[str, Any]:
    found = {}
    for field in row._meta.concrete_fields:
        if field.name in OWN:
            continue
        value = getattr(row, field.attname)
        if isinstance(value, bytes | memoryview):
            found[field.attname] = bytes(value).replace(session_id.encode(), b"<session>")
        else:  # (the start row's input names the session too)
            found[field.attname] = json.dumps(value, default=repr).replace(session_id, "<session>")
    return found


def rows(pk: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    execution = Execution.objects.get(pk=pk)
    history = HistoryEntry.objects.filter(execution_id=pk).order_by("seq")
    session_id = execution.session_id
    return values(execution, session_id), [values(entry, session_id) for entry in history]


def test_with_the_setting_on_the_step_statements_are_prepared(fresh_session: None) -> None:
    _pk, statements = step_all(prepared=True)
    locks = [s for s in statements if "FOR UPDATE" in s and "statecharts_execution" in s]
    writes = [s for s in statements if s.startswith("WITH updated AS (UPDATE")]
    assert len(locks) == 1, statements
    assert len(writes) == 1, statements
    assert "ORDER BY" not in locks[0]  # (one row: Meta.ordering is not compiled in)
    # Only the stepper's statements: Django's own queries are left unprepared.
    assert all("statecharts_" in s for s in statements), statements


def test_with_the_setting_off_nothing_is_prepared(fresh_session: None) -> None:
    _pk, statements = step_all(prepared=False)
    assert statements == []


def test_prepared_and_unprepared_steps_write_the_same_rows(fresh_session: None) -> None:
    prepared, _ = step_all(prepared=True)
    unprepared, _ = step_all(prepared=False)
    execution, history = rows(prepared)
    assert (execution, history) == rows(unprepared)
    assert execution["configuration"] == '["done"]' and len(history) == 1 + len(EVENTS)


def test_prepared_statements_still_pass_through_djangos_cursor_wrappers(
    fresh_session: None,
) -> None:
    """Query logging and execute_wrapper (what assertNumQueries and profilers read) see the
    prepared statements as they see the others."""
    seen: list[str] = []

    def wrapper(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        seen.append(sql)
        return execute(sql, params, many, context)

    with settings(True):
        execution = stepper.start(Chart.objects.load(COUNTER))
        with CaptureQueriesContext(connection) as logged, connection.execute_wrapper(wrapper):
            stepper.send(execution.pk, "advance")
    assert any("FOR UPDATE" in sql for sql in seen), seen
    assert any(sql.startswith("WITH updated AS") for sql in seen), seen
    logged_sql = [query["sql"] for query in logged.captured_queries]
    lock = [sql for sql in logged_sql if "FOR UPDATE" in sql]
    assert len(lock) == 1 and f" = {execution.pk}" in lock[0], logged_sql
    assert [sql for sql in logged_sql if sql.startswith("WITH updated AS")], logged_sql


def test_steps_after_a_rolled_back_transaction_prepare_their_statements_again(
    fresh_session: None,
) -> None:
    """A rollback makes psycopg deallocate every prepared statement of the session; the next
    step prepares its statements again instead of naming ones that are gone."""
    with settings(True):
        execution = stepper.start(Chart.objects.load(COUNTER))
        stepper.send(execution.pk, "advance")
        assert prepared_statements()
        with pytest.raises(RuntimeError), transaction.atomic():
            stepper.lock(execution.pk)
            raise RuntimeError("rolled back")
        assert prepared_statements() == []
        stepper.send(execution.pk, "advance")
        assert len(prepared_statements()) == 2
    assert HistoryEntry.objects.filter(execution_id=execution.pk).count() == 3
