"""The claim and the sweeper's look read due timers by walking the partial due index in
``(due, id)`` order on PostgreSQL, whatever the table's statistics say (``firing.
walk_due_index``): a ``LIMIT n`` then stops after n rows, instead of reading and sorting every
due row (a burst's claims would cost the server the square of its size)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, transaction
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from tests.timers.plans import plan_of
from timers import dispatch, firing, settling
from timers.models import Timer

pytestmark = pytest.mark.django_db

T0 = datetime(2031, 5, 1, 9, 0, tzinfo=UTC)


def due_rows(count: int) -> None:
    """``count`` pending timers due at T0 (raw rows: the plan, not the step, is under test)."""
    Timer.objects.bulk_create(
        Timer(
            execution_id=1_000_000 + n,
            send_id="s",
            ordinal=1,
            event={"name": "e"},
            target={"kind": "self"},
            due=T0 + timedelta(microseconds=n),
            macrostep=1,
            microstep=1,
            round=1,
            created=T0,
        )
        for n in range(count)
    )


def claim_select(queries: CaptureQueriesContext) -> str:
    return next(q["sql"] for q in queries.captured_queries if q["sql"].startswith("SELECT"))


def test_a_claim_and_a_look_take_the_earliest_due_rows() -> None:
    """Both databases: the claim takes the earliest due rows in (due, id) order, and the
    look counts up to its bound (the planner settings change no result)."""
    due_rows(30)
    batch = firing.claim_batch(T0 + timedelta(seconds=1), 10)
    assert [t.due for t in batch.rows] == [T0 + timedelta(microseconds=n) for n in range(10)]
    with override_settings(STATECHARTS={"CLOCK": lambda: T0 + timedelta(seconds=1)}):
        look = dispatch._look(10)  # reads the earliest 20: 10 claimed, 10 claimable
    assert (look.waiting, look.suspects, look.held) == (10, 0, 1)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)  # (real transactions: the settings end with them)
def test_the_claim_walks_the_due_index_whatever_the_statistics_say() -> None:
    due_rows(3_000)
    with CaptureQueriesContext(connection) as queries:
        firing.claim_batch(T0 + timedelta(seconds=1), 100)
    statements = [q["sql"] for q in queries.captured_queries]
    walk = next(i for i, sql in enumerate(statements) if "enable_bitmapscan" in sql)
    select = next(i for i, sql in enumerate(statements) if "SKIP LOCKED" in sql)
    assert walk < select  # in the claim's transaction, before its SELECT

    def plan(walked: bool) -> str:  # (the claim's SELECT, EXPLAINed)
        with transaction.atomic(), connection.cursor() as cursor:
            if walked:
                firing.walk_due_index("default")
            cursor.execute("EXPLAIN " + statements[select])
            text = "\n".join(row[0] for row in cursor.fetchall())
            transaction.set_rollback(True)
        return text

    # (Without it the plan follows the statistics: a bitmap scan of every due row and a
    # sort, with statistics that expect few due rows; benchmarks/timer_fire_cost.py shows it.)
    walked = plan(True)
    assert "Index Scan using timers_timer_due" in walked, walked
    assert "Sort" not in walked and "Bitmap" not in walked, walked
    # The settings are the transaction's own: the next one plans as the statistics say.
    with connection.cursor() as cursor:
        cursor.execute("SHOW enable_bitmapscan")
        assert cursor.fetchone()[0] == "on"


@pytest.mark.postgres
def test_the_look_walks_the_due_index_too() -> None:
    due_rows(50)
    with (
        override_settings(STATECHARTS={"CLOCK": lambda: T0 + timedelta(seconds=1)}),
        CaptureQueriesContext(connection) as queries,
    ):
        assert dispatch._look(5).waiting == 5
    statements = [q["sql"] for q in queries.captured_queries]
    walk = next(i for i, sql in enumerate(statements) if "enable_bitmapscan" in sql)
    select = next(i for i, sql in enumerate(statements) if "ORDER BY" in sql)
    assert walk < select


@pytest.mark.postgres
def test_the_take_finds_its_rows_by_primary_key_never_through_a_pending_index() -> None:
    """The take (``_settle_ids``) and a renewal (``pending_among``) name their rows by id:
    the partial indexes on pending rows must not be able to answer them (with statistics
    that expect few pending rows, one of them read every pending row for each chunk)."""
    due_rows(200)
    pks = list(Timer.objects.order_by("pk").values_list("pk", flat=True)[:20])
    with CaptureQueriesContext(connection) as queries:
        taken = settling._settle_ids(pks, "fired", T0 + timedelta(seconds=1), "", None)
    assert taken == set(pks)
    take = next(q["sql"] for q in queries.captured_queries if q["sql"].startswith("UPDATE"))
    with transaction.atomic():
        sid = transaction.savepoint()
        Timer.objects.filter(pk__in=pks).update(status="pending")
        planned = plan_of(take)
        transaction.savepoint_rollback(sid)
    assert "timers_timer_pkey" in planned, planned
    assert "timers_timer_due" not in planned and "timers_timer_cancel" not in planned, planned

    renewal = Timer.objects.pending_among(pks[:5]).filter(claim_token=7).values_list("pk")
    sql, params = renewal.query.sql_with_params()
    planned = plan_of(sql, params)
    assert "timers_timer_pkey" in planned, planned
    assert "Sort" not in planned and "timers_timer_cancel" not in planned, planned


def test_pending_among_keeps_only_the_pending_rows_of_the_ids_given() -> None:
    due_rows(5)
    pks = sorted(Timer.objects.values_list("pk", flat=True))
    Timer.objects.filter(pk=pks[1]).update(status="fired")
    found = sorted(Timer.objects.pending_among(pks[:3]).values_list("pk", flat=True))
    assert found == [pks[0], pks[2]]
