"""PostgreSQL-only shortcuts of a step's statements: fewer round trips, same rows, same lock.

``statecharts.stepper.sql`` uses these on PostgreSQL and keeps the plain statements elsewhere
(SQLite, or should a shortcut's plan fail to build). Each one writes and reads exactly what the
plain statements do; only how many messages go to the server changes.

- :class:`NarrowLock`: the lock reads the execution row only (``SELECT ... FOR UPDATE``, no
  join with the chart), plus the chart row's *version*: its ``xmin`` and ``ctid``, which every
  ``UPDATE`` of the row changes (a new tuple version, even by raw SQL, even twice in one
  transaction). The chart's columns come from a per-connection cache keyed by (chart id,
  version), filled by one ``SELECT`` of the chart on a miss. So a chart row edited in place is
  seen at the next step exactly as with the join (and refused, by ``compiled_chart``'s hash
  check), and the chart's source and resources are not sent and decoded on every step.
- :func:`update_and_insert`: the execution's ``UPDATE`` and the history row's ``INSERT`` in one
  statement (``WITH updated AS (UPDATE ... RETURNING id) INSERT ... VALUES (...,
  (SELECT id FROM updated), ...)``): one round trip instead of two. The history row's
  ``execution_id`` is the id the UPDATE returned, so an UPDATE that found no row inserts
  nothing (the NOT NULL constraint refuses it: the step fails, as the plain path's row count
  check makes it fail).

Lock order is unchanged: the lock takes the execution row only (the join never locked the
chart row either: ``FOR UPDATE OF`` the execution).

- :func:`cursor`: these statements (and ``sql``'s plain ones, on PostgreSQL) run as
  server-side prepared statements (``STATECHARTS["PREPARED_STATEMENTS"]``, default True):
  parsed and planned once per connection, then sent as a statement name and parameters, the
  position blob in binary rather than as a hex literal inside the SQL text. Django's own
  cursors are untouched: they keep client-side binding and Django's ``prepare_threshold``
  (None by default: never prepared). Off, for poolers that cannot carry prepared statements
  across their server connections (PgBouncer before 1.21, or in transaction mode without
  ``max_prepared_statements``), these statements go through Django's cursor as before.
"""

from __future__ import annotations

import threading
import weakref
from contextlib import nullcontext
from typing import Any

from django.db import DatabaseError
from django.db.backends.base.base import BaseDatabaseWrapper

from statecharts.conf import statecharts_settings
from statecharts.models import Chart, Execution
from statecharts.stepper.rows import converted, converters_of

_VERSION = "_chart_row_version"
_CHART_CACHE_SIZE = 256


# The connection's threshold while one of our statements runs, when Django left it at None
# (which makes psycopg ignore ``prepare=True`` and keep no statement cache): high enough that
# no other statement reaches it in the instant it is set, so only ours get prepared.
_ONLY_WHEN_ASKED = 2**62

try:  # (psycopg 3 only: psycopg2 has no prepared statements; SQLite needs neither)
    import psycopg
except ImportError:
    psycopg = None  # type: ignore[assignment]
is_psycopg3 = psycopg is not None

if is_psycopg3:
    from django.db.backends.postgresql.psycopg_any import register_tzloader
    from psycopg.pq import Format

    _TIMESTAMPTZ_OID = psycopg.adapters.types["timestamptz"].oid

    class PreparedCursor(psycopg.Cursor[Any]):
        """A server-side binding cursor whose every statement is prepared (``prepare=True``):
        the first run of a statement on a connection prepares it, the later ones execute it
        by name."""

        def execute(  # type: ignore[override]
            self,
            query: Any,
            params: Any = None,
            *,
            prepare: bool | None = None,
            binary: bool | None = None,
        ) -> PreparedCursor:
            connection = self.connection
            threshold = connection.prepare_threshold
            if threshold is None:
                connection.prepare_threshold = _ONLY_WHEN_ASKED
            try:
                super().execute(query, params, prepare=True, binary=binary)
            finally:
                if threshold is None:
                    connection.prepare_threshold = None
            # psycopg records no query text for a prepared execution; Django's query log
            # (connection.queries, assertNumQueries' report) reads it from here.
            self._query = _LoggedQuery(connection, query, params)
            return self

    class _LoggedQuery:
        """The statement with its parameters inlined, composed only if something reads it."""

        __slots__ = ("connection", "params", "statement")

        def __init__(self, connection: Any, statement: Any, params: Any) -> None:
            self.connection, self.statement, self.params = connection, statement, params

        @property
        def query(self) -> bytes:
            try:
                return (
                    psycopg.ClientCursor(self.connection)
                    .mogrify(self.statement, self.params)
                    .encode()
                )
            except psycopg.Error:
                return str(self.statement).encode()


def prepared_statements(conn: BaseDatabaseWrapper) -> bool:
    """Whether ``conn``'s step statements run prepared (PostgreSQL on psycopg 3, and the
    setting on)."""
    return is_psycopg3 and conn.vendor == "postgresql" and statecharts_settings.PREPARED_STATEMENTS


def cursor(conn: BaseDatabaseWrapper) -> Any:
    """A cursor for a step's own statements, to use as ``with cursor(conn) as statement:``.

    With :func:`prepared_statements`, Django's cursor wrapper (so query logging,
    ``execute_wrapper`` and database error wrapping all apply) around the connection's one
    :class:`PreparedCursor`, kept open for the connection's life (building a psycopg cursor
    and its adapters for every statement cost about as much as sending it prepared saves);
    else ``conn.cursor()``."""
    if not prepared_statements(conn):
        return conn.cursor()
    conn.ensure_connection()
    kept = _prepared_cursors.get(conn)
    if kept is None or kept[0] is not conn.connection or kept[1] is not conn.timezone:
        kept = _prepared_cursors[conn] = _prepared_cursor(conn)
    return nullcontext(conn._prepare_cursor(kept[2]))


def _prepared_cursor(conn: BaseDatabaseWrapper) -> tuple[Any, Any, Any]:
    """(psycopg connection, time zone, its PreparedCursor)."""
    with conn.wrap_database_errors:
        raw = PreparedCursor(conn.connection)
        # As Django's create_cursor does: the session time zone's loader, if it differs.
        loader = conn.connection.adapters.get_loader(_TIMESTAMPTZ_OID, Format.TEXT)
        if conn.timezone != getattr(loader, "timezone", conn.timezone):
            register_tzloader(conn.timezone, raw)
    return conn.connection, conn.timezone, raw


# Django connection -> (psycopg connection, time zone, PreparedCursor): rebuilt when Django
# reconnects or its session time zone changes. (A Django connection serves one thread.)
_prepared_cursors: weakref.WeakKeyDictionary[BaseDatabaseWrapper, tuple[Any, Any, Any]] = (
    weakref.WeakKeyDictionary()
)


def _row_version(table: str) -> str:
    """SQL for a row's version: its xmin and ctid (both change with every UPDATE)."""
    return f"{table}.xmin::text || ',' || {table}.ctid::text"


class NarrowLock:
    """The lock's ``SELECT ... FOR UPDATE`` of the execution row and its chart row's version,
    compiled by the ORM once for one connection; the chart instance from the cache."""

    def __init__(self, conn: BaseDatabaseWrapper) -> None:
        quote = conn.ops.quote_name
        execution_table = quote(Execution._meta.db_table)
        chart_table = quote(Chart._meta.db_table)
        chart_fk = quote(Execution._meta.get_field("chart").column)
        version = (
            f"(SELECT {_row_version('c')} FROM {chart_table} c"
            f" WHERE c.{quote(Chart._meta.pk.column)} = {execution_table}.{chart_fk})"
        )
        queryset = (
            Execution.objects.using(conn.alias)
            .extra(select={_VERSION: version})
            .select_for_update()
            .filter(pk=0)
            .order_by()  # (one row: no ORDER BY from Meta.ordering)
        )
        compiler = queryset.query.get_compiler(connection=conn)
        sql, params = compiler.as_sql()
        if list(params) != [0] or "JOIN" in sql.upper() or "ORDER BY" in sql.upper():
            raise AssertionError(f"unexpected narrow lock query: {sql!r} {params!r}")
        self.sql = sql
        self.alias = conn.alias
        select = [column for column, _sql, _alias in compiler.select]
        klass_info = compiler.klass_info
        assert klass_info is not None
        own = klass_info["select_fields"]
        self.own = (own[0], own[-1] + 1, [select[i].target.attname for i in own])
        self.version_at = compiler.annotation_col_map[_VERSION]
        self.converters = converters_of(compiler, select)
        chart_version = _row_version(chart_table)
        self.charts = Chart.objects.using(conn.alias).extra(select={_VERSION: chart_version})
        self.chart_names = [field.attname for field in Chart._meta.concrete_fields]
        # (chart id, row version) -> the chart's column values, as Chart.from_db takes them.
        self.chart_rows: dict[tuple[int, str], list[Any]] = {}
        self.lock = threading.Lock()

    def get(self, conn: BaseDatabaseWrapper, pk: int) -> Execution:
        with cursor(conn) as statement:
            statement.execute(self.sql, [pk])
            found = statement.fetchone()
        if found is None:
            raise Execution.DoesNotExist("Execution matching query does not exist.")
        row = converted(found, self.converters, conn)
        start, end, names = self.own
        execution = Execution.from_db(self.alias, names, row[start:end])
        chart = self.chart(execution.chart_id, row[self.version_at])
        Execution.chart.field.set_cached_value(execution, chart)
        return execution

    def chart(self, chart_id: int, version: str | None) -> Chart:
        """The chart row at ``version`` (a fresh instance; the column values are shared)."""
        values = self.chart_rows.get((chart_id, version or ""))
        if values is None:
            loaded = self.charts.get(pk=chart_id)  # (the version it has now, maybe newer)
            values = [getattr(loaded, name) for name in self.chart_names]
            with self.lock:
                if len(self.chart_rows) >= _CHART_CACHE_SIZE:
                    self.chart_rows.clear()
                self.chart_rows[(chart_id, getattr(loaded, _VERSION))] = values
        return Chart.from_db(self.alias, self.chart_names, values)


# (history model, execution model, updated columns) -> (sql, updated fields, inserted fields)
_merged: dict[tuple[Any, ...], tuple[str, tuple[Any, ...], tuple[Any, ...]]] = {}


def update_and_insert(
    conn: BaseDatabaseWrapper, execution: Execution, names: tuple[str, ...], entry: Any
) -> None:
    """``update_row(execution, names)`` then ``insert_row(entry)`` (``entry.execution`` is
    ``execution``) as one statement. The values go through each field's
    ``get_db_prep_save`` (and ``pre_save``), as the plain statements' do."""
    key = (type(entry), type(execution), names)
    plan = _merged.get(key)
    if plan is None:
        plan = _merged[key] = _merge_plan(conn, execution, names, entry)
    sql, updated, inserted = plan
    params = [field.get_db_prep_save(getattr(execution, field.attname), conn) for field in updated]
    params.append(execution.pk)
    params.extend(field.get_db_prep_save(field.pre_save(entry, True), conn) for field in inserted)
    with cursor(conn) as statement:
        statement.execute(sql, params)
        found = statement.fetchone()
    if found is None:  # (not reached: an INSERT ... VALUES inserts its row or fails)
        raise DatabaseError(f"{execution._meta.label} {execution.pk}: the step wrote no row")
    entry.pk = found[0]
    entry._state.adding = False
    entry._state.db = conn.alias


def _merge_plan(
    conn: BaseDatabaseWrapper, execution: Execution, names: tuple[str, ...], entry: Any
) -> tuple[str, tuple[Any, ...], tuple[Any, ...]]:
    quote = conn.ops.quote_name
    meta, history = execution._meta, entry._meta
    updated = tuple(meta.get_field(name) for name in names)
    assignments = ", ".join(f"{quote(field.column)} = %s" for field in updated)
    owner = history.get_field("execution")
    if owner.remote_field.model is not type(execution):
        raise TypeError(f"{history.label}.execution does not point at {meta.label}")
    fields = [f for f in history.concrete_fields if f is not history.pk]
    inserted = tuple(f for f in fields if f is not owner)
    values = ", ".join(
        f"(SELECT {quote(meta.pk.column)} FROM updated)" if f is owner else "%s" for f in fields
    )
    sql = (
        f"WITH updated AS (UPDATE {quote(meta.db_table)} SET {assignments}"
        f" WHERE {quote(meta.pk.column)} = %s RETURNING {quote(meta.pk.column)})"
        f" INSERT INTO {quote(history.db_table)} ({', '.join(quote(f.column) for f in fields)})"
        f" VALUES ({values}) RETURNING {quote(history.pk.column)}"
    )
    return sql, updated, inserted
