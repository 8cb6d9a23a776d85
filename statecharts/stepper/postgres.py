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
  check), and the chart's source and resources are not sent and decoded on every step. A
  batch's lock (``lock_many``: ``WHERE id IN (...) ORDER BY id``) is narrow the same way,
  with the same per-connection cache.
- :func:`update_and_insert`: the execution's ``UPDATE`` and the history row's ``INSERT`` in one
  statement (``WITH updated AS (UPDATE ... RETURNING id) INSERT ... VALUES (...,
  (SELECT id FROM updated), ...)``): one round trip instead of two. The history row's
  ``execution_id`` is the id the UPDATE returned, so an UPDATE that found no row inserts
  nothing (the NOT NULL constraint refuses it: the step fails, as the plain path's row count
  check makes it fail).

Lock order is unchanged: the lock takes the execution row only (the join never locked the
chart row either: ``FOR UPDATE OF`` the execution).

- :class:`WriteBehind`: a batch of steps in one transaction (the timers app fires a chunk of
  due timers so) holds back each step's own two writes (the execution's ``UPDATE``, the
  history row's ``INSERT``) and sends them together, one statement for the whole batch
  (``UPDATE ... FROM unnest(...)`` and ``INSERT ... SELECT ... FROM unnest(...)`` as two
  CTEs of it), before any other statement of the transaction runs (a connection execute
  wrapper: reads, writes, savepoints, all see the held rows as if written at once) and
  before the batch ends. The history rows' ids are reserved from their sequence up front
  (one ``nextval`` statement per batch), so every entry has its ``pk`` the moment its step
  ends, as with the plain statements.

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
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
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

    def __init__(self, conn: BaseDatabaseWrapper, size: int | None = None) -> None:
        """One execution by id; with ``size``, that many ids (``IN``, in id order: ``many``)."""
        quote = conn.ops.quote_name
        execution_table = quote(Execution._meta.db_table)
        chart_table = quote(Chart._meta.db_table)
        chart_fk = quote(Execution._meta.get_field("chart").column)
        version = (
            f"(SELECT {_row_version('c')} FROM {chart_table} c"
            f" WHERE c.{quote(Chart._meta.pk.column)} = {execution_table}.{chart_fk})"
        )
        locking = Execution.objects.using(conn.alias).extra(select={_VERSION: version})
        if size is None:  # (one row: no ORDER BY from Meta.ordering)
            queryset, expected = locking.select_for_update().filter(pk=0).order_by(), [0]
        else:  # distinct placeholders: the ORM drops repeated values from an IN list
            expected = list(range(-size, 0))
            queryset = locking.select_for_update().filter(pk__in=expected).order_by("pk")
        compiler = queryset.query.get_compiler(connection=conn)
        sql, params = compiler.as_sql()
        ordered = "ORDER BY" in sql.upper()
        if list(params) != expected or "JOIN" in sql.upper() or ordered != (size is not None):
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
        # (chart id, row version) -> the chart's column values, as Chart.from_db takes them;
        # one cache per connection, shared by its plans (one per lock size).
        shared = _chart_rows.get(conn)
        if shared is None:
            shared = _chart_rows[conn] = ({}, threading.Lock())
        self.chart_rows, self.lock = shared

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

    def many(self, conn: BaseDatabaseWrapper, pks: list[int]) -> list[Execution]:
        """The executions of ``pks`` (as many ids as the plan's size), locked in id order."""
        with cursor(conn) as statement:
            statement.execute(self.sql, pks)
            found = statement.fetchall()
        start, end, names = self.own
        executions = []
        for raw in found:
            row = converted(raw, self.converters, conn)
            execution = Execution.from_db(self.alias, names, row[start:end])
            chart = self.chart(execution.chart_id, row[self.version_at])
            Execution.chart.field.set_cached_value(execution, chart)
            executions.append(execution)
        return executions

    def chart(self, chart_id: int, version: str | None) -> Chart:
        """The chart row at ``version`` (a fresh instance; the column values are shared)."""
        values = self.chart_rows.get((chart_id, version or ""))
        if values is None:
            loaded = self.charts.get(pk=chart_id)  # (the version it has now, maybe newer)
            values = [getattr(loaded, name) for name in self.chart_names]
            with self.lock:
                rows = self.chart_rows
                if len(rows) >= _CHART_CACHE_SIZE:
                    # The oldest entry goes (dicts keep insertion order), not all of them: a
                    # clear() here dropped the charts the same lock had just read, so a lock of
                    # executions of two charts could read one of them twice.
                    del rows[next(iter(rows))]
                rows[(chart_id, getattr(loaded, _VERSION))] = values
        return Chart.from_db(self.alias, self.chart_names, values)


_chart_rows: weakref.WeakKeyDictionary[
    BaseDatabaseWrapper, tuple[dict[tuple[int, str], list[Any]], threading.Lock]
] = weakref.WeakKeyDictionary()

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


class WriteBehind:
    """The step writes of one batch in one transaction, held back and sent together.

    ``add`` takes what ``update_and_insert`` would send for one step (the values are read
    then: the instances may change afterwards) and gives the history row its id from the
    reserved ones; ``flush`` sends everything held, one statement per distinct list of
    updated columns (usually one). Held writes are flushed, in the order they were added:

    - before any other statement runs on the connection (``before_statement``, installed as
      an execute wrapper by :func:`write_behind`): whatever reads or writes those rows later
      in the transaction, or opens or rolls back to a savepoint, sees them written;
    - before a second step of an execution already held is added (one row is updated once
      per statement);
    - when the batch ends (:func:`write_behind`'s exit, inside the transaction).

    A flush that fails (a constraint, a lost connection) fails the statement it came before,
    and makes the batch's end raise too, so a caller that swallowed the first error still
    cannot commit a transaction with writes missing.
    """

    def __init__(self, conn: BaseDatabaseWrapper, reserve: int) -> None:
        self.conn = conn
        self.reserve = max(1, reserve)
        self.held: list[tuple[tuple[str, ...], Any, list[Any], Any, list[Any]]] = []
        self.executions: set[int] = set()
        self.ids: list[int] = []
        self.flushing = False
        self.failed: BaseException | None = None

    def add(self, execution: Execution, names: tuple[str, ...], entry: Any) -> None:
        if execution.pk in self.executions:
            self.flush()
        conn = self.conn
        plan = _behind_plan(conn, execution, names, entry)
        updated = [
            field.get_db_prep_save(getattr(execution, field.attname), conn)
            for field in plan.updated
        ]
        updated.append(execution.pk)
        if not self.ids:
            self.ids = self._reserve(plan)
        entry.pk = self.ids.pop()
        inserted = [
            field.get_db_prep_save(field.pre_save(entry, True), conn) for field in plan.inserted
        ]
        self.held.append((names, plan, updated, entry, inserted))
        self.executions.add(execution.pk)
        entry._state.adding = False
        entry._state.db = conn.alias

    def _reserve(self, plan: _BehindPlan) -> list[int]:
        """``reserve`` ids of the history sequence, the lowest last (``pop`` order)."""
        self.flushing = True
        try:
            with cursor(self.conn) as statement:
                statement.execute(plan.reserve_sql, [self.reserve])
                found = [row[0] for row in statement.fetchall()]
        except BaseException as exc:  # (this step's writes are lost: the batch must fail)
            self.failed = exc
            raise
        finally:
            self.flushing = False
        found.sort(reverse=True)
        return found

    def flush(self) -> None:
        if not self.held:
            return
        held, self.held = self.held, []
        self.executions = set()
        groups: dict[tuple[str, ...], list[Any]] = {}
        for item in held:
            groups.setdefault(item[0], []).append(item)
        self.flushing = True
        try:
            for items in groups.values():
                plan = items[0][1]
                columns: list[list[Any]] = [
                    [] for _ in range(len(plan.updated) + 1 + len(plan.inserted) + 1)
                ]
                for _names, _plan, updated, entry, inserted in items:
                    for index, value in enumerate(updated):
                        columns[index].append(value)
                    base = len(updated)
                    columns[base].append(entry.pk)
                    for index, value in enumerate(inserted, start=base + 1):
                        columns[index].append(value)
                with cursor(self.conn) as statement:
                    statement.execute(plan.sql, columns)
                    found = statement.fetchone()
                if found is None or found[0] != len(items) or found[1] != len(items):
                    raise DatabaseError(
                        f"held step writes: {len(items)} steps, {found and found[0]} executions"
                        f" updated, {found and found[1]} history rows inserted"
                    )
        except BaseException as exc:
            self.failed = exc
            raise
        finally:
            self.flushing = False

    def before_statement(
        self, execute: Any, sql: Any, params: Any, many: bool, context: Any
    ) -> Any:
        if self.held and not self.flushing:
            self.flush()
        return execute(sql, params, many, context)


class _BehindPlan:
    """The statements of a :class:`WriteBehind` flush for one list of updated columns."""

    def __init__(
        self, conn: BaseDatabaseWrapper, execution: Execution, names: tuple[str, ...], entry: Any
    ) -> None:
        quote = conn.ops.quote_name
        meta, history = execution._meta, entry._meta
        owner = history.get_field("execution")
        if owner.remote_field.model is not type(execution):
            raise TypeError(f"{history.label}.execution does not point at {meta.label}")
        self.updated = tuple(meta.get_field(name) for name in names)
        fields = [f for f in history.concrete_fields if f is not history.pk]
        self.inserted = tuple(fields)
        pk = meta.pk
        assert pk is not None and history.pk is not None

        def array(field: Any) -> str:
            return f"%b::{field.cast_db_type(conn)}[]"  # (binary arrays: cheap to build)

        given = [*self.updated, pk]
        names_in = [f"u{index}" for index in range(len(given))]
        assignments = ", ".join(
            f"{quote(field.column)} = v.{name}"
            for field, name in zip(self.updated, names_in, strict=False)
        )
        inserted = [history.pk, *fields]
        self.sql = (
            f"WITH u AS (UPDATE {quote(meta.db_table)} AS e SET {assignments}"
            f" FROM unnest({', '.join(array(f) for f in given)}) AS v({', '.join(names_in)})"
            f" WHERE e.{quote(pk.column)} = v.{names_in[-1]} RETURNING 1),"
            f" i AS (INSERT INTO {quote(history.db_table)}"
            f" ({', '.join(quote(f.column) for f in inserted)})"
            f" SELECT * FROM unnest({', '.join(array(f) for f in inserted)}) RETURNING 1)"
            " SELECT (SELECT count(*) FROM u), (SELECT count(*) FROM i)"
        )
        sequence = f"pg_get_serial_sequence('{quote(history.db_table)}', '{history.pk.column}')"
        self.reserve_sql = f"SELECT nextval({sequence}) FROM generate_series(1, %s)"


# (connection, history model, execution model, updated columns) -> the flush's plan
_behind_plans: weakref.WeakKeyDictionary[
    BaseDatabaseWrapper, dict[tuple[Any, ...], _BehindPlan]
] = weakref.WeakKeyDictionary()


def _behind_plan(
    conn: BaseDatabaseWrapper, execution: Execution, names: tuple[str, ...], entry: Any
) -> _BehindPlan:
    plans = _behind_plans.get(conn)
    if plans is None:
        plans = _behind_plans[conn] = {}
    key = (type(entry), type(execution), names)
    plan = plans.get(key)
    if plan is None:
        plan = plans[key] = _BehindPlan(conn, execution, names, entry)
    return plan


# The connection's active WriteBehind (one per connection; batches do not nest).
_behind: weakref.WeakKeyDictionary[BaseDatabaseWrapper, WriteBehind] = weakref.WeakKeyDictionary()


def held_writes(conn: BaseDatabaseWrapper) -> WriteBehind | None:
    """The connection's active :class:`WriteBehind`, if a batch holds its steps' writes."""
    return _behind.get(conn)


@contextmanager
def write_behind(conn: BaseDatabaseWrapper, reserve: int) -> Iterator[WriteBehind | None]:
    """Hold the steps' own writes on ``conn`` until the block ends (see :class:`WriteBehind`).

    Use it directly inside the ``atomic`` block whose steps it batches: on a normal exit the
    held writes are flushed (still inside the transaction); on an exception they are dropped
    (the transaction rolls back). ``reserve``: how many history ids to reserve at a time (the
    steps the batch expects). Nested inside another batch on the same connection, it is the
    outer one that holds (and flushes). Only with :func:`prepared_statements` (the flush
    sends binary arrays, which Django's client-side binding cursor cannot): without them,
    nothing is held."""
    if _behind.get(conn) is not None or not prepared_statements(conn):
        yield _behind.get(conn)
        return
    behind = _behind[conn] = WriteBehind(conn, reserve)
    try:
        with conn.execute_wrapper(behind.before_statement):
            yield behind
            behind.flush()
        if behind.failed is not None:
            raise DatabaseError("held step writes failed earlier in this batch") from behind.failed
    finally:
        del _behind[conn]
