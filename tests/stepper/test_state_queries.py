"""Finding executions by where they stand: ``Execution.objects.in_state("paid")``, any active
state (atomic, compound or parallel), kept exact in each step's transaction (the
``ExecutionState`` table, written by the database's triggers: tests/stepper/test_state_index.py)."""

from __future__ import annotations

import pytest
from django.db import connection

from statecharts import stepper
from statecharts.models import Chart, Execution

pytestmark = pytest.mark.django_db
NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0"'
ORDER = f"""<scxml {NS} initial="shopping">
  <state id="shopping">
    <transition event="checkout" target="paying"/>
  </state>
  <state id="fulfilment" initial="paying">
    <state id="paying"><transition event="paid" target="shipping"/></state>
    <parallel id="shipping">
      <state id="packing"><state id="boxed"/></state>
      <state id="billing"><state id="invoiced"/></state>
    </parallel>
  </state>
</scxml>"""


def ids(queryset: object) -> set[int]:
    return set(queryset.values_list("pk", flat=True))  # type: ignore[attr-defined]


def test_in_state_finds_atomic_compound_and_parallel_states_as_the_steps_leave_them() -> None:
    chart = Chart.objects.load(ORDER)
    a, b, c = (stepper.start(chart) for _ in range(3))
    stepper.send(b, "checkout")
    stepper.send(c, "checkout")
    stepper.send(c, "paid")
    found = Execution.objects.in_state
    assert ids(found("shopping")) == {a.pk}
    assert ids(found("paying")) == {b.pk}
    assert ids(found("fulfilment")) == {b.pk, c.pk}  # a compound ancestor
    assert ids(found("shipping")) == {c.pk}  # a parallel state
    assert ids(found("boxed")) == ids(found("invoiced")) == {c.pk}  # both regions
    assert ids(found("nowhere")) == set()
    assert ids(Execution.objects.in_states(["shopping", "paying"])) == {a.pk, b.pk}
    assert ids(Execution.objects.in_states(["boxed", "fulfilment"], every=True)) == {c.pk}
    # A state whose id is a prefix or part of another's is not confused with it.
    assert ids(found("pay")) == set() and ids(found("ship")) == set()
    # It composes with the rest of the ORM.
    assert ids(found("fulfilment").filter(chart=chart).exclude(pk=b.pk)) == {c.pk}


@pytest.mark.postgres
def test_on_postgresql_the_query_uses_the_state_tables_primary_key() -> None:
    chart = Chart.objects.load(ORDER)
    stepper.start(chart)
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        sql, params = Execution.objects.in_state("paying").values("pk").query.sql_with_params()
        cursor.execute(f"EXPLAIN {sql}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute("SET enable_seqscan = on")
    assert "statecharts_executionstate_pkey" in plan, plan
    assert "statecharts_execution_active_states" not in plan, plan


def _plan(queryset: object) -> str:
    sql, params = queryset.query.sql_with_params()  # type: ignore[attr-defined]
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        cursor.execute(f"EXPLAIN {sql}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute("SET enable_seqscan = on")
    return plan


@pytest.mark.postgres
def test_on_postgresql_a_step_writes_no_duplicate_index_and_the_lookups_keep_theirs() -> None:
    """Every index of the execution table takes an entry whenever its UPDATE is not HOT (a
    step that ends it changes the indexed status), so none duplicates another: the lookups
    the dropped ones served use the index that covers them (migration 0011); the GIN index
    on active_states is gone (migration 0013)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tablename, indexname FROM pg_indexes WHERE tablename IN"
            " ('statecharts_execution', 'statecharts_historyentry')"
        )
        names = {(table, name) for table, name in cursor.fetchall()}
    assert not {n for n in names if n[1].endswith("_like")}, names
    assert len([n for n in names if n[0] == "statecharts_execution"]) == 7, names
    assert len([n for n in names if n[0] == "statecharts_historyentry"]) == 3, names
    execution = stepper.start(Chart.objects.load(ORDER))
    children = _plan(Execution.objects.filter(parent_id=execution.pk).values("pk"))
    assert "statecharts_execution_one_child_per_invocation" in children, children
    history = _plan(execution.history.values("pk"))
    assert "statecharts_history_unique_seq" in history, history
    subject = _plan(Execution.objects.filter(subject_content_type_id=1).values("pk"))
    assert "statecharts_execution_subject" in subject, subject


@pytest.mark.postgres
def test_on_postgresql_an_execution_about_nothing_has_no_subject_index_entry() -> None:
    """The subject index is partial (migration 0012): a step of an execution about no object
    writes no entry to it, and a lookup by subject still uses it."""
    chart = Chart.objects.load(ORDER)
    about_nothing = stepper.start(chart)
    about_chart = stepper.start(chart, subject=chart)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'statecharts_execution_subject'"
        )
        (definition,) = cursor.fetchone()
    assert definition.endswith("WHERE (subject_content_type_id IS NOT NULL)"), definition
    lookup = Execution.objects.for_subject(chart)
    assert ids(lookup) == {about_chart.pk} and about_nothing.pk not in ids(lookup)
    assert "statecharts_execution_subject" in _plan(lookup.values("pk"))
