"""The state index becomes a table kept by triggers (issue 31, benchmarks/STATE_INDEX.md).

Until now ``Execution.objects.in_state`` used a GIN index on ``active_states`` (PostgreSQL;
SQLite scanned the JSON text). A step changes ``active_states`` whenever the configuration
changes, so its UPDATE of the execution row could never be HOT: every index of the table took
an entry at every step (11-12 WAL records per step on PostgreSQL, measured with
``benchmarks/state_index.py``; 9-10 with this design).

This migration:

- creates ``statecharts_executionstate`` (state, chart_id, execution_id), one row per active
  state, its composite primary key its only index;
- fills it from every execution's ``active_states`` (on PostgreSQL under a SHARE lock of the
  execution table, so no step changes a configuration meanwhile: steps wait for it; plan for
  minutes per 10 million executions);
- creates row triggers on the execution table that keep it equal to ``active_states`` in the
  statement that writes them, whoever writes (AFTER INSERT; AFTER UPDATE OF active_states,
  chart_id when either changed: only the states exited and entered are written; AFTER DELETE);
- drops the GIN index.

Reversed: the GIN index is rebuilt, the triggers and the table dropped.
"""

from typing import Any

import django.db.models.deletion
import statecharts.models.fields
from django.db import migrations, models

# PostgreSQL: one PL/pgSQL function for the three triggers. An update moves an exited
# state's row to an entered state (one row version, one index entry), and deletes or inserts
# the rest; a change of chart rewrites them all.
# The states a row's active_states holds: the strings of its array. A damaged value (not an
# array, or with other elements) holds no states rather than failing every write of its row.
_POSTGRES_STATES_OF = """
CREATE OR REPLACE FUNCTION statecharts_states_of(states jsonb) RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(array_agg(DISTINCT e #>> '{}'), '{}')
    FROM jsonb_array_elements(
        CASE WHEN jsonb_typeof(states) = 'array' THEN states ELSE '[]'::jsonb END
    ) e
    WHERE jsonb_typeof(e) = 'string'
$$
"""
_POSTGRES_FUNCTION = """
CREATE OR REPLACE FUNCTION statecharts_execution_states() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    exited text[];
    entered text[];
    pairs integer;
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO statecharts_executionstate (state, chart_id, execution_id)
        SELECT unnest(statecharts_states_of(NEW.active_states)), NEW.chart_id, NEW.id
        ON CONFLICT DO NOTHING;
        RETURN NULL;
    END IF;
    IF TG_OP = 'DELETE' OR OLD.chart_id IS DISTINCT FROM NEW.chart_id
            OR OLD.id IS DISTINCT FROM NEW.id THEN
        -- (by the primary key, from the states it held: no index on execution_id is needed)
        DELETE FROM statecharts_executionstate
        WHERE state = ANY(statecharts_states_of(OLD.active_states))
        AND chart_id = OLD.chart_id AND execution_id = OLD.id;
        IF TG_OP = 'UPDATE' THEN
            INSERT INTO statecharts_executionstate (state, chart_id, execution_id)
            SELECT unnest(statecharts_states_of(NEW.active_states)), NEW.chart_id, NEW.id
            ON CONFLICT DO NOTHING;
        END IF;
        RETURN NULL;
    END IF;
    exited := ARRAY(SELECT unnest(statecharts_states_of(OLD.active_states))
                    EXCEPT SELECT unnest(statecharts_states_of(NEW.active_states)));
    entered := ARRAY(SELECT unnest(statecharts_states_of(NEW.active_states))
                     EXCEPT SELECT unnest(statecharts_states_of(OLD.active_states)));
    pairs := least(cardinality(exited), cardinality(entered));
    IF pairs > 0 THEN
        UPDATE statecharts_executionstate m SET state = p.entered
        FROM unnest(exited[1:pairs], entered[1:pairs]) AS p(exited, entered)
        WHERE m.state = p.exited AND m.chart_id = NEW.chart_id AND m.execution_id = NEW.id;
    END IF;
    IF cardinality(exited) > pairs THEN
        DELETE FROM statecharts_executionstate
        WHERE state = ANY(exited[pairs + 1:]) AND chart_id = NEW.chart_id
        AND execution_id = NEW.id;
    END IF;
    IF cardinality(entered) > pairs THEN
        INSERT INTO statecharts_executionstate (state, chart_id, execution_id)
        SELECT unnest(entered[pairs + 1:]), NEW.chart_id, NEW.id
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END $$
"""

POSTGRES_TRIGGERS = (
    _POSTGRES_STATES_OF,
    _POSTGRES_FUNCTION,
    "CREATE TRIGGER statecharts_execution_states_insert AFTER INSERT"
    " ON statecharts_execution FOR EACH ROW EXECUTE FUNCTION statecharts_execution_states()",
    "CREATE TRIGGER statecharts_execution_states_update"
    " AFTER UPDATE OF active_states, chart_id, id ON statecharts_execution FOR EACH ROW"
    " WHEN (OLD.active_states IS DISTINCT FROM NEW.active_states"
    " OR OLD.chart_id IS DISTINCT FROM NEW.chart_id OR OLD.id IS DISTINCT FROM NEW.id)"
    " EXECUTE FUNCTION statecharts_execution_states()",
    "CREATE TRIGGER statecharts_execution_states_delete AFTER DELETE"
    " ON statecharts_execution FOR EACH ROW EXECUTE FUNCTION statecharts_execution_states()",
)
POSTGRES_DROP_TRIGGERS = (
    "DROP TRIGGER IF EXISTS statecharts_execution_states_insert ON statecharts_execution",
    "DROP TRIGGER IF EXISTS statecharts_execution_states_update ON statecharts_execution",
    "DROP TRIGGER IF EXISTS statecharts_execution_states_delete ON statecharts_execution",
    "DROP FUNCTION IF EXISTS statecharts_execution_states()",
    "DROP FUNCTION IF EXISTS statecharts_states_of(jsonb)",
)
POSTGRES_BACKFILL = (
    # (no step may change a configuration between the copy and the triggers)
    "LOCK TABLE statecharts_execution IN SHARE MODE",
    _POSTGRES_STATES_OF,
    "INSERT INTO statecharts_executionstate (state, chart_id, execution_id)"
    " SELECT DISTINCT s, e.chart_id, e.id FROM statecharts_execution e,"
    " unnest(statecharts_states_of(e.active_states)) s",
)
GIN_INDEX = (
    "CREATE INDEX IF NOT EXISTS statecharts_execution_active_states"
    " ON statecharts_execution USING gin (active_states jsonb_path_ops)"
)
DROP_GIN_INDEX = "DROP INDEX IF EXISTS statecharts_execution_active_states"

# SQLite: active_states is JSON text; json_each reads it. A changed row deletes the states it
# left and inserts the ones it entered (all of them when its chart changed).
SQLITE_TRIGGERS = (
    """CREATE TRIGGER statecharts_execution_states_insert AFTER INSERT ON statecharts_execution
BEGIN
    INSERT OR IGNORE INTO statecharts_executionstate (state, chart_id, execution_id)
    SELECT DISTINCT value, NEW.chart_id, NEW.id FROM json_each(CASE WHEN json_type(NEW.active_states) = 'array'
        THEN NEW.active_states ELSE '[]' END)
    WHERE type = 'text';
END""",
    """CREATE TRIGGER statecharts_execution_states_update
AFTER UPDATE OF active_states, chart_id, id ON statecharts_execution
WHEN OLD.active_states IS NOT NEW.active_states OR OLD.chart_id IS NOT NEW.chart_id
    OR OLD.id IS NOT NEW.id
BEGIN
    DELETE FROM statecharts_executionstate
    WHERE state IN (SELECT value FROM json_each(CASE WHEN json_type(OLD.active_states) = 'array'
        THEN OLD.active_states ELSE '[]' END) WHERE type = 'text')
    AND chart_id = OLD.chart_id AND execution_id = OLD.id
    AND (OLD.chart_id IS NOT NEW.chart_id OR OLD.id IS NOT NEW.id
         OR state NOT IN (SELECT value FROM json_each(CASE WHEN json_type(NEW.active_states) = 'array'
        THEN NEW.active_states ELSE '[]' END) WHERE type = 'text'));
    INSERT OR IGNORE INTO statecharts_executionstate (state, chart_id, execution_id)
    SELECT DISTINCT value, NEW.chart_id, NEW.id FROM json_each(CASE WHEN json_type(NEW.active_states) = 'array'
        THEN NEW.active_states ELSE '[]' END)
    WHERE type = 'text';
END""",
    """CREATE TRIGGER statecharts_execution_states_delete AFTER DELETE ON statecharts_execution
BEGIN
    DELETE FROM statecharts_executionstate
    WHERE state IN (SELECT value FROM json_each(CASE WHEN json_type(OLD.active_states) = 'array'
        THEN OLD.active_states ELSE '[]' END) WHERE type = 'text')
    AND chart_id = OLD.chart_id AND execution_id = OLD.id;
END""",
)
SQLITE_DROP_TRIGGERS = (
    "DROP TRIGGER IF EXISTS statecharts_execution_states_insert",
    "DROP TRIGGER IF EXISTS statecharts_execution_states_update",
    "DROP TRIGGER IF EXISTS statecharts_execution_states_delete",
)
SQLITE_BACKFILL = (
    "INSERT INTO statecharts_executionstate (state, chart_id, execution_id)"
    " SELECT DISTINCT j.value, e.chart_id, e.id FROM statecharts_execution e,"
    " json_each(CASE WHEN json_type(e.active_states) = 'array' THEN e.active_states"
    " ELSE '[]' END) j WHERE j.type = 'text'",
)


def _run(schema_editor: Any, statements: tuple[str, ...]) -> None:
    for statement in statements:
        schema_editor.execute(statement, params=None)


def install(apps: Any, schema_editor: Any) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        _run(schema_editor, (*POSTGRES_BACKFILL, *POSTGRES_TRIGGERS, DROP_GIN_INDEX))
    elif vendor == "sqlite":
        _run(schema_editor, (*SQLITE_BACKFILL, *SQLITE_TRIGGERS))
    else:  # pragma: no cover (the project supports PostgreSQL and SQLite)
        raise NotImplementedError(f"no state index triggers for {vendor}")


def uninstall(apps: Any, schema_editor: Any) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        _run(schema_editor, (*POSTGRES_DROP_TRIGGERS, GIN_INDEX))
    elif vendor == "sqlite":
        _run(schema_editor, SQLITE_DROP_TRIGGERS)


class Migration(migrations.Migration):

    dependencies = [
        ('statecharts', '0014_operated_disposition'),
    ]

    operations = [
        migrations.AlterField(
            model_name='execution',
            name='active_states',
            field=statecharts.models.fields.PortableJSONField(default=list, help_text='Every active state, ancestors included, after the last step (for queries: Execution.objects.in_state, through ExecutionState).'),
        ),
        migrations.CreateModel(
            name='ExecutionState',
            fields=[
                ('pk', models.CompositePrimaryKey('state', 'chart_id', 'execution_id', blank=True, editable=False, primary_key=True, serialize=False)),
                ('state', models.TextField()),
                ('chart', models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='statecharts.chart')),
                ('execution', models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='statecharts.execution')),
            ],
            options={
                'default_permissions': (),
            },
        ),
        migrations.RunPython(install, uninstall),
    ]
