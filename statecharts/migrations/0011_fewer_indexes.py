"""Fewer indexes on the two tables every step writes (issue 16).

A step's UPDATE of its execution changes ``active_states``, which the GIN index covers, so
PostgreSQL cannot make it a HOT update: every index of the table gets a new entry, every step.
Five of them duplicated another index, and are dropped:

- ``parent_id``: the unique (parent, invoke_ordinal) index, partial on a parent, finds the
  children of an execution;
- ``subject_content_type_id``: the (subject_content_type, subject_object_id) index starts
  with it;
- the history's ``execution_id``: the unique (execution, seq) index starts with it;
- on PostgreSQL, the ``varchar_pattern_ops`` copies Django adds for ``status`` and
  ``session_id`` (only ``LIKE 'prefix%'`` uses them, and no query here does).

On PostgreSQL a step then writes 10 WAL records instead of 15 (measured with ``EXPLAIN
(ANALYZE, WAL)``: benchmarks/JOURNAL.md, "Many executions").
"""

from typing import Any

import django.db.models.deletion
from django.db import migrations, models

# (table, column): the pattern-ops index Django made for it on PostgreSQL.
_LIKE_INDEXES = (("statecharts_execution", "status"), ("statecharts_execution", "session_id"))


def _like_name(schema_editor: Any, table: str, column: str) -> str:
    return schema_editor._create_index_name(table, [column], suffix="_like")


def drop_like_indexes(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    quote = schema_editor.quote_name
    for table, column in _LIKE_INDEXES:
        name = _like_name(schema_editor, table, column)
        schema_editor.execute(f"DROP INDEX IF EXISTS {quote(name)}")


def create_like_indexes(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    quote = schema_editor.quote_name
    for table, column in _LIKE_INDEXES:
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {quote(_like_name(schema_editor, table, column))}"
            f" ON {quote(table)} ({quote(column)} varchar_pattern_ops)"
        )


class Migration(migrations.Migration):

    dependencies = [
        ('contenttypes', '0002_remove_content_type_name'),
        ('statecharts', '0010_payload_codecs_and_tracing'),
    ]

    operations = [
        migrations.AlterField(
            model_name='execution',
            name='parent',
            field=models.ForeignKey(blank=True, db_constraint=False, db_index=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='children', to='statecharts.execution'),
        ),
        migrations.AlterField(
            model_name='execution',
            name='subject_content_type',
            field=models.ForeignKey(blank=True, db_index=False, help_text='The model of the object this execution is about.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='contenttypes.contenttype'),
        ),
        migrations.AlterField(
            model_name='historyentry',
            name='execution',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='history', to='statecharts.execution'),
        ),
        migrations.RunPython(drop_like_indexes, create_like_indexes),
    ]
