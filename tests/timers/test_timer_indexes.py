"""The timer table's indexes (migration 0009): each one a query needs, and no more, since
every index is one more write when a timer is scheduled, claimed (when the claim's UPDATE
cannot stay on its page) and fired (the take changes ``status``: never a HOT update).

- ``(execution, ordinal)`` unique (dedup) also serves "the timers of an execution": the
  foreign key has no index of its own;
- ``settled`` is partial on settled rows: pruning asks for ``settled < cutoff`` only, and a
  pending timer (scheduled, claimed) writes no entry there.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from statecharts import stepper
from statecharts.models import Chart, Execution
from tests.timers.plans import plan_of
from timers import pruning
from timers.models import Timer

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

T0 = datetime(2031, 5, 1, 9, 0, tzinfo=UTC)


def indexes() -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'timers_timer'"
        )
        return dict(cursor.fetchall())


def plan(queryset: object) -> str:
    """The plan of ``queryset`` with sequential scans priced out (the tables are tiny)."""
    sql, params = queryset.query.sql_with_params()  # type: ignore[attr-defined]
    return plan_of(sql, params)


def test_the_timer_table_has_exactly_the_indexes_its_queries_use() -> None:
    found = indexes()
    assert sorted(found) == [
        "timers_timer_cancel",
        "timers_timer_dedup",
        "timers_timer_due",
        "timers_timer_pkey",
        "timers_timer_settled",
    ], found
    assert found["timers_timer_settled"].endswith("WHERE (settled IS NOT NULL)")
    assert found["timers_timer_due"].endswith("WHERE ((status)::text = 'pending'::text)")


def test_the_timers_of_an_execution_are_found_through_the_dedup_index() -> None:
    assert "timers_timer_dedup" in plan(Timer.objects.filter(execution_id=7))


def test_pruning_finds_settled_rows_through_the_partial_settled_index() -> None:
    rows = Timer.objects.filter(pruning._prunable(T0)).values_list("pk")
    assert "timers_timer_settled" in plan(rows)


def test_pruning_still_deletes_old_settled_timers_of_finished_executions() -> None:
    chart = Chart.objects.load(
        '<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" initial="a">'
        '<final id="a"/></scxml>'
    )
    execution = stepper.start(chart, now=T0)
    assert Execution.objects.get(pk=execution.pk).status != "running"
    common = {
        "execution_id": execution.pk,
        "send_id": "s",
        "event": {"name": "e"},
        "target": {"kind": "self"},
        "due": T0,
        "macrostep": 1,
        "microstep": 1,
        "round": 1,
        "created": T0,
    }
    Timer.objects.create(ordinal=1, status="fired", settled=T0, **common)
    Timer.objects.create(ordinal=2, **common)  # pending: never pruned
    deleted = pruning.prune(now=T0 + timedelta(days=365), retention=timedelta(days=1))
    assert deleted == 1
    assert list(Timer.objects.values_list("ordinal", flat=True)) == [2]
