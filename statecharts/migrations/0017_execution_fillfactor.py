"""Room on the execution table's pages for a step's new row version (PostgreSQL; issue 31).

A step's UPDATE of its execution is HOT (no index entry) only if the new row version fits on
the page of the old one. Pages were filled to 100%: an execution not stepped since its page
filled up (most of them, with many executions each stepped rarely) had no room, so its next
step moved the row to another page and wrote an entry in each of the table's indexes
(primary key, session id, status, chart): measured at 100,000 executions, 84% of the steps'
UPDATEs were not HOT, 13.7 WAL records per step against 9.6 at 1,000 executions, and twice
the full-page images after a checkpoint (``benchmarks/JOURNAL.md``, 2026-12-07).

``fillfactor = 80`` leaves a fifth of every page the table fills from now on free for
updates: a row version of up to about 1.6 kB (a position blob of a modest datamodel) finds
room, and pruning frees the old version for the next step. The table takes about a quarter
more pages. Existing pages keep their fill until rewritten: ``VACUUM FULL
statecharts_execution`` (which locks the table for its duration) or ``pg_repack`` applies
it to them. SQLite has no fill factor: nothing to do there.

Reversed: the default fill (100).
"""

from typing import Any

from django.db import migrations

FILLFACTOR = 80


def install(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f"ALTER TABLE statecharts_execution SET (fillfactor = {FILLFACTOR})", params=None
        )


def uninstall(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("ALTER TABLE statecharts_execution RESET (fillfactor)", params=None)


class Migration(migrations.Migration):
    dependencies = [
        ("statecharts", "0016_state_index_trigger_without_queries"),
    ]

    operations = [
        migrations.RunPython(install, uninstall),
    ]
