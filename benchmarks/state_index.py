"""The state index, measured: candidate designs for ``in_state`` against a step's WAL (issue 31).

Every durable step UPDATEs its execution row. Today that UPDATE writes ``active_states``, which
a GIN index covers, so PostgreSQL can never make it a HOT update: each of the table's indexes
takes a new entry on every step. This script measures, in one harness and on raw SQL (no
Django, no interpreter: the database's share of a step only), what each candidate design of
the state index costs per step and what it gives back for ``in_state``:

- ``gin``: today's schema (migrations up to 0012): the execution table with its indexes and
  ``GIN (active_states jsonb_path_ops)``, fastupdate on, the default 4 MB pending list;
- ``gin_nofastupdate``: the same GIN with ``fastupdate = off`` (no pending list: each entry
  goes straight into the tree);
- ``gin_pending64k``: the same GIN with ``gin_pending_list_limit = 64`` (kB): the pending
  list flushed by the inserting step every few hundred steps instead of every few thousand;
- ``membership``: no state index on the execution row; a narrow table (chart_id, state,
  execution_id), one row per active state, its only index the primary key (chart_id, state,
  execution_id); a step moves the row of a state it exited to a state it entered (an
  UPDATE), deletes the exits and inserts the entries left over, in the same statement as its
  UPDATE of the execution (data-modifying CTEs), so never stale; ``membership_byexec``: the
  same plus an index on execution_id (what deleting by execution, Django's CASCADE, needs);
  ``membership_trigger``: the same moves made by a trigger on the execution table (the step
  sends today's statement; any writer of ``active_states`` keeps the table right);
- ``config_code``: a small int per distinct configuration of a chart (a ``configurations``
  table: chart_id, code, active_states + GIN), stored on the execution row, btree
  (chart_id, config_code) replacing the chart_id index; ``in_state`` = the codes whose
  configuration contains S, then the executions with those codes;
- ``side_gin``: ``active_states`` moved to a side row (execution_id primary key, chart_id,
  active_states + GIN), written only when the configuration changes; the execution row's
  indexed columns are unchanged by most steps, so its UPDATE can be HOT;
- ``side_code``: the side row holds the configuration code instead (btree (chart_id,
  config_code)), the two ideas together;
- ``noindex``: today's schema without the GIN index (the floor: what a step would cost with
  no state index at all; ``in_state`` is then a sequential scan);
- ``fsm`` and ``fsm_indexed``: the peer, django-fsm-2 as ``benchmarks/bench_peers`` models it
  (``FsmDocument``: id, state varchar(50), count, limit, updated; ``FsmAudit`` with its
  foreign key index), with the statements Django emits for ``select_for_update().get()``,
  ``save()`` and ``create()`` (client-side binding, not prepared, as Django's default), and
  with ``FSMField(db_index=True)`` (Django then makes two indexes: the btree and the
  ``varchar_pattern_ops`` copy).

Our candidates' step is the stepper's on PostgreSQL (``statecharts/stepper/postgres.py``):
BEGIN, the lock (``SELECT`` every column ``FOR UPDATE``, with the chart row's version), one
``WITH updated AS (UPDATE ...) INSERT INTO history ...`` statement (the state index's writes
are more CTEs of it), COMMIT; prepared statements; ``synchronous_commit`` as the server has
it. The chart is the 3-state cycle of ``benchmarks/many_executions.py`` (a -> b -> c -> a):
every step changes the configuration, the worst case for a state index. The execution row
and the history row carry the sizes a real step writes (a 466-byte position blob, the
history row's JSON as the stepper writes it).

Three measures:

1. **WAL per step** (deterministic; lead with it). One process takes ``--wal-steps`` steps to
   random rows (after ``--wal-warmup`` steps, so the pages have reached their steady state),
   the rows' autovacuum off for the window; ``pg_walinspect`` reads the records between the
   LSNs before and after, keeping those of this database's relations and of the steps'
   transactions (other databases' work on the server is left out). Reported: records and
   bytes per step (bytes without full-page images, and the FPI bytes apart, which depend on
   when the last checkpoint was), the record mix, the share of the execution UPDATEs that
   were HOT (``Heap/HOT_UPDATE`` records against all UPDATE records of the main table; also
   ``pg_stat_user_tables.n_tup_hot_upd``), and the same per step with the deferred upkeep
   counted in (the GIN pending list flushed with ``gin_clean_pending_list``, then a
   ``VACUUM`` of the tables).
2. **Steps/s** at ``--processes`` (default 1 and 4) for each of ``--executions`` (default
   1,000): persistent worker processes, each ``--steps`` steps to random rows, all starting at
   one moment; rounds interleave the candidates (order rotated each round); reported as the
   median and range over ``--rounds``, and the ratio to ``fsm`` and ``fsm_indexed`` in the
   same round (median and range of the per-round ratios).
3. **in_state at ``--state-rows``** (default 1,000,000; 0 skips): per candidate with a state
   index, its tables rebuilt with that many executions (0.1% in a rare state under a
   compound parent, 10% in a parallel state's children, the rest in a, b or c), VACUUM
   ANALYZEd (a settled table), then "chart 1's executions in S": ``count(*)`` and the first
   page (100 ids, newest first), for a rare and a common state, timed ``--query-rounds``
   times; every candidate's counts must agree (exactness).

Afterwards every candidate's rows are checked: each execution's history rows match its
``steps``, and its state index (membership rows, side row, code) says exactly its
``active_states``.

Usage (PostgreSQL only; the database ``--database``, default ``bench_hstate``, is created on
the server of ``--pg-url`` and dropped afterwards unless ``--keep``)::

    python benchmarks/state_index.py [--executions 1000 [100000]] [--processes 1 4]
        [--steps 300] [--rounds 7] [--wal-steps 2000] [--state-rows 1000000]
        [--candidates gin membership ...] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import random
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection as Pipe
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

DEFAULT_PG_URL = "postgres://root@127.0.0.1:5432/postgres"
DEFAULT_DATABASE = "bench_hstate"
CYCLE = ("a", "b", "c")
CHART_ID = 1

# What a real step of the benchmark chart writes (captured from ``stepper.send`` on
# PostgreSQL, 2026-12-07): the position blob (466 bytes; ``count`` changes), the history row.
POSITION = (
    '{"format":"scxml-position","version":2,"chart":{"sha256":"98c1bd50fb4dec601edd3d046fc7ef0'
    '88bbf731db2e6f9f6c84dac0ec1d0f191","name":"bench_many","version":"1"},"state":{"session_'
    'id":"595ea9028d024e54aa77fb7177490935","name":"bench_many","configuration":[%d],"interna'
    'l_queue":[],"history":{},"datamodel":{"count":%d,"limit":1000000000},"invocations":[],"ru'
    'nning":true,"bound":[0,1,2,3],"counters":[0,0,0,5,4,0,0],"parent_session_id":null,"invok'
    'eid":null,"outcome":null}}'
)
HISTORY_INPUT = {
    "kind": "event",
    "event": {
        "data": None,
        "name": "advance",
        "type": "external",
        "origin": None,
        "sendid": None,
        "invokeid": None,
        "origintype": None,
    },
}
REGISTERED_TYPES = {
    "send": {},
    "invoke": ["http://www.w3.org/TR/scxml", "http://www.w3.org/TR/scxml/", "scxml", "task"],
    "timers": True,
}
SHA256 = "d2bd789a5821b6b82d2dcf1845cc5bffe6b599d86f1b39b8374aa8ae12b2766f"

OURS = (
    "gin",
    "gin_nofastupdate",
    "gin_pending64k",
    "membership",
    "membership_byexec",
    "membership_trigger",
    "shipped",
    "config_code",
    "side_gin",
    "side_code",
    "noindex",
)
MEMBERSHIP = ("membership", "membership_byexec", "membership_trigger", "shipped")
PEERS = ("fsm", "fsm_indexed")
ALL = OURS + PEERS
INDEXED = ("gin", "membership", "shipped", "config_code", "side_gin", "side_code", "noindex")
CODES = {("a",): 1, ("b",): 2, ("c",): 3, ("f", "r"): 4, ("p", "s", "t"): 5}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def url_for(pg_url: str, database: str) -> str:
    base, _, _ = pg_url.rpartition("/")
    return f"{base}/{database}"


def load_average() -> str:
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return "?"


# ---------------------------------------------------------------------------------------
# Schemas: the real execution and history tables (pg_dump of migrations up to 0012), then
# each candidate's changes.

EXECUTION_COLUMNS = """
    id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    status varchar(20) NOT NULL,
    session_id varchar(64) NOT NULL UNIQUE,
    "position" bytea NOT NULL,
    configuration jsonb NOT NULL,
    steps integer NOT NULL CHECK (steps >= 0),
    donedata jsonb,
    outcome varchar(40) NOT NULL,
    failure_reason text NOT NULL,
    business_key varchar(200),
    metadata jsonb NOT NULL,
    created timestamptz NOT NULL,
    updated timestamptz NOT NULL,
    ended timestamptz,
    chart_id bigint NOT NULL REFERENCES {s}.chart (id) DEFERRABLE INITIALLY DEFERRED,
    donedata_error text NOT NULL,
    invoke_ordinal integer CHECK (invoke_ordinal >= 0),
    invokeid varchar(200) NOT NULL,
    parent_id bigint,
    active_states jsonb NOT NULL,
    erased timestamptz,
    subject_content_type_id integer,
    subject_object_id varchar(64),
    tracing boolean NOT NULL DEFAULT false{extra}
"""

EXECUTION_INDEXES = """
CREATE INDEX ON {s}.execution (status);
CREATE UNIQUE INDEX ON {s}.execution (parent_id, invoke_ordinal) WHERE parent_id IS NOT NULL;
CREATE INDEX ON {s}.execution (subject_content_type_id, subject_object_id)
    WHERE subject_content_type_id IS NOT NULL;
CREATE UNIQUE INDEX ON {s}.execution (chart_id, business_key) WHERE business_key IS NOT NULL;
"""

HISTORY = """
CREATE TABLE {s}.history (
    id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    seq integer NOT NULL CHECK (seq >= 0),
    input jsonb NOT NULL,
    disposition varchar(20) NOT NULL,
    status_after varchar(20) NOT NULL,
    configuration_after jsonb NOT NULL,
    effects jsonb NOT NULL,
    reachability jsonb NOT NULL,
    position_sha256 varchar(64) NOT NULL,
    created timestamptz NOT NULL,
    execution_id bigint NOT NULL REFERENCES {s}.execution (id) DEFERRABLE INITIALLY DEFERRED,
    cause jsonb,
    idempotency_key varchar(200),
    reason text NOT NULL,
    registered_types jsonb NOT NULL,
    caller_context jsonb,
    codec varchar(40) NOT NULL DEFAULT 'json',
    CONSTRAINT {name}_unique_seq UNIQUE (execution_id, seq)
);
CREATE UNIQUE INDEX ON {s}.history (execution_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
"""

# membership_trigger: the server keeps the membership rows, whoever writes active_states (the
# stepper, a chart migration, raw SQL): the same moves as the stepper's CTEs, in a trigger.
TRIGGER = """
CREATE FUNCTION {s}.sync_membership() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    exited text[];
    entered text[];
    pairs integer;
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO {s}.membership (chart_id, state, execution_id)
        SELECT NEW.chart_id, jsonb_array_elements_text(NEW.active_states), NEW.id;
        RETURN NULL;
    END IF;
    IF TG_OP = 'DELETE' THEN  -- (by the primary key: no index on execution_id is needed)
        DELETE FROM {s}.membership WHERE chart_id = OLD.chart_id AND execution_id = OLD.id
        AND state IN (SELECT jsonb_array_elements_text(OLD.active_states));
        RETURN NULL;
    END IF;
    SELECT coalesce(array_agg(x), '{{}}') INTO exited
    FROM jsonb_array_elements_text(OLD.active_states) x WHERE NOT NEW.active_states ? x;
    SELECT coalesce(array_agg(x), '{{}}') INTO entered
    FROM jsonb_array_elements_text(NEW.active_states) x WHERE NOT OLD.active_states ? x;
    pairs := least(cardinality(exited), cardinality(entered));
    IF pairs > 0 THEN
        UPDATE {s}.membership m SET state = p.entered
        FROM unnest(exited[1:pairs], entered[1:pairs]) AS p(exited, entered)
        WHERE m.chart_id = NEW.chart_id AND m.state = p.exited AND m.execution_id = NEW.id;
    END IF;
    IF cardinality(exited) > pairs THEN
        DELETE FROM {s}.membership WHERE chart_id = NEW.chart_id
        AND state = ANY(exited[pairs + 1:]) AND execution_id = NEW.id;
    END IF;
    IF cardinality(entered) > pairs THEN
        INSERT INTO {s}.membership (chart_id, state, execution_id)
        SELECT NEW.chart_id, unnest(entered[pairs + 1:]), NEW.id;
    END IF;
    RETURN NULL;
END $$;;
CREATE TRIGGER sync_membership_insert AFTER INSERT ON {s}.execution
    FOR EACH ROW EXECUTE FUNCTION {s}.sync_membership();;
CREATE TRIGGER sync_membership_delete AFTER DELETE ON {s}.execution
    FOR EACH ROW EXECUTE FUNCTION {s}.sync_membership();;
CREATE TRIGGER sync_membership_update AFTER UPDATE OF active_states ON {s}.execution
    FOR EACH ROW WHEN (OLD.active_states IS DISTINCT FROM NEW.active_states)
    EXECUTE FUNCTION {s}.sync_membership()
"""


def shipped_ddl(s: str) -> list[str]:
    """shipped: what statecharts ships (migrations 0015 and 0016): its key (state first), its
    PL/pgSQL function (0016's, which replaces 0015's) and triggers, on this schema's tables."""
    import ast

    def constants_of(migration: str, wanted: set[str]) -> dict[str, Any]:
        path = os.path.join(
            os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
            "statecharts",
            "migrations",
            migration,
        )
        with open(path, encoding="utf-8") as file:
            tree = ast.parse(file.read())
        # (only its SQL constants: importing the migration would need Django's settings)
        found: dict[str, Any] = {}
        for node in tree.body:
            names = {getattr(t, "id", "") for t in getattr(node, "targets", ())}
            if isinstance(node, ast.Assign) and names & wanted:
                exec(compile(ast.Module([node], []), path, "exec"), found)
        return found

    triggers = constants_of("0015_state_index.py", {"_POSTGRES_FUNCTION", "POSTGRES_TRIGGERS"})
    function = constants_of("0016_state_index_trigger_without_queries.py", {"POSTGRES_FUNCTION"})[
        "POSTGRES_FUNCTION"
    ]

    def here(sql: str) -> str:
        sql = sql.replace("statecharts_executionstate", f"{s}.membership")
        sql = sql.replace("FUNCTION statecharts_execution_states()", f"FUNCTION {s}.sync_states()")
        return re.sub(r"\bstatecharts_execution\b", f"{s}.execution", sql)

    primary = f"ALTER TABLE {s}.membership ADD PRIMARY KEY (state, chart_id, execution_id)"
    return [primary, *(here(x) for x in (*triggers["POSTGRES_TRIGGERS"], function))]


GIN = "CREATE INDEX {name} ON {s}.execution USING gin (active_states jsonb_path_ops){opts};"


def ddl(candidate: str, s: str) -> list[str]:
    """The statements that make candidate's tables in schema ``s`` (no rows, and for our
    candidates without the state index itself: ``index_ddl`` adds it after the rows)."""
    if candidate in PEERS:
        return [
            f"CREATE TABLE {s}.document (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,"
            ' state varchar(50) NOT NULL, count integer NOT NULL, "limit" integer NOT NULL,'
            " updated timestamptz)",
            f"CREATE TABLE {s}.audit (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,"
            f" document_id bigint NOT NULL REFERENCES {s}.document (id)"
            " DEFERRABLE INITIALLY DEFERRED, event varchar(50) NOT NULL,"
            " source varchar(50) NOT NULL, target varchar(50) NOT NULL,"
            " created timestamptz NOT NULL)",
            f"CREATE INDEX ON {s}.audit (document_id)",
        ]
    extra = ",\n    config_code integer NOT NULL" if candidate == "config_code" else ""
    statements = [
        f"CREATE TABLE {s}.chart (id bigint PRIMARY KEY, source text NOT NULL)",
        f"INSERT INTO {s}.chart VALUES (1, repeat('x', 600)), (2, repeat('y', 600))",
        f"CREATE TABLE {s}.execution ({EXECUTION_COLUMNS.format(s=s, extra=extra)})",
        *[x for x in EXECUTION_INDEXES.format(s=s).split(";") if x.strip()],
        *[x for x in HISTORY.format(s=s, name=s).split(";") if x.strip()],
    ]
    if candidate != "config_code":  # (config_code's (chart_id, code) index starts with it)
        statements.append(f"CREATE INDEX ON {s}.execution (chart_id)")
    if candidate in MEMBERSHIP:
        statements.append(
            f"CREATE TABLE {s}.membership (chart_id bigint NOT NULL, state text NOT NULL,"
            f" execution_id bigint NOT NULL REFERENCES {s}.execution (id)"
            " DEFERRABLE INITIALLY DEFERRED)"
        )
    if candidate == "config_code":
        statements.append(
            f"CREATE TABLE {s}.configurations (chart_id bigint NOT NULL, code integer NOT NULL,"
            " active_states jsonb NOT NULL, PRIMARY KEY (chart_id, code))"
        )
    if candidate == "side_gin":
        statements.append(
            f"CREATE TABLE {s}.side (execution_id bigint PRIMARY KEY REFERENCES {s}.execution"
            " (id) DEFERRABLE INITIALLY DEFERRED, chart_id bigint NOT NULL,"
            " active_states jsonb NOT NULL)"
        )
    if candidate == "side_code":
        statements.append(
            f"CREATE TABLE {s}.side (execution_id bigint PRIMARY KEY REFERENCES {s}.execution"
            " (id) DEFERRABLE INITIALLY DEFERRED, chart_id bigint NOT NULL,"
            " config_code integer NOT NULL)"
        )
    return statements


def index_ddl(candidate: str, s: str) -> list[str]:
    """The state index itself (made after the rows are in, as a migration would)."""
    if candidate == "gin":
        return [GIN.format(name="gin_active", s=s, opts="")]
    if candidate == "gin_nofastupdate":
        return [GIN.format(name="gin_active", s=s, opts=" WITH (fastupdate = off)")]
    if candidate == "gin_pending64k":
        return [GIN.format(name="gin_active", s=s, opts=" WITH (gin_pending_list_limit = 64)")]
    if candidate in MEMBERSHIP:
        primary = f"ALTER TABLE {s}.membership ADD PRIMARY KEY (chart_id, state, execution_id)"
        if candidate == "membership_byexec":  # (what Django's CASCADE would want to delete by)
            return [primary, f"CREATE INDEX ON {s}.membership (execution_id)"]
        if candidate == "membership_trigger":
            return [primary, *(x for x in TRIGGER.format(s=s).split(";;") if x.strip())]
        if candidate == "shipped":
            return shipped_ddl(s)
        return [primary]
    if candidate == "config_code":
        return [
            f"CREATE INDEX ON {s}.execution (chart_id, config_code)",
            f"CREATE INDEX ON {s}.configurations USING gin (active_states jsonb_path_ops)",
        ]
    if candidate == "side_gin":
        return [f"CREATE INDEX side_gin ON {s}.side USING gin (active_states jsonb_path_ops)"]
    if candidate == "side_code":
        return [f"CREATE INDEX ON {s}.side (chart_id, config_code)"]
    if candidate == "fsm_indexed":
        return [
            f"CREATE INDEX ON {s}.document (state)",
            f"CREATE INDEX ON {s}.document (state varchar_pattern_ops)",
        ]
    return []


def populate_sql(candidate: str, s: str, count: int, *, spread: bool) -> list[str]:
    """Rows for ``count`` executions. Not ``spread``: all in state a (the stepped rows).
    ``spread`` (the in_state rows): 0.1% in f/r (a compound state and its child), 10% in
    p/s/t (a parallel state and its two children), the rest in a, b or c; chart 1 for nine
    in ten, chart 2 for the rest."""
    if spread:
        states = (
            'CASE WHEN g % 1000 = 7 THEN \'["f", "r"]\' WHEN g % 10 = 3 THEN'
            ' \'["p", "s", "t"]\' ELSE \'["\' || chr(97 + g % 3) || \'"]\' END::jsonb'
        )
        chart = "CASE WHEN g % 10 = 9 THEN 2 ELSE 1 END"
    else:
        states, chart = "'[\"a\"]'::jsonb", "1"
    if candidate in PEERS:
        return [
            f"INSERT INTO {s}.document (state, count, \"limit\") SELECT 'a', 0, 1000000000"
            f" FROM generate_series(1, {count})",
            f"ANALYZE {s}.document",
        ]
    blob = POSITION % (0, 0)
    code = "".join(f" WHEN '{json.dumps(list(k))}'::jsonb THEN {v}" for k, v in CODES.items())
    extra_col = ", config_code" if candidate == "config_code" else ""
    extra_val = f", CASE st{code} END" if candidate == "config_code" else ""
    out = [
        f"INSERT INTO {s}.execution (status, session_id, position, configuration, steps,"
        " outcome, failure_reason, metadata, created, updated, chart_id, donedata_error,"
        f" invokeid, active_states{extra_col})"
        f" SELECT 'active', 'bench-' || g, convert_to('{blob}', 'UTF8'), st, 1, '', '', '{{}}',"
        f" now(), now(), {chart}, '', '', st{extra_val}"
        f" FROM (SELECT g, {states} AS st FROM generate_series(1, {count}) g) x ORDER BY g",
        f"INSERT INTO {s}.history (seq, input, disposition, status_after, configuration_after,"
        " effects, reachability, position_sha256, created, execution_id, reason,"
        " registered_types)"
        f" SELECT 1, '{json.dumps({'kind': 'start', 'data': None})}', 'applied', 'active',"
        f" active_states, '[]', '{{}}', '{SHA256}', now(), id, '',"
        f" '{json.dumps(REGISTERED_TYPES)}' FROM {s}.execution ORDER BY id",
    ]
    if candidate in MEMBERSHIP:
        out.append(
            f"INSERT INTO {s}.membership SELECT chart_id, jsonb_array_elements_text("
            f"active_states), id FROM {s}.execution"
        )
    if candidate == "config_code":
        for chart_id in (1, 2):
            for key, value in CODES.items():
                out.append(
                    f"INSERT INTO {s}.configurations VALUES ({chart_id}, {value},"
                    f" '{json.dumps(list(key))}')"
                )
    if candidate == "side_gin":
        out.append(f"INSERT INTO {s}.side SELECT id, chart_id, active_states FROM {s}.execution")
    if candidate == "side_code":
        out.append(
            f"INSERT INTO {s}.side SELECT id, chart_id, CASE active_states{code} END"
            f" FROM {s}.execution"
        )
    return out


def build(conn: psycopg.Connection, candidate: str, count: int, *, spread: bool = False) -> None:
    s = candidate
    conn.execute(f"DROP SCHEMA IF EXISTS {s} CASCADE")
    conn.execute(f"CREATE SCHEMA {s}")
    for statement in ddl(candidate, s):
        conn.execute(statement)
    for statement in populate_sql(candidate, s, count, spread=spread):
        conn.execute(statement)
    for statement in index_ddl(candidate, s):
        conn.execute(statement)
    conn.commit()


def tables_of(candidate: str) -> list[str]:
    if candidate in PEERS:
        return ["document", "audit"]
    extra = {
        "membership": ["membership"],
        "membership_byexec": ["membership"],
        "membership_trigger": ["membership"],
        "shipped": ["membership"],
        "config_code": ["configurations"],
        "side_gin": ["side"],
        "side_code": ["side"],
    }.get(candidate, [])
    return ["execution", "history", *extra]


# ---------------------------------------------------------------------------------------
# The step, per candidate.

LOCK = (
    "SELECT ((SELECT c.xmin::text || ',' || c.ctid::text FROM {s}.chart c WHERE c.id ="
    " e.chart_id)) AS version, e.id, e.chart_id, e.status, e.session_id, e.position,"
    " e.configuration, e.active_states, e.steps, e.donedata, e.donedata_error, e.outcome,"
    " e.failure_reason, e.business_key, e.parent_id, e.invoke_ordinal, e.invokeid, e.metadata,"
    " e.tracing, e.subject_content_type_id, e.subject_object_id, e.created, e.updated,"
    " e.ended, e.erased{extra} FROM {s}.execution e WHERE e.id = %s FOR UPDATE"
)
UPDATE = (
    "UPDATE {s}.execution SET position = %s, status = %s, configuration = %s,"
    " active_states = %s, steps = %s, updated = %s{extra} WHERE id = %s RETURNING id"
)
INSERT = (
    " INSERT INTO {s}.history (execution_id, seq, input, disposition, status_after,"
    " configuration_after, effects, reachability, registered_types, position_sha256, reason,"
    " idempotency_key, cause, codec, caller_context, created) VALUES ((SELECT id FROM updated),"
    " %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id"
)


@dataclass
class Stepper:
    """One candidate's step on one connection (the worker's hot loop calls ``step``)."""

    candidate: str
    conn: psycopg.Connection
    xids: list[int] | None = None  # the WAL window collects the steps' transaction ids
    _client: Any = field(default=None, init=False)

    def __post_init__(self) -> None:
        s = self.candidate
        self.lock = LOCK.format(s=s, extra=", e.config_code" if s == "config_code" else "")
        self.update = UPDATE.format(s=s, extra=", config_code = %s" if s == "config_code" else "")
        self.insert = INSERT.format(s=s)
        self.write_same = f"WITH updated AS ({self.update}){self.insert}"
        if s in ("membership", "membership_byexec"):
            # An exited state's row is moved to an entered state (an UPDATE: one heap record
            # and one index entry, where a DELETE and an INSERT write three); the exits and
            # entries left over are deleted and inserted.
            self.write_changed = (
                f"WITH updated AS ({self.update}), moved AS (UPDATE {s}.membership m SET"
                " state = p.entered FROM unnest(%s::text[], %s::text[]) AS p(exited, entered)"
                " WHERE m.chart_id = %s AND m.state = p.exited AND m.execution_id = %s),"
                f" gone AS (DELETE FROM {s}.membership WHERE chart_id = %s"
                " AND state = ANY(%s::text[]) AND execution_id = %s),"
                f" added AS (INSERT INTO {s}.membership (chart_id, state, execution_id)"
                f" SELECT %s, unnest(%s::text[]), %s){self.insert}"
            )
        elif s == "side_gin":
            self.write_changed = (
                f"WITH updated AS ({self.update}), side AS (UPDATE {s}.side SET active_states"
                f" = %s WHERE execution_id = %s){self.insert}"
            )
        elif s == "side_code":
            self.write_changed = (
                f"WITH updated AS ({self.update}), side AS (UPDATE {s}.side SET config_code"
                f" = %s WHERE execution_id = %s){self.insert}"
            )
        else:
            self.write_changed = self.write_same
        if s in PEERS:
            self._client = psycopg.ClientCursor(self.conn)
        self.now = time.time

    def step(self, pk: int) -> None:
        if self.candidate in PEERS:
            self._peer(pk)
        else:
            self._ours(pk)
        if self.xids is not None:
            self.xids.append(
                self.conn.execute("SELECT pg_current_xact_id()::text::bigint").fetchone()[0]
            )
        self.conn.commit()

    def _ours(self, pk: int) -> None:
        conn, s = self.conn, self.candidate
        row = conn.execute(self.lock, [pk], prepare=True).fetchone()
        configuration, steps = row[6], row[8]
        before = configuration[0]
        after = CYCLE[(CYCLE.index(before) + 1) % 3]
        count = steps // 3
        blob = (POSITION % (CYCLE.index(after), count)).encode()
        now = self._timestamp()
        new_config = Jsonb([after])
        params: list[Any] = [blob, "active", new_config, new_config, steps + 1, now]
        if s == "config_code":
            params.append(CODES[(after,)])
        params.append(pk)
        if s in ("membership", "membership_byexec"):
            # (this chart exits one state and enters one: one pair, nothing left over)
            params += [[before], [after], CHART_ID, pk, CHART_ID, [], pk, CHART_ID, [], pk]
        elif s == "side_gin":
            params += [new_config, pk]
        elif s == "side_code":
            params += [CODES[(after,)], pk]
        params += [
            steps + 1,
            Jsonb(HISTORY_INPUT),
            "applied",
            "active",
            new_config,
            Jsonb([{"kind": "datamodel_change"}] if before == "b" else []),
            Jsonb({}),
            Jsonb(REGISTERED_TYPES),
            SHA256,
            "",
            None,
            None,
            "json",
            None,
            now,
        ]
        sql = self.write_changed if before != after else self.write_same
        conn.execute(sql, params, prepare=True)

    def _peer(self, pk: int) -> None:
        s, cursor = self.candidate, self._client
        cursor.execute(
            f"SELECT {s}.document.id, {s}.document.state, {s}.document.count,"
            f' {s}.document."limit", {s}.document.updated FROM {s}.document'
            f" WHERE {s}.document.id = %s LIMIT 21 FOR UPDATE",
            [pk],
        )
        _id, state, count, limit, _updated = cursor.fetchone()
        target = CYCLE[(CYCLE.index(state) + 1) % 3]
        if state == "b":
            count += 1
        now = self._timestamp()
        cursor.execute(
            f'UPDATE {s}.document SET state = %s, count = %s, "limit" = %s, updated = %s'
            f" WHERE {s}.document.id = %s",
            [target, count, limit, now, pk],
        )
        cursor.execute(
            f"INSERT INTO {s}.audit (document_id, event, source, target, created)"
            f" VALUES (%s, %s, %s, %s, %s) RETURNING {s}.audit.id",
            [pk, "advance", state, target, now],
        )

    @staticmethod
    def _timestamp() -> Any:
        import datetime

        return datetime.datetime.now(datetime.UTC)


def connect(url: str) -> psycopg.Connection:
    return psycopg.connect(url, autocommit=False)


# ---------------------------------------------------------------------------------------
# Workers: persistent processes, one connection each.


def worker(url: str, index: int, pipe: Pipe) -> None:
    conn = connect(url)
    steppers: dict[str, Stepper] = {}
    rng = random.Random(1000 + index)
    tally: Counter[tuple[str, int]] = Counter()
    while True:
        command = pipe.recv()
        if command is None:
            break
        candidate, first, count, steps, warmup, start_at = command
        stepper = steppers.get(candidate) or steppers.setdefault(
            candidate, Stepper(candidate, conn)
        )
        chosen = [first + rng.randrange(count) for _ in range(steps + warmup)]
        for pk in chosen[:warmup]:
            stepper.step(pk)
        delay = start_at - time.time()
        if delay > 0:
            time.sleep(delay)
        cpu = time.process_time()
        began = time.time()
        for pk in chosen[warmup:]:
            stepper.step(pk)
        ended = time.time()
        for pk in chosen:
            tally[(candidate, pk)] += 1
        pipe.send((began, ended, time.process_time() - cpu))
    pipe.send(dict(tally))
    conn.close()


class Pool:
    def __init__(self, url: str, size: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.pipes: list[Pipe] = []
        self.processes = []
        for index in range(size):
            parent, child = context.Pipe()
            process = context.Process(target=worker, args=(url, index, child), daemon=True)
            process.start()
            self.pipes.append(parent)
            self.processes.append(process)

    def cell(
        self, candidate: str, first: int, count: int, processes: int, steps: int, warmup: int
    ) -> tuple[float, float]:
        start_at = time.time() + 0.3 + 0.002 * warmup * processes
        for pipe in self.pipes[:processes]:
            pipe.send((candidate, first, count, steps, warmup, start_at))
        answers = [pipe.recv() for pipe in self.pipes[:processes]]
        began = min(a[0] for a in answers)
        ended = max(a[1] for a in answers)
        cpu = sum(a[2] for a in answers) / (steps * processes)
        return steps * processes / (ended - began), cpu * 1e6

    def close(self) -> Counter[tuple[str, int]]:
        total: Counter[tuple[str, int]] = Counter()
        for pipe in self.pipes:
            pipe.send(None)
            total.update(pipe.recv())
        for process in self.processes:
            process.join(timeout=10)
        return total


# ---------------------------------------------------------------------------------------
# WAL per step.

_REL = re.compile(r"rel (\d+)/(\d+)/(\d+)")


def relation_names(conn: psycopg.Connection, candidate: str) -> dict[int, str]:
    rows = conn.execute(
        "SELECT c.relfilenode, c.relname FROM pg_class c JOIN pg_namespace n"
        " ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relfilenode <> 0",
        [candidate],
    ).fetchall()
    return {int(node): name for node, name in rows}


def set_autovacuum(conn: psycopg.Connection, candidate: str, on: bool) -> None:
    for table in tables_of(candidate):
        conn.execute(
            f"ALTER TABLE {candidate}.{table} SET (autovacuum_enabled = {str(on).lower()})"
        )
    conn.commit()


def wal_records(
    conn: psycopg.Connection, start: str, end: str, dboid: int, xids: set[int]
) -> list[tuple[Any, ...]]:
    # (pg_walinspect reads flushed WAL only; the WAL writer flushes within wal_writer_delay)
    for _ in range(200):
        if conn.execute("SELECT pg_current_wal_flush_lsn() >= %s::pg_lsn", [end]).fetchone()[0]:
            break
        time.sleep(0.05)
    rows = conn.execute(
        "SELECT xid::text::bigint, resource_manager, record_type, record_length, fpi_length,"
        " block_ref FROM pg_get_wal_records_info(%s, %s)",
        [start, end],
    ).fetchall()
    conn.commit()
    kept = []
    for xid, rm, kind, length, fpi, block_ref in rows:
        dbs = {int(m.group(2)) for m in _REL.finditer(block_ref or "")}
        if (dbs and dbs <= {dboid}) or (not dbs and xid in xids):
            kept.append((xid, rm, kind, length, fpi, block_ref))
    return kept


def summarize(records: list[tuple[Any, ...]], names: dict[int, str], steps: int) -> dict[str, Any]:
    mix: Counter[str] = Counter()
    hot = updates = 0
    for _xid, rm, kind, _length, _fpi, block_ref in records:
        match = _REL.search(block_ref or "")
        relation = names.get(int(match.group(3)), "?") if match else "-"
        label = f"{relation}: {rm}/{kind.split(' ')[0]}"
        mix[label] += 1
        if rm == "Heap" and relation in ("execution", "document"):
            if kind.startswith("HOT_UPDATE"):
                hot += 1
                updates += 1
            elif kind.startswith("UPDATE"):
                updates += 1
    total = sum(r[3] for r in records)
    fpi = sum(r[4] for r in records)
    return {
        "records_per_step": len(records) / steps,
        "bytes_per_step": (total - fpi) / steps,
        "fpi_bytes_per_step": fpi / steps,
        "hot_percent": 100.0 * hot / updates if updates else None,
        "mix_per_step": {k: round(v / steps, 3) for k, v in sorted(mix.items())},
    }


def stat_hot(conn: psycopg.Connection, candidate: str) -> tuple[int, int]:
    table = "document" if candidate in PEERS else "execution"
    conn.execute("SELECT pg_stat_clear_snapshot()")
    row = conn.execute(
        "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE schemaname = %s"
        " AND relname = %s",
        [candidate, table],
    ).fetchone()
    conn.commit()
    return int(row[0]), int(row[1])


def measure_wal(
    url: str, candidate: str, count: int, steps: int, warmup: int, seed: int
) -> dict[str, Any]:
    admin = connect(url)
    admin.autocommit = True
    dboid = admin.execute(
        "SELECT oid FROM pg_database WHERE datname = current_database()"
    ).fetchone()[0]
    set_autovacuum(admin, candidate, False)
    # A temporary slot holds the window's WAL segments until they are read (a checkpoint
    # may otherwise recycle them on a busy server); it goes when this session ends.
    admin.execute(
        "SELECT pg_create_physical_replication_slot(%s, true, true)",
        [f"bench_hstate_{os.getpid()}"],
    )
    first = first_id(admin, candidate)
    rng = random.Random(seed)
    conn = connect(url)
    stepper = Stepper(candidate, conn)
    for _ in range(warmup):
        stepper.step(first + rng.randrange(count))
    conn.close()  # (its statistics are flushed when it ends)
    upkeep(admin, candidate)
    time.sleep(1.2)
    upd0, hot0 = stat_hot(admin, candidate)
    # (cluster-wide, and flushed by a backend at most once a second or when it ends: read
    # with the warm-up's connection closed and again with the window's; a cross-check only)
    pg_wal0 = admin.execute("SELECT wal_records, wal_bytes FROM pg_stat_wal").fetchone()
    names = relation_names(admin, candidate)
    xids: list[int] = []
    conn = connect(url)
    stepper = Stepper(candidate, conn, xids=xids)
    stepper.step(first + rng.randrange(count))  # (prepares the statements outside the window)
    xids.clear()
    start = admin.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0]
    for _ in range(steps):
        stepper.step(first + rng.randrange(count))
    end = admin.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0]
    conn.close()
    time.sleep(1.2)
    upd1, hot1 = stat_hot(admin, candidate)
    pg_wal1 = admin.execute("SELECT wal_records, wal_bytes FROM pg_stat_wal").fetchone()
    xid_set = {x % (1 << 32) for x in xids}
    result = summarize(wal_records(admin, start, end, dboid, xid_set), names, steps)
    result["pg_stat_wal_records_per_step"] = (pg_wal1[0] - pg_wal0[0]) / steps
    result["pg_stat_wal_bytes_per_step"] = float(pg_wal1[1] - pg_wal0[1]) / steps
    result["stat_hot_percent"] = 100.0 * (hot1 - hot0) / (upd1 - upd0) if upd1 > upd0 else None
    # The deferred upkeep of the window's steps (the warm-up's was done before it), counted
    # in: the GIN pending list flushed, then VACUUM.
    cleanup_start = admin.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0]
    upkeep(admin, candidate)
    cleanup_end = admin.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0]
    cleanup = wal_records(admin, cleanup_start, cleanup_end, dboid, set())
    result["cleanup_records_per_step"] = len(cleanup) / steps
    result["cleanup_bytes_per_step"] = sum(r[3] - r[4] for r in cleanup) / steps
    set_autovacuum(admin, candidate, True)
    admin.close()
    return result


def upkeep(admin: psycopg.Connection, candidate: str) -> None:
    """What the server does later for the steps (autovacuum, a pending list's flush), now."""
    for (index,) in admin.execute(
        "SELECT c.oid::regclass::text FROM pg_class c JOIN pg_namespace n ON n.oid ="
        " c.relnamespace JOIN pg_am a ON a.oid = c.relam WHERE n.nspname = %s"
        " AND a.amname = 'gin'",
        [candidate],
    ).fetchall():
        admin.execute("SELECT gin_clean_pending_list(%s::regclass)", [index])
    for table in tables_of(candidate):
        admin.execute(f"VACUUM {candidate}.{table}")


def first_id(conn: psycopg.Connection, candidate: str) -> int:
    table = "document" if candidate in PEERS else "execution"
    value = conn.execute(f"SELECT min(id) FROM {candidate}.{table}").fetchone()[0]
    conn.commit()
    return int(value)


# ---------------------------------------------------------------------------------------
# in_state at many rows.


def in_state_sql(candidate: str, state: str, *, page: bool) -> str:
    s = candidate
    contains = f"'{json.dumps([state])}'::jsonb"
    if candidate in ("gin", "noindex"):
        where = f"FROM {s}.execution e WHERE e.chart_id = 1 AND e.active_states @> {contains}"
    elif candidate in MEMBERSHIP:
        if not page:
            return (
                f"SELECT count(*) FROM {s}.membership m WHERE m.chart_id = 1"
                f" AND m.state = '{state}'"
            )
        where = (
            f"FROM {s}.execution e WHERE e.id IN (SELECT m.execution_id FROM {s}.membership m"
            f" WHERE m.chart_id = 1 AND m.state = '{state}')"
        )
    elif candidate == "config_code":
        where = (
            f"FROM {s}.execution e WHERE e.chart_id = 1 AND e.config_code = ANY(ARRAY("
            f"SELECT c.code FROM {s}.configurations c WHERE c.chart_id = 1"
            f" AND c.active_states @> {contains}))"
        )
    elif candidate == "side_gin":
        where = (
            f"FROM {s}.execution e WHERE e.id IN (SELECT x.execution_id FROM {s}.side x"
            f" WHERE x.chart_id = 1 AND x.active_states @> {contains})"
        )
    elif candidate == "side_code":
        where = (
            f"FROM {s}.execution e WHERE e.id IN (SELECT x.execution_id FROM {s}.side x"
            f" WHERE x.chart_id = 1 AND x.config_code = ANY(ARRAY(SELECT c.code FROM"
            f" {s}.configurations c WHERE c.chart_id = 1 AND c.active_states @> {contains})))"
        )
    else:
        raise ValueError(candidate)
    if page:
        return f"SELECT e.id {where} ORDER BY e.id DESC LIMIT 100"
    return f"SELECT count(*) {where}"


def measure_queries(url: str, candidate: str, rows: int, rounds: int) -> dict[str, Any]:
    conn = connect(url)
    conn.autocommit = True
    started = time.time()
    build(conn, candidate, rows, spread=True)
    if candidate == "side_code":  # (the codes' table, shared with config_code's shape)
        conn.execute(
            f"CREATE TABLE {candidate}.configurations (chart_id bigint NOT NULL, code integer"
            " NOT NULL, active_states jsonb NOT NULL, PRIMARY KEY (chart_id, code))"
        )
        conn.execute(
            f"CREATE INDEX ON {candidate}.configurations USING gin (active_states jsonb_path_ops)"
        )
        for chart_id in (1, 2):
            for key, value in CODES.items():
                conn.execute(
                    f"INSERT INTO {candidate}.configurations VALUES (%s, %s, %s)",
                    [chart_id, value, Jsonb(list(key))],
                )
    for table in tables_of(candidate) + (["configurations"] if candidate == "side_code" else []):
        conn.execute(f"VACUUM ANALYZE {candidate}.{table}")
    built = time.time() - started
    queries = {
        f"{state} {'page' if page else 'count'}": in_state_sql(candidate, state, page=page)
        for state in ("r", "s")
        for page in (True, False)
    }
    timings: dict[str, list[float]] = {name: [] for name in queries}
    answers: dict[str, Any] = {}
    plans: dict[str, str] = {}
    for name, sql in queries.items():
        plan = conn.execute(f"EXPLAIN {sql}").fetchall()
        plans[name] = " / ".join(
            line.strip().lstrip("-> ").split("  (")[0] for (line,) in plan if "Scan" in line
        )
    for _ in range(rounds):
        for name, sql in queries.items():
            began = time.perf_counter()
            result = conn.execute(sql).fetchall()
            timings[name].append((time.perf_counter() - began) * 1000)
            answers[name] = result[0][0] if "count" in name else len(result)
    size = conn.execute(
        "SELECT coalesce(sum(pg_relation_size(c.oid)), 0) FROM pg_class c JOIN pg_namespace n"
        " ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'i' AND c.relname"
        " NOT LIKE 'history%%'",
        [candidate],
    ).fetchone()[0]
    conn.execute(f"DROP SCHEMA {candidate} CASCADE")
    conn.close()
    return {
        "rows": rows,
        "build_seconds": built,
        "index_bytes": int(size),
        "ms": {name: statistics.median(values) for name, values in timings.items()},
        "ms_range": {name: (min(v), max(v)) for name, v in timings.items()},
        "answers": answers,
        "plans": plans,
    }


# ---------------------------------------------------------------------------------------
# Verification: the rows say what the steps did, and the index says what the rows say.


def verify(
    url: str,
    candidates: Sequence[str],
    sent: Counter[tuple[str, int]],
    counted: dict[str, Counter[int]],
) -> list[str]:
    conn = connect(url)
    problems: list[str] = []
    for candidate in candidates:
        s = candidate
        expected = Counter({pk: n for (c, pk), n in sent.items() if c == candidate})
        expected.update(counted.get(candidate, Counter()))
        if candidate in PEERS:
            rows = conn.execute(
                f"SELECT d.id, d.state, (SELECT count(*) FROM {s}.audit a WHERE a.document_id"
                f" = d.id) FROM {s}.document d"
            ).fetchall()
            for pk, state, audits in rows:
                if audits != expected[pk] or state != CYCLE[audits % 3]:
                    problems.append(f"{s} {pk}: {state}, {audits} audit rows, {expected[pk]} sent")
            continue
        rows = conn.execute(
            f"SELECT e.id, e.steps, e.active_states, (SELECT count(*) FROM {s}.history h WHERE"
            f" h.execution_id = e.id) FROM {s}.execution e"
        ).fetchall()
        for pk, steps, active, history in rows:
            n = expected[pk]
            if steps != n + 1 or history != n + 1 or active != [CYCLE[n % 3]]:
                problems.append(f"{s} {pk}: steps {steps}, history {history}, {active}, sent {n}")
        stale = {
            **{
                name: f"SELECT count(*) FROM {s}.execution e LEFT JOIN (SELECT execution_id,"
                f" jsonb_agg(state ORDER BY state) AS states FROM {s}.membership GROUP BY"
                " execution_id) m ON m.execution_id = e.id WHERE m.states IS DISTINCT FROM"
                " (SELECT jsonb_agg(x ORDER BY x)"
                " FROM jsonb_array_elements_text(e.active_states) x)"
                for name in MEMBERSHIP
            },
            "side_gin": f"SELECT count(*) FROM {s}.execution e JOIN {s}.side x ON"
            " x.execution_id = e.id WHERE x.active_states <> e.active_states",
            "side_code": f"SELECT count(*) FROM {s}.execution e JOIN {s}.side x ON"
            f' x.execution_id = e.id WHERE x.config_code <> ((\'{{"a": 1, "b": 2, "c": 3}}\''
            "::jsonb) ->> (e.active_states ->> 0))::int",
            "config_code": f"SELECT count(*) FROM {s}.execution e WHERE e.config_code <>"
            '((\'{"a": 1, "b": 2, "c": 3}\'::jsonb) ->> (e.active_states ->> 0))::int',
        }.get(candidate)
        if stale:
            (wrong,) = conn.execute(stale).fetchone()
            if wrong:
                problems.append(f"{s}: {wrong} executions whose state index disagrees")
    conn.close()
    return problems


# ---------------------------------------------------------------------------------------


def fmt_range(values: Sequence[float], digits: int = 0) -> str:
    return f"{min(values):,.{digits}f}-{max(values):,.{digits}f}"


def run(args: argparse.Namespace) -> dict[str, Any]:
    candidates: list[str] = list(args.candidates)
    admin_url = args.pg_url
    url = url_for(admin_url, args.database)
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {args.database}")
        admin.execute(f"CREATE DATABASE {args.database}")
    result: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.node()} {os.cpu_count()} CPUs, {platform.python_version()}",
        "args": {k: v for k, v in vars(args).items() if k != "json"},
        "load_before": load_average(),
    }
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
            result["server"] = conn.execute("SELECT version()").fetchone()[0]
            result["settings"] = dict(
                conn.execute(
                    "SELECT name, setting FROM pg_settings WHERE name IN ('synchronous_commit',"
                    " 'fsync', 'shared_buffers', 'full_page_writes', 'wal_level',"
                    " 'gin_pending_list_limit', 'checkpoint_timeout', 'max_wal_size')"
                ).fetchall()
            )
        largest = max(args.executions)
        conn = connect(url)
        conn.autocommit = True
        for candidate in candidates:
            log(f"building {candidate}: {largest:,} rows")
            build(conn, candidate, largest)
            conn.execute("ANALYZE")
        conn.close()

        counted: dict[str, Counter[int]] = {}
        wal: dict[str, Any] = {}
        if args.wal_steps:
            count = min(args.executions)
            for candidate in candidates:
                log(f"WAL: {candidate}, {args.wal_steps} steps over {count:,} rows")
                wal[candidate] = measure_wal(
                    url, candidate, count, args.wal_steps, args.wal_warmup, seed=7
                )
                rng = random.Random(7)
                first = 0
                with connect(url) as c:
                    first = first_id(c, candidate)
                tally = counted.setdefault(candidate, Counter())
                for _ in range(args.wal_warmup + 1 + args.wal_steps):
                    tally[first + rng.randrange(count)] += 1
                brief = {k: v for k, v in wal[candidate].items() if k != "mix_per_step"}
                log(f"  {json.dumps(brief)}")
        result["wal"] = wal

        timing: dict[str, Any] = {}
        if args.rounds:
            pool = Pool(url, max(args.processes))
            firsts = {}
            with connect(url) as c:
                for candidate in candidates:
                    firsts[candidate] = first_id(c, candidate)
            cells: dict[tuple[str, int, int], list[float]] = {}
            cpus: dict[tuple[str, int, int], list[float]] = {}
            for round_no in range(args.rounds):
                order = (
                    candidates[round_no % len(candidates) :]
                    + candidates[: round_no % len(candidates)]
                )
                for count in args.executions:
                    for processes in args.processes:
                        for candidate in order:
                            rate, cpu = pool.cell(
                                candidate,
                                firsts[candidate],
                                count,
                                processes,
                                args.steps,
                                args.warmup,
                            )
                            cells.setdefault((candidate, count, processes), []).append(rate)
                            cpus.setdefault((candidate, count, processes), []).append(cpu)
                log(f"round {round_no + 1}/{args.rounds} done, load {load_average()}")
            sent = pool.close()
            for (candidate, count, processes), rates in cells.items():
                key = f"{candidate} N={count} P={processes}"
                entry: dict[str, Any] = {
                    "median": statistics.median(rates),
                    "range": (min(rates), max(rates)),
                    "cpu_us": statistics.median(cpus[(candidate, count, processes)]),
                }
                for peer in PEERS:
                    if (peer, count, processes) in cells:
                        ratios = [
                            a / b
                            for a, b in zip(rates, cells[(peer, count, processes)], strict=True)
                        ]
                        entry[f"ratio_{peer}"] = statistics.median(ratios)
                        entry[f"ratio_{peer}_range"] = (min(ratios), max(ratios))
                timing[key] = entry
            log("verifying the rows")
            problems = verify(url, candidates, sent, counted)
            result["verify_problems"] = problems[:20]
            result["verify_ok"] = not problems
            log(f"verification: {'ok' if not problems else problems[:5]}")
        result["timing"] = timing

        queries: dict[str, Any] = {}
        if args.state_rows:
            for candidate in candidates:
                if candidate not in INDEXED:
                    continue
                log(f"in_state: {candidate} at {args.state_rows:,} rows")
                queries[candidate] = measure_queries(
                    url, candidate, args.state_rows, args.query_rounds
                )
                log(f"  {queries[candidate]['ms']} {queries[candidate]['answers']}")
            answers = {json.dumps(q["answers"], sort_keys=True) for q in queries.values()}
            result["in_state_exact"] = len(answers) <= 1
        result["in_state"] = queries
        result["load_after"] = load_average()
    finally:
        if not args.keep:
            with psycopg.connect(admin_url, autocommit=True) as admin:
                admin.execute(f"DROP DATABASE IF EXISTS {args.database} WITH (FORCE)")
    return result


def render(result: dict[str, Any]) -> str:
    out = [
        f"# state_index.py, {result['date']}; {result['machine']}",
        f"# {result.get('server', '')}",
        f"# load average before {result['load_before']}, after {result.get('load_after')}",
        "",
        "| candidate | WAL records/step | WAL bytes/step (no FPI) | FPI bytes/step |"
        " HOT % (WAL; pg_stat) | + upkeep records/step | + upkeep bytes/step |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for candidate, w in result.get("wal", {}).items():
        hot = "-" if w["hot_percent"] is None else f"{w['hot_percent']:.0f}"
        stat = "-" if w["stat_hot_percent"] is None else f"{w['stat_hot_percent']:.0f}"
        out.append(
            f"| {candidate} | {w['records_per_step']:.2f} | {w['bytes_per_step']:,.0f} |"
            f" {w['fpi_bytes_per_step']:,.0f} | {hot}; {stat} |"
            f" {w['cleanup_records_per_step']:.2f} | {w['cleanup_bytes_per_step']:,.0f} |"
        )
    out.append("")
    for candidate, w in result.get("wal", {}).items():
        mix = ", ".join(f"{k} {v:g}" for k, v in w["mix_per_step"].items() if v >= 0.01)
        out.append(f"- {candidate}: {mix}")
    timing = result.get("timing", {})
    if timing:
        out += [
            "",
            "| cell | steps/s median (range) | client CPU us/step | / fsm (per round: median,"
            " range) | / fsm_indexed |",
            "|---|---:|---:|---:|---:|",
        ]
        for key, t in timing.items():
            ratios = []
            for peer in PEERS:
                if f"ratio_{peer}" in t:
                    lo, hi = t[f"ratio_{peer}_range"]
                    ratios.append(f"{t[f'ratio_{peer}']:.2f}x ({lo:.2f}-{hi:.2f})")
                else:
                    ratios.append("-")
            out.append(
                f"| {key} | {t['median']:,.0f} ({fmt_range(t['range'])}) | {t['cpu_us']:,.0f}"
                f" | {ratios[0]} | {ratios[1]} |"
            )
        verdict = "ok" if result.get("verify_ok") else result.get("verify_problems")
        out.append(f"\nverification: {verdict}")
    queries = result.get("in_state", {})
    if queries:
        names = list(next(iter(queries.values()))["ms"])
        out += [
            "",
            f"in_state at {next(iter(queries.values()))['rows']:,} rows, median ms"
            f" (exact: {result.get('in_state_exact')})",
            "",
            "| candidate | index bytes | " + " | ".join(names) + " |",
            "|---|---:|" + "---:|" * len(names),
        ]
        for candidate, q in queries.items():
            out.append(
                f"| {candidate} | {q['index_bytes']:,} | "
                + " | ".join(f"{q['ms'][n]:.1f}" for n in names)
                + " |"
            )
        out.append("")
        for candidate, q in queries.items():
            out.append(f"- {candidate}: answers {q['answers']}; plans {q['plans']}")
    return "\n".join(out)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Candidate designs of the state index: WAL per step, steps/s, in_state "
        "(PostgreSQL only; raw SQL; issue 31).",
    )
    parser.add_argument(
        "--pg-url",
        default=DEFAULT_PG_URL,
        help=f"a maintenance database of the server (default {DEFAULT_PG_URL})",
    )
    parser.add_argument(
        "--database",
        default=DEFAULT_DATABASE,
        help="the database created for the run and dropped after it "
        f"(default {DEFAULT_DATABASE}; dropped first if it exists)",
    )
    parser.add_argument("--candidates", nargs="+", default=list(ALL), choices=ALL)
    parser.add_argument("--executions", nargs="+", type=int, default=[1000])
    parser.add_argument("--processes", nargs="+", type=int, default=[1, 4])
    parser.add_argument("--steps", type=int, default=300, help="timed steps per worker per cell")
    parser.add_argument("--warmup", type=int, default=20, help="untimed steps per worker per cell")
    parser.add_argument("--rounds", type=int, default=7, help="timed rounds (0: no timing)")
    parser.add_argument("--wal-steps", type=int, default=2000, help="0: no WAL measure")
    parser.add_argument("--wal-warmup", type=int, default=3000)
    parser.add_argument("--state-rows", type=int, default=1_000_000, help="0: no in_state")
    parser.add_argument("--query-rounds", type=int, default=9)
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    parser.add_argument("--json", help="also write the results here")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    result = run(args)
    print(render(result))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(result, handle, indent=2, default=str)
    ok = result.get("verify_ok", True) and result.get("in_state_exact", True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
