"""The statements on a step's hot path, compiled once instead of by the ORM on every call.

A durable step runs the same three statements every time: lock the execution (joined with its
chart), UPDATE it, INSERT a history row. On PostgreSQL, ``statecharts.stepper.postgres`` sends
them in fewer round trips (the lock without the join, the UPDATE and the INSERT as one
statement); the rows written and the lock taken are the same.

On PostgreSQL they run as server-side prepared statements (``postgres.cursor``; the setting
``STATECHARTS["PREPARED_STATEMENTS"]``, default True), elsewhere on Django's cursor.

Building them through the ORM costs more CPU than running them; here they are built once per
connection (the lock, by the ORM's own compiler) or per model and column list, and run on the
connection's cursor with the same field conversions (``get_db_prep_save``, ``from_db_value``,
``Model.from_db``). They send no ``pre_save``/``post_save``: the stepper sends its own signals.

Every statement runs on ``database()``: the database Django's routers choose for writing an
``Execution`` (``DEFAULT_DB_ALIAS`` without routers). A step's rows must all live in that one
database, since a step is one transaction; a system check (``statecharts.E010``) refuses
routers that would send this project's models elsewhere.
"""

from __future__ import annotations

import weakref
from contextlib import nullcontext
from typing import Any

from django.db import DatabaseError, connections, router
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import QuerySet

from statecharts.models import Chart, Execution
from statecharts.stepper import postgres
from statecharts.stepper.rows import converted, converters_of


def database() -> str:
    """The alias of the database every step reads and writes (see the module docstring)."""
    return router.db_for_write(Execution)


def locking_queryset(conn: BaseDatabaseWrapper) -> QuerySet[Execution]:
    """Executions with their charts, locked (``FOR UPDATE OF`` the execution rows only, where
    the database can say so: the chart rows are read, never locked)."""
    queryset = Execution.objects.using(conn.alias).select_related("chart")
    if conn.features.has_select_for_update_of:
        return queryset.select_for_update(of=("self",))
    return queryset.select_for_update()


def lock_executions(pks: set[int]) -> dict[int, Execution]:
    """Lock several executions, in ascending id order (the one global order every batch
    follows), with their charts; missing ids are absent from the result.

    ``locking_queryset(conn).filter(pk__in=pks).order_by("pk")``, compiled once per
    connection and size (``_LockPlan``; the id list is padded to the next power of two by
    repeating its largest id, so a few plans serve every size), as ``lock_execution`` is;
    on PostgreSQL without the chart join (``postgres.NarrowLock``), as ``lock_execution``.
    """
    if not pks:
        return {}
    conn = connections[database()]
    ordered = sorted(pks)
    size = 1 << (len(ordered) - 1).bit_length()
    plans = _many_plans.get(conn)
    if plans is None:
        plans = _many_plans[conn] = {}
    plan = plans.get(size)
    if plan is None:
        try:
            if conn.vendor == "postgresql":
                plan = plans[size] = postgres.NarrowLock(conn, size)
            else:
                plan = plans[size] = _LockPlan(conn, size)
        except (AttributeError, KeyError, TypeError, ValueError, AssertionError):
            plan = plans[size] = _ORMLock()  # (see lock_execution)
    padded = ordered + [ordered[-1]] * (size - len(ordered))
    return {execution.pk: execution for execution in plan.many(conn, padded)}


def lock_execution(pk: int) -> Execution:
    """Lock an execution row for the rest of the transaction (its chart is loaded too).

    ``Execution.objects.select_related("chart").select_for_update(of=("self",)).get(pk=pk)``,
    with the statement compiled once per connection (``_LockPlan``) instead of every step.
    On PostgreSQL the chart is not joined (``postgres.NarrowLock``: its row version is read
    instead, and its columns come from a cache keyed by it).
    """
    conn = connections[database()]
    plan = _lock_plans.get(conn)
    if plan is None:
        plan = _lock_plans[conn] = _lock_plan(conn)
    return plan.get(conn, pk)


def _lock_plan(conn: BaseDatabaseWrapper) -> _LockPlan | postgres.NarrowLock | _ORMLock:
    try:
        if conn.vendor == "postgresql":
            return postgres.NarrowLock(conn)
        return _LockPlan(conn)
    except (AttributeError, KeyError, TypeError, ValueError, AssertionError):
        # The plans read the ORM compiler's structure; should a Django release change it,
        # the step still works, through the plain (slower) queryset.
        return _ORMLock()


class _LockPlan:
    """The lock's SELECT ... FOR UPDATE, compiled by the ORM once for one connection.

    Running it is the ORM's own work minus the compiling: the same SQL, the same converters
    (``from_db_value``, the backend's), the same ``Model.from_db`` for both instances.
    """

    def __init__(self, conn: BaseDatabaseWrapper, size: int | None = None) -> None:
        """One execution by id; with ``size``, that many ids (``IN``, in id order)."""
        if size is None:
            # (one row: no ORDER BY from Meta.ordering)
            queryset, expected = locking_queryset(conn).filter(pk=0).order_by(), [0]
        else:  # distinct placeholders: the ORM drops repeated values from an IN list
            expected = list(range(-size, 0))
            queryset = locking_queryset(conn).filter(pk__in=expected).order_by("pk")
        compiler = queryset.query.get_compiler(connection=conn)
        sql, params = compiler.as_sql()
        if list(params) != expected:
            raise AssertionError(f"unexpected parameters in the lock query: {params!r}")
        self.sql = sql
        self.alias = conn.alias
        select = [column for column, _sql, _alias in compiler.select]
        klass_info = compiler.klass_info
        assert klass_info is not None
        (related,) = klass_info["related_klass_infos"]
        own, joined = klass_info["select_fields"], related["select_fields"]
        self.own = (own[0], own[-1] + 1, [select[i].target.attname for i in own])
        self.joined = (joined[0], joined[-1] + 1, [select[i].target.attname for i in joined])
        self.converters = converters_of(compiler, select)

    def get(self, conn: BaseDatabaseWrapper, pk: int) -> Execution:
        with postgres.cursor(conn) as cursor:
            cursor.execute(self.sql, [pk])
            found = cursor.fetchone()
        if found is None:
            raise Execution.DoesNotExist("Execution matching query does not exist.")
        return self._instance(found, conn)

    def many(self, conn: BaseDatabaseWrapper, pks: list[int]) -> list[Execution]:
        with postgres.cursor(conn) as cursor:
            cursor.execute(self.sql, pks)
            rows = cursor.fetchall()
        return [self._instance(row, conn) for row in rows]

    def _instance(self, found: Any, conn: BaseDatabaseWrapper) -> Execution:
        row = converted(found, self.converters, conn)
        start, end, names = self.own
        execution = Execution.from_db(self.alias, names, row[start:end])
        start, end, names = self.joined
        chart = Chart.from_db(self.alias, names, row[start:end])
        Execution.chart.field.set_cached_value(execution, chart)
        return execution


class _ORMLock:
    def get(self, conn: BaseDatabaseWrapper, pk: int) -> Execution:
        return locking_queryset(conn).get(pk=pk)

    def many(self, conn: BaseDatabaseWrapper, pks: list[int]) -> list[Execution]:
        return list(locking_queryset(conn).filter(pk__in=pks).order_by("pk"))


_lock_plans: weakref.WeakKeyDictionary[
    BaseDatabaseWrapper, _LockPlan | postgres.NarrowLock | _ORMLock
] = weakref.WeakKeyDictionary()
_many_plans: weakref.WeakKeyDictionary[
    BaseDatabaseWrapper, dict[int, _LockPlan | postgres.NarrowLock | _ORMLock]
] = weakref.WeakKeyDictionary()


def update_row(obj: Any, names: tuple[str, ...]) -> None:
    """``obj.save(update_fields=names)`` without the ORM's per-call compiling (no signals:
    the stepper sends its own). The values go through each field's ``get_db_prep_save``."""
    meta = obj._meta
    conn = connections[database()]
    key = (type(obj), names, conn.vendor)
    plan = _write_sql.get(key)
    if plan is None:
        quote = conn.ops.quote_name
        fields = tuple(meta.get_field(name) for name in names)
        assignments = ", ".join(f"{quote(field.column)} = %s" for field in fields)
        sql = f"UPDATE {quote(meta.db_table)} SET {assignments} WHERE {quote(meta.pk.column)} = %s"
        plan = _write_sql[key] = (sql, fields)
    sql, fields = plan
    params = [field.get_db_prep_save(getattr(obj, field.attname), conn) for field in fields]
    params.append(obj.pk)
    with postgres.cursor(conn) as cursor:
        cursor.execute(sql, params)
        if cursor.rowcount != 1:
            raise DatabaseError(f"{meta.label} {obj.pk}: the update did not affect one row")


def insert_row(obj: Any) -> None:
    """``obj.save(force_insert=True)`` for a model with an auto primary key, without the ORM's
    per-call compiling (no signals: the stepper sends its own)."""
    meta = obj._meta
    conn = connections[database()]
    key = (type(obj), conn.vendor)
    plan = _insert_sql.get(key)
    if plan is None:
        quote = conn.ops.quote_name
        fields = tuple(f for f in meta.concrete_fields if f is not meta.pk)
        columns = ", ".join(quote(f.column) for f in fields)
        marks = ", ".join(["%s"] * len(fields))
        sql = f"INSERT INTO {quote(meta.db_table)} ({columns}) VALUES ({marks})"
        returning = conn.features.can_return_columns_from_insert
        if returning:
            sql += f" RETURNING {quote(meta.pk.column)}"
        plan = _insert_sql[key] = (sql, fields, returning)
    sql, fields, returning = plan
    params = [field.get_db_prep_save(field.pre_save(obj, True), conn) for field in fields]
    with postgres.cursor(conn) as cursor:
        cursor.execute(sql, params)
        if returning:
            pk = cursor.fetchone()[0]
        else:
            pk = conn.ops.last_insert_id(cursor, meta.db_table, meta.pk.column)
    obj.pk = pk
    obj._state.adding = False
    obj._state.db = conn.alias


def update_and_insert(execution: Execution, names: tuple[str, ...], entry: Any) -> None:
    """``update_row(execution, names)`` then ``insert_row(entry)``, for a step's own two
    writes (``entry`` is the execution's new history row). One statement on PostgreSQL
    (``postgres.update_and_insert``), or held for the batch's one statement inside
    ``batched_writes``; the two plain ones elsewhere."""
    conn = connections[database()]
    if conn.vendor == "postgresql":
        behind = postgres.held_writes(conn)
        if behind is not None:
            behind.add(execution, names, entry)
        else:
            postgres.update_and_insert(conn, execution, names, entry)
    else:
        update_row(execution, names)
        insert_row(entry)


def batched_writes(expected: int) -> Any:
    """A context manager, used directly inside the ``atomic`` block of a batch of steps (one
    transaction, e.g. a chunk of timer fires): on PostgreSQL, the steps' own two writes
    (``update_and_insert``) are held and sent together as one statement
    (``postgres.WriteBehind``: flushed before any other statement of the transaction and
    when the block ends, so nothing in the transaction can see the rows missing; each
    history row has its id at once, reserved ``expected`` at a time). Elsewhere (SQLite)
    nothing is held: each step writes as it goes."""
    conn = connections[database()]
    if conn.vendor == "postgresql":
        return postgres.write_behind(conn, expected)
    return nullcontext()


_write_sql: dict[tuple[Any, ...], tuple[str, tuple[Any, ...]]] = {}
_insert_sql: dict[tuple[Any, ...], tuple[str, tuple[Any, ...], bool]] = {}
