"""Query plans for the timer tests (PostgreSQL): what an index serves, what a firer reads."""

from __future__ import annotations

from django.db import connection, transaction


def plan_of(sql: str, params: object = None) -> str:
    """EXPLAIN, with sequential scans priced out (the test tables are tiny)."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN " + sql, params)
        text = "\n".join(row[0] for row in cursor.fetchall())
        transaction.set_rollback(True)
    return text


def query_plan(queryset: object) -> str:
    """The plan of a queryset on either database: PostgreSQL's EXPLAIN (as ``plan_of``), or
    SQLite's EXPLAIN QUERY PLAN (one line per step: ``SEARCH t USING INDEX i (...)``, and
    ``USE TEMP B-TREE FOR ORDER BY`` when it has to sort)."""
    sql, params = queryset.query.sql_with_params()  # type: ignore[attr-defined]
    if connection.vendor == "postgresql":
        return plan_of(sql, params)
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
        return "\n".join(str(row[-1]) for row in cursor.fetchall())
