"""The state index's trigger without queries of its own for a step (issue 31).

Migration 0015's PL/pgSQL function computed the states a change of ``active_states`` exited
and entered with two queries, each calling the SQL function ``statecharts_states_of`` twice;
PostgreSQL plans an SQL function's body again at every call it cannot inline, so every step
that changed the configuration paid four plannings and two queries before its one write:
about 370 us of server CPU per step, measured (a server-side loop of UPDATEs of
``active_states``, the backend's CPU time; ``benchmarks/JOURNAL.md``, 2026-12-07), where
django-fsm-2's whole step costs the server about 900-1,000 us.

The function below (the same triggers call it) reads the two arrays element by element with
plain expressions (``->``, ``?``, ``#>>``: no query, no planning), and writes the rows with
statements whose plans PL/pgSQL keeps for the connection: for a step that moves one state,
one single-row ``UPDATE`` by the primary key (about 45 us of server CPU per step, measured
the same way). Its rows are exactly 0015's: one per distinct string of the array, nothing for
a damaged value (not an array, or other elements), the rows of a row whose chart (or id)
changes rewritten, and an execution's rows deleted with it (by the primary key, from the
states it held). SQLite's triggers are unchanged.

Reversed: 0015's function again.
"""

from importlib import import_module
from typing import Any

from django.db import migrations

POSTGRES_FUNCTION = """
CREATE OR REPLACE FUNCTION statecharts_execution_states() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    exited text[] := '{}';
    entered text[] := '{}';
    element jsonb;
    state text;
    pairs integer;
    i integer;
BEGIN
    IF TG_OP = 'DELETE' OR OLD.chart_id IS DISTINCT FROM NEW.chart_id
            OR OLD.id IS DISTINCT FROM NEW.id THEN
        -- (by the primary key, from the states it held: no index on execution_id is needed)
        DELETE FROM statecharts_executionstate
        WHERE statecharts_executionstate.state IN (
            SELECT e #>> '{}' FROM jsonb_array_elements(CASE WHEN
                jsonb_typeof(OLD.active_states) = 'array' THEN OLD.active_states
                ELSE '[]' END) e WHERE jsonb_typeof(e) = 'string')
        AND chart_id = OLD.chart_id AND execution_id = OLD.id;
        IF TG_OP = 'DELETE' THEN
            RETURN NULL;
        END IF;
    END IF;
    IF TG_OP = 'INSERT' OR OLD.chart_id IS DISTINCT FROM NEW.chart_id
            OR OLD.id IS DISTINCT FROM NEW.id THEN
        INSERT INTO statecharts_executionstate (state, chart_id, execution_id)
        SELECT DISTINCT e #>> '{}', NEW.chart_id, NEW.id
        FROM jsonb_array_elements(CASE WHEN jsonb_typeof(NEW.active_states) = 'array'
            THEN NEW.active_states ELSE '[]' END) e
        WHERE jsonb_typeof(e) = 'string'
        ON CONFLICT DO NOTHING;
        RETURN NULL;
    END IF;
    -- The states exited and entered, element by element: plain expressions, no query.
    IF jsonb_typeof(OLD.active_states) = 'array' THEN
        FOR i IN 0 .. jsonb_array_length(OLD.active_states) - 1 LOOP
            element := OLD.active_states -> i;
            IF jsonb_typeof(element) = 'string' THEN
                state := element #>> '{}';
                IF NOT (jsonb_typeof(NEW.active_states) = 'array'
                        AND NEW.active_states ? state)
                        AND NOT state = ANY(exited) THEN
                    exited := exited || state;
                END IF;
            END IF;
        END LOOP;
    END IF;
    IF jsonb_typeof(NEW.active_states) = 'array' THEN
        FOR i IN 0 .. jsonb_array_length(NEW.active_states) - 1 LOOP
            element := NEW.active_states -> i;
            IF jsonb_typeof(element) = 'string' THEN
                state := element #>> '{}';
                IF NOT (jsonb_typeof(OLD.active_states) = 'array'
                        AND OLD.active_states ? state)
                        AND NOT state = ANY(entered) THEN
                    entered := entered || state;
                END IF;
            END IF;
        END LOOP;
    END IF;
    -- An exited state's row moves to an entered state (one row version, one index entry);
    -- the exits and entries left over are deleted and inserted.
    pairs := least(cardinality(exited), cardinality(entered));
    FOR i IN 1 .. pairs LOOP
        UPDATE statecharts_executionstate SET state = entered[i]
        WHERE statecharts_executionstate.state = exited[i] AND chart_id = NEW.chart_id
        AND execution_id = NEW.id;
    END LOOP;
    IF cardinality(exited) > pairs THEN
        DELETE FROM statecharts_executionstate
        WHERE statecharts_executionstate.state = ANY(exited[pairs + 1:])
        AND chart_id = NEW.chart_id AND execution_id = NEW.id;
    END IF;
    IF cardinality(entered) > pairs THEN
        INSERT INTO statecharts_executionstate (state, chart_id, execution_id)
        SELECT unnest(entered[pairs + 1:]), NEW.chart_id, NEW.id
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END $$
"""


def install(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(POSTGRES_FUNCTION, params=None)


def uninstall(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        previous = import_module("statecharts.migrations.0015_state_index")
        schema_editor.execute(previous._POSTGRES_FUNCTION, params=None)


class Migration(migrations.Migration):
    dependencies = [
        ("statecharts", "0015_state_index"),
    ]

    operations = [
        migrations.RunPython(install, uninstall),
    ]
