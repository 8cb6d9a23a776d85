"""What one durable step sends to the database, counted (issue 31): each statement is a round
trip to the server, and in one process its latency is a share of every step. The peer it is
measured against (django-fsm-2) sends five: BEGIN, SELECT ... FOR UPDATE, UPDATE, INSERT,
COMMIT. A change that adds a statement to the step fails here, not only in a benchmark; so
does one that makes the rows a step writes wider (on PostgreSQL, their bytes)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from statecharts import stepper
from statecharts.models import Chart, Execution, HistoryEntry

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0"'
# The many_executions benchmark's chart: a guard on the datamodel and an <assign>.
CHART = f"""<scxml {NS} datamodel="ecmascript" name="many" initial="a">
  <datamodel><data id="count" expr="0"/><data id="limit" expr="1000000000"/></datamodel>
  <state id="a"><transition event="advance" target="b"/></state>
  <state id="b">
    <transition event="advance" cond="count &lt; limit" target="c">
      <assign location="count" expr="count + 1"/>
    </transition>
  </state>
  <state id="c"><transition event="advance" target="a"/></state>
</scxml>"""


def kind(sql: str) -> str:
    words = sql.split()
    if words[0].upper() == "WITH":  # (the UPDATE and the INSERT as one statement)
        return "UPDATE+INSERT"
    if words[0].upper() == "SELECT" and "FOR UPDATE" in sql.upper():
        return "LOCK"
    return words[0].upper()


@pytest.mark.django_db(transaction=True)  # real transactions: the step's BEGIN and COMMIT
def test_a_durable_step_to_an_existing_execution_sends_its_statements_and_no_more() -> None:
    execution = stepper.start(Chart.objects.load(CHART))
    stepper.send(execution.pk, "advance")  # (the connection has the chart row and its plans)
    for _ in range(3):  # each of a -> b, b -> c (guard, assign), c -> a
        with CaptureQueriesContext(connection) as queries:
            stepper.send(execution.pk, "advance")
        sent = [kind(q["sql"]) for q in queries.captured_queries]
        if connection.vendor == "postgresql":
            assert sent == ["BEGIN", "LOCK", "UPDATE+INSERT", "COMMIT"]
        else:
            assert sent == ["BEGIN", "SELECT", "UPDATE", "INSERT", "COMMIT"], sent
    stored = Execution.objects.get(pk=execution.pk)
    assert stored.steps == 5 == HistoryEntry.objects.filter(execution=execution).count()
    assert stored.configuration == ["b"]  # (a, then four events)


# Bytes of the rows a step of CHART writes, on PostgreSQL (pg_column_size of the row), measured
# 2026-12-08: the history row 431 (503 before its input left out the unset event fields), the
# execution row 509 (613 before position format 3). Every byte of the history row is WAL at
# every step; the execution row's size sets how many fit a page (HOT room, full-page images).
HISTORY_ROW_BYTES_BUDGET = 450
EXECUTION_ROW_BYTES_BUDGET = 530


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_on_postgresql_the_rows_a_step_writes_stay_within_their_bytes() -> None:
    execution = stepper.start(Chart.objects.load(CHART))
    for _ in range(2):
        result = stepper.send(execution.pk, "advance")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_column_size(h.*) FROM statecharts_historyentry h WHERE id = %s",
            [result.entry.pk],
        )
        (history,) = cursor.fetchone()
        cursor.execute(
            "SELECT pg_column_size(e.*) FROM statecharts_execution e WHERE id = %s",
            [execution.pk],
        )
        (row,) = cursor.fetchone()
    assert history <= HISTORY_ROW_BYTES_BUDGET, history
    assert row <= EXECUTION_ROW_BYTES_BUDGET, row
