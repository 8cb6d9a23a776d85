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
