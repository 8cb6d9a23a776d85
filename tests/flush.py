"""The flush that ends each transactional test, made cheap (a speed measure of the test suite
only, kept here by name; ``tests/conftest.py`` installs it).

About 210 tests are transactional (real commits: crash, race and cluster tests, on_commit
deliveries, the live server). After each one Django empties every table (``manage.py flush``)
and runs ``post_migrate`` again. Measured on this project's 2-CPU machine (docs/testing.md):

- PostgreSQL answers Django's one ``TRUNCATE`` of about forty tables in 0.5-0.9 s: a new file
  for each table, index and sequence whether or not it holds a row. Here only the tables that
  hold a row are emptied, with ``DELETE`` (about 10 ms when a test wrote to a handful):
  Django's foreign keys on PostgreSQL are ``DEFERRABLE INITIALLY DEFERRED``, so the order of
  the deletes within the flush's one transaction does not matter.
- ``post_migrate`` re-creates every content type and permission (0.25-0.35 s on either
  database) because the flush deleted them. Those two tables are left as they are: what
  ``post_migrate`` would write back is exactly what they hold. ``post_migrate`` still runs
  (the apps' django-q2 schedules are created by it), and finds nothing to add.

The state each test starts from is the same as with Django's own flush: every other table
empty, the content types and permissions the migrations give, the apps' schedules.
"""

from __future__ import annotations

from typing import Any

from django.core.management.commands import flush as flush_command
from django.db.backends.base.base import BaseDatabaseWrapper

# Written by post_migrate from the installed models; never changed by the project.
KEPT = frozenset({"django_content_type", "auth_permission"})


def sql_flush(
    style: Any,
    connection: BaseDatabaseWrapper,
    reset_sequences: bool = True,
    allow_cascade: bool = False,
) -> list[str]:
    tables = [
        table
        for table in connection.introspection.django_table_names(
            only_existing=True, include_views=False
        )
        if table not in KEPT
    ]
    if connection.vendor == "postgresql" and not reset_sequences and not allow_cascade:
        quote = connection.ops.quote_name
        with connection.cursor() as cursor:
            cursor.execute(
                " UNION ALL ".join(
                    f"SELECT %s WHERE EXISTS (SELECT 1 FROM {quote(table)})" for table in tables
                ),
                tables,
            )
            holding = [row[0] for row in cursor.fetchall()]
        return [f"DELETE FROM {quote(table)};" for table in holding]
    return connection.ops.sql_flush(
        style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade
    )


def install() -> None:
    """Route ``manage.py flush`` (as TransactionTestCase calls it) through :func:`sql_flush`."""
    flush_command.sql_flush = sql_flush  # type: ignore[assignment]
