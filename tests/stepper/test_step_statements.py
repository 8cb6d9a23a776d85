"""What one durable step sends to the database, counted (issue 31): each statement is a round
trip to the server, and in one process its latency is a share of every step. The peer it is
measured against (django-fsm-2) sends five: BEGIN, SELECT ... FOR UPDATE, UPDATE, INSERT,
COMMIT. A change that adds a statement to the step fails here, not only in a benchmark."""

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
