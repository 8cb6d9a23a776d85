"""Many executions, one engine: durable steps to a random one of N rows, against the peers.

Issue 16. ``benchmarks/durable_steps.py`` steps ONE execution again and again, so every step
finds the previous one's datamodel engine alive; a real deployment steps many executions, each
rarely. Here every event goes to a random one of ``--executions`` rows (default 1,000; give
``--executions 1000 100000`` to show the cost does not grow with N), on PostgreSQL, from 1
and 4 processes, and three systems take the same durable step, measured in the same run:

- **ours**: ``statecharts.stepper.send(pk, "advance")`` on the chart below (3 states, one guard
  on a datamodel value, one ``<assign>``; ECMAScript datamodel);
- **django-fsm-2**: ``transaction.atomic(durable=True)``, ``select_for_update().get(pk)``, the
  ``@transition`` method ``advance`` (the same guard and assignment, on columns), ``save()``,
  one audit row ``create()``;
- **python-statemachine** bound to a model (its ``MachineMixin``, the documented Django
  integration): the same transaction, ``statemachine.send("advance")``, ``save()``, one
  audit row.

So each system pays, per event, one durable transaction that locks the row, applies the
transition, saves the row and inserts one history/audit row. The peers' models are a
benchmark-only Django app (``benchmarks/bench_peers``, settings ``bench_peers.settings``),
its tables made in the throwaway database; nothing of it is in the package.

Method. A throwaway database ``statecharts_bench_<pid>`` is created on the server of
``--pg-url``, migrated, and dropped afterwards. ``max(--executions)`` rows of each system are
made: ours, one ``stepper.start`` whose execution and start history row are then copied with
``INSERT ... SELECT generate_series`` (each copy its own session id: what ``start`` writes for
this chart, minus the start's own cost); the peers' documents by ``bulk_create``. Then
``max(--processes)`` worker processes (this script, ``--worker``) connect and wait. A *cell* is
(system, N, processes): each of that many workers takes ``--steps`` steps, each to a random row
among the first N of that system (its own seeded generator), all starting at one moment;
steps/s = all steps / (last end - first start). A *round* runs every cell once, the systems'
order rotated each round; ``--rounds`` timed rounds after ``--warmup`` untimed steps of each
system per worker and N. Reported: the MEDIAN steps/s of each cell, the ratios ours / peer on
medians, and the median and range of the per-round ratios (a measure of the noise: other work
on the machine shifts whole rounds). Also this process's CPU per step (``time.process_time``
of the workers) and the load average before and after. Afterwards every row is verified:
each worker reports which rows it stepped, and every row's state, counter and history/audit
rows must match exactly the number of events it was sent (ours: ``steps``, history rows,
configuration, and the datamodel's ``count`` of a sample of rows, decoded).

``--profile`` then has one worker take ``--profile-steps`` random-over-N steps of each system
(N = the first of ``--executions``), timing the parts of a step (``time.perf_counter`` around
each; no cProfile, so the numbers are microseconds, not shares of an inflated run): for ours,
the lock (with BEGIN), the chart lookup, the position decode, the interpreter and inside it
the datamodel engine's reset, take and restore, the encode, the execution UPDATE, the history
INSERT, the COMMIT, and what is left; for each peer, lock, transition, save, audit INSERT and
COMMIT. Each SQL statement is timed on its own too (``connection.execute_wrapper``), and one
empty round trip (``SELECT 1``) is given for scale. A probe whose function is no longer there
is reported as MISSING (the profile then needs updating), never as 0.

Usage (from the repository root; the peers come from the ``bench`` extra)::

    python benchmarks/many_executions.py [--executions 1000 [100000]] [--processes 1 4]
                                         [--steps 200] [--rounds 9] [--warmup 50]
                                         [--profile] [--profile-steps 500]
                                         [--pg-url URL] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import shlex
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any

HERE = Path(__file__).resolve().parent
# A --baseline worker imports the project from another checkout (BENCH_REPO).
REPO = Path(os.environ.get("BENCH_REPO") or HERE.parent)
for _path in (str(REPO), str(HERE)):  # the working tree, and bench_peers + durable_steps
    if _path not in sys.path:
        sys.path.insert(0, _path)

from durable_steps import (  # noqa: E402  (a sibling script, not a package)
    DEFAULT_PG_URL,
    server_description,
    throwaway_database,
)

SETTINGS = "bench_peers.settings"
EVENT = "advance"
OURS, FSM, PYSM = "ours", "django-fsm-2", "python-statemachine"
BASE = "ours@baseline"  # --baseline: the same step by another checkout of the project
SYSTEMS: tuple[str, ...] = (OURS, FSM, PYSM)
CYCLE = ("a", "b", "c")  # the state after k events is CYCLE[k % 3]; count is (k + 1) // 3
VERIFY_DECODED = 300  # ours: executions whose datamodel count is decoded and checked
TARGET = 1.2  # issue 16: ours >= 1.2x django-fsm-2

CHART = """\
<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"
       name="bench_many" initial="a">
  <datamodel>
    <data id="count" expr="0"/>
    <data id="limit" expr="1000000000"/>
  </datamodel>
  <state id="a"><transition event="advance" target="b"/></state>
  <state id="b">
    <transition event="advance" cond="count &lt; limit" target="c">
      <assign location="count" expr="count + 1"/>
    </transition>
  </state>
  <state id="c"><transition event="advance" target="a"/></state>
</scxml>
"""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


# ============================================================================ worker process


def setup_worker_django(database_url: str) -> None:
    os.environ["DATABASE_URL"] = database_url
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
    os.environ["DJANGO_DEBUG"] = "0"
    import django

    django.setup()


class Steps:
    """One durable step of each system, for one row (the worker's hot loop calls these)."""

    def __init__(self) -> None:
        from bench_peers.models import FsmAudit, FsmDocument, PysmAudit, PysmDocument
        from django.db import transaction
        from django.utils import timezone

        from statecharts import stepper

        self._atomic = transaction.atomic
        self._now = timezone.now
        self._send = stepper.send
        self._fsm, self._fsm_audit = FsmDocument.objects, FsmAudit.objects
        self._pysm, self._pysm_audit = PysmDocument.objects, PysmAudit.objects
        self.by_system: dict[str, Callable[[int], None]] = {
            OURS: self.ours,
            BASE: self.ours,  # (in a baseline worker, self.ours is the baseline's stepper)
            FSM: self.fsm,
            PYSM: self.pysm,
        }

    def ours(self, pk: int) -> None:
        self._send(pk, EVENT)

    def fsm(self, pk: int) -> None:
        with self._atomic(durable=True):
            document = self._fsm.select_for_update().get(pk=pk)
            source = document.state
            document.advance()
            now = self._now()
            document.updated = now
            document.save()
            self._fsm_audit.create(
                document=document, event=EVENT, source=source, target=document.state, created=now
            )

    def pysm(self, pk: int) -> None:
        with self._atomic(durable=True):
            document = self._pysm.select_for_update().get(pk=pk)
            source = document.state
            document.statemachine.send(EVENT)
            now = self._now()
            document.updated = now
            document.save()
            self._pysm_audit.create(
                document=document, event=EVENT, source=source, target=document.state, created=now
            )


def worker_main() -> int:
    """Read one JSON command per line on stdin, answer one JSON line on stdout."""
    setup_worker_django(os.environ["BENCH_DATABASE_URL"])
    steps = Steps()
    ids: dict[str, list[int]] = {}
    rng = random.Random(int(os.environ.get("BENCH_SEED", "0")))
    out = sys.stdout
    print(json.dumps({"ready": os.getpid()}), file=out, flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        kind = command["cmd"]
        if kind == "quit":
            break
        if kind == "ids":
            ids = command["ids"]
            answer: dict[str, Any] = {"ok": True}
        elif kind == "run":
            answer = worker_cell(steps, ids, rng, command)
        elif kind == "profile":
            answer = run_profile(steps, ids, rng, command)
        elif kind == "server_cost":
            answer = worker_server_cost(steps, ids, rng, command)
        else:
            answer = {"error": f"unknown command {kind!r}"}
        print(json.dumps(answer), file=out, flush=True)
    from django.db import connections

    connections.close_all()
    return 0


def worker_cell(
    steps: Steps, ids: dict[str, list[int]], rng: random.Random, command: dict[str, Any]
) -> dict[str, Any]:
    import gc

    step = steps.by_system[command["system"]]
    pool = ids[command["system"]][: command["n"]]
    chosen = [pool[rng.randrange(len(pool))] for _ in range(command["steps"])]
    gc.collect()
    while time.perf_counter() < command["start_at"]:  # all workers of a cell start together
        pass
    cpu, start = time.process_time(), time.perf_counter()
    for pk in chosen:
        step(pk)
    end, cpu = time.perf_counter(), time.process_time() - cpu
    return {"start": start, "end": end, "cpu": cpu, "stepped": dict(Counter(chosen))}


# ---------------------------------------------------------------------------- the profile


class Probes:
    """Inclusive wall time of named functions, by wrapping them where they are looked up.

    A target that is not there any more is recorded as missing (its name is reported), so a
    renamed function shows up as a stale probe, never as a phase that costs 0 us."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: Counter[str] = Counter()
        self.missing: dict[str, str] = {}
        self._undo: list[tuple[Any, str, Any]] = []
        self._depth: Counter[str] = Counter()

    def wrap(self, label: str, owner: Any, name: str) -> None:
        original = getattr(owner, name, None)
        if original is None:
            self.missing[label] = f"{getattr(owner, '__name__', owner)}.{name}"
            return
        seconds, calls, depth = self.seconds, self.calls, self._depth
        clock = time.perf_counter

        def timed(*args: Any, **kwargs: Any) -> Any:
            depth[label] += 1
            begin = clock()
            try:
                return original(*args, **kwargs)
            finally:
                depth[label] -= 1
                if not depth[label]:  # a recursive call is counted once, outermost
                    seconds[label] += clock() - begin
                    calls[label] += 1

        self._undo.append((owner, name, original))
        setattr(owner, name, timed)

    def undo(self) -> None:
        for owner, name, original in reversed(self._undo):
            setattr(owner, name, original)
        self._undo.clear()


def classify(sql: str) -> str:
    head = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
    if head == "SELECT" and "FOR UPDATE" in sql.upper():
        return "SELECT ... FOR UPDATE"
    return head or "?"


@contextmanager
def statement_timer(totals: dict[str, float], counts: Counter[str]) -> Iterator[None]:
    """Time every SQL statement by kind (``connection.execute_wrapper``)."""
    from django.db import connection

    def timer(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        begin = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            kind = classify(sql)
            totals[kind] += time.perf_counter() - begin
            counts[kind] += 1

    with connection.execute_wrapper(timer):
        yield


def round_trip_us(repeat: int = 300) -> float:
    from django.db import connection

    with connection.cursor() as cursor:
        took = []
        for _ in range(repeat):
            begin = time.perf_counter()
            cursor.execute("SELECT 1")
            cursor.fetchone()
            took.append(time.perf_counter() - begin)
    return 1e6 * statistics.median(took)


def _commit_probe(probes: Probes) -> None:
    from django.db import connections

    from statecharts.stepper import sql

    probes.wrap("COMMIT", connections[sql.database()], "commit")


# (label, module, attribute path): the phases of our step, inclusive. Nesting is by label
# prefix ("interpreter/..." is inside "interpreter"); see OURS_TREE for how they are shown.
OURS_PROBES: tuple[tuple[str, str, str], ...] = (
    ("lock", "statecharts.stepper.sql", "lock_execution"),
    ("chart", "statecharts.stepper.stepping", "compiled_chart"),
    ("decode", "statecharts.stepper.stepping", "_load_position"),
    ("interpreter", "statecharts.stepper.applying", "advance"),
    ("interpreter/reset", "statecharts.core.interpreter", "Interpreter._discard_live"),
    ("interpreter/take", "statecharts.core.interpreter", "Interpreter._new_datamodel"),
    ("interpreter/take/build", "statecharts.core.datamodel.ecmascript", "_Engine.__init__"),
    (
        "interpreter/restore",
        "statecharts.core.datamodel.ecmascript",
        "EcmascriptDatamodel.restore",
    ),
    ("encode", "statecharts.stepper.applying", "encode"),
    ("perform", "statecharts.stepper.applying", "perform"),
    ("update", "statecharts.stepper.sql", "update_row"),
    ("insert", "statecharts.stepper.sql", "insert_row"),
    ("write", "statecharts.stepper.sql", "update_and_insert"),
)


def _owner(module: str, path: str) -> tuple[Any, str]:
    import importlib

    owner: Any = importlib.import_module(module)
    *parents, name = path.split(".")
    for parent in parents:
        owner = getattr(owner, parent)
    return owner, name


def profile_ours(step: Callable[[int], None], chosen: list[int]) -> dict[str, Any]:
    probes = Probes()
    for label, module, path in OURS_PROBES:
        try:
            owner, name = _owner(module, path)
        except (ImportError, AttributeError):
            probes.missing[label] = f"{module}.{path}"
            continue
        probes.wrap(label, owner, name)
    _commit_probe(probes)
    statements: dict[str, float] = defaultdict(float)
    counted: Counter[str] = Counter()
    total = 0.0
    try:
        with statement_timer(statements, counted):
            for pk in chosen:
                begin = time.perf_counter()
                step(pk)
                total += time.perf_counter() - begin
    finally:
        probes.undo()
    return {
        "total": total,
        "seconds": dict(probes.seconds),
        "calls": dict(probes.calls),
        "missing": probes.missing,
        "statements": dict(statements),
        "statement_counts": dict(counted),
    }


def profile_peer(system: str, chosen: list[int]) -> dict[str, Any]:
    """The peer's step with a clock read between its parts (the same statements as
    ``Steps.fsm`` / ``Steps.pysm``)."""
    from bench_peers.models import FsmAudit, FsmDocument, PysmAudit, PysmDocument
    from django.db import transaction
    from django.utils import timezone

    documents, audits = (
        (FsmDocument.objects, FsmAudit.objects)
        if system == FSM
        else (PysmDocument.objects, PysmAudit.objects)
    )
    parts: dict[str, float] = defaultdict(float)
    statements: dict[str, float] = defaultdict(float)
    counted: Counter[str] = Counter()
    clock = time.perf_counter
    total = 0.0
    with statement_timer(statements, counted):
        for pk in chosen:
            t0 = clock()
            with transaction.atomic(durable=True):
                document = documents.select_for_update().get(pk=pk)
                t1 = clock()
                source = document.state
                if system == FSM:
                    document.advance()
                else:
                    document.statemachine.send(EVENT)
                now = timezone.now()
                document.updated = now
                t2 = clock()
                document.save()
                t3 = clock()
                audits.create(
                    document=document,
                    event=EVENT,
                    source=source,
                    target=document.state,
                    created=now,
                )
                t4 = clock()
            t5 = clock()
            parts["lock"] += t1 - t0
            parts["transition"] += t2 - t1
            parts["update"] += t3 - t2
            parts["insert"] += t4 - t3
            parts["COMMIT"] += t5 - t4
            total += t5 - t0
    return {
        "total": total,
        "seconds": dict(parts),
        "statements": dict(statements),
        "statement_counts": dict(counted),
    }


FLOOR_SESSION = "bench-floor"  # the executions the statement variants write (not verified)
SHARED_COMMIT = 5  # executions whose steps one transaction commits together, in a variant


def _captured_statements(step: Callable[[], None]) -> list[tuple[str, list[Any]]]:
    """The SQL and parameters of every statement ``step`` sends."""
    from django.db import connection

    captured: list[tuple[str, list[Any]]] = []

    def capture(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        captured.append((sql, list(params or ())))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        step()
    return captured


def statement_variants(count: int) -> dict[str, Any]:
    """Our step's own statements (captured from a real step), replayed on psycopg directly in
    the ways the issue's round-trip levers would send them, interleaved in a rotating order:
    what each saves.

    The rows are dedicated executions' (``FLOOR_SESSION``); every variant locks one, writes
    the same position and inserts one history row (a new ``seq`` each time), and commits; the
    last one does that for ``SHARED_COMMIT`` executions in one transaction (timed per step),
    the lever of sharing one COMMIT among several executions' steps."""
    from django.db import connection

    from statecharts import stepper
    from statecharts.models import Chart, Execution, HistoryEntry

    chart = Chart.objects.load(CHART)
    pk = stepper.start(chart, session_id=f"{FLOOR_SESSION}-{os.getpid()}").pk
    sharing = [
        stepper.start(chart, session_id=f"{FLOOR_SESSION}-{os.getpid()}-{index}").pk
        for index in range(SHARED_COMMIT)
    ]
    statements = _captured_statements(lambda: stepper.send(pk, EVENT))
    kinds = [classify(sql) for sql, _ in statements]
    if kinds == ["SELECT ... FOR UPDATE", "WITH"]:
        return _merged_variants(count, pk, sharing, statements)
    if kinds != ["SELECT ... FOR UPDATE", "UPDATE", "INSERT"]:
        return {"error": f"a step sent {kinds}, not lock, UPDATE, INSERT: update the variants"}
    (lock_sql, _), (update_sql, update_params), (insert_sql, insert_params) = statements
    quote = connection.ops.quote_name
    columns = ", ".join(quote(f.column) for f in Execution._meta.concrete_fields)
    table = quote(Execution._meta.db_table)
    plain_lock_sql = f"SELECT {columns} FROM {table} WHERE {quote('id')} = %s FOR UPDATE"
    inserted = [f.attname for f in HistoryEntry._meta.concrete_fields if not f.primary_key]
    seq_at = inserted.index("seq")
    execution_at = inserted.index("execution_id")
    merged_sql = f"WITH updated AS ({update_sql} RETURNING 1) {insert_sql}"
    seq = [1_000_000]

    def insert_args(execution: int | None = None) -> list[Any]:
        seq[0] += 1
        args = list(insert_params)
        args[seq_at] = seq[0]
        if execution is not None:
            args[execution_at] = execution
        return args

    connection.ensure_connection()
    raw = connection.connection  # psycopg, autocommit (Django's default outside atomic)
    cursor = raw.cursor()

    def sequential(lock: str, merge: bool) -> None:
        cursor.execute("BEGIN")
        cursor.execute(lock, [pk])
        cursor.fetchone()
        if merge:
            cursor.execute(merged_sql, [*update_params, *insert_args()])
        else:
            cursor.execute(update_sql, update_params)
            cursor.execute(insert_sql, insert_args())
        cursor.fetchone()
        cursor.execute("COMMIT")

    def pipelined(lock: str, merge: bool) -> None:
        with raw.pipeline():
            cursor.execute("BEGIN")
            cursor.execute(lock, [pk])
        cursor.fetchone()  # (the interpreter would run here, between the two round trips)
        with raw.pipeline():
            if merge:
                cursor.execute(merged_sql, [*update_params, *insert_args()])
            else:
                cursor.execute(update_sql, update_params)
                cursor.execute(insert_sql, insert_args())
            cursor.execute("COMMIT")

    def shared_commit() -> None:
        """SHARED_COMMIT executions' steps in one transaction (ascending ids), one COMMIT."""
        cursor.execute("BEGIN")
        for execution in sharing:
            cursor.execute(lock_sql, [execution])
            cursor.fetchone()
            cursor.execute(update_sql, [*update_params[:-1], execution])
            cursor.execute(insert_sql, insert_args(execution))
            cursor.fetchone()
        cursor.execute("COMMIT")

    variants: dict[str, Callable[[], None]] = {
        "as the stepper sends them: BEGIN, lock (chart joined), UPDATE, INSERT, COMMIT"
        " (5 round trips)": lambda: sequential(lock_sql, False),
        "the lock without the chart join": lambda: sequential(plain_lock_sql, False),
        "UPDATE and INSERT in one statement (WITH ... INSERT; 4 round trips)": lambda: sequential(
            lock_sql, True
        ),
        "pipelined: BEGIN + lock, then UPDATE + INSERT + COMMIT (2 round trips)": lambda: pipelined(
            lock_sql, False
        ),
        "all three: no join, one write statement, pipelined (2 round trips)": lambda: pipelined(
            plain_lock_sql, True
        ),
        f"{SHARED_COMMIT} executions' steps in one transaction, one COMMIT (per step)": (
            shared_commit
        ),
    }
    return _time_variants(variants, count, cursor)


def _merged_variants(
    count: int, pk: int, sharing: list[int], statements: list[tuple[str, list[Any]]]
) -> dict[str, Any]:
    """``statement_variants`` for a stepper that already sends the lock without the chart
    join and the UPDATE + INSERT as one statement (``statecharts.stepper.postgres``): that
    shape as sent, pipelined, and with the COMMIT shared by ``SHARED_COMMIT`` steps."""
    from django.db import connection

    from statecharts.models import HistoryEntry

    (lock_sql, _), (write_sql, write_params) = statements
    update_part = write_sql[: write_sql.index(" INSERT INTO ")]
    pk_at = update_part.count("%s") - 1  # the UPDATE's WHERE id = %s
    inserted = [
        f.attname
        for f in HistoryEntry._meta.concrete_fields
        if not f.primary_key and f.attname != "execution_id"
    ]
    seq_at = pk_at + 1 + inserted.index("seq")
    seq = [1_000_000]

    def args(execution: int) -> list[Any]:
        seq[0] += 1
        values = list(write_params)
        values[pk_at], values[seq_at] = execution, seq[0]
        return values

    connection.ensure_connection()
    raw = connection.connection
    cursor = raw.cursor()

    def sequential() -> None:
        cursor.execute("BEGIN")
        cursor.execute(lock_sql, [pk])
        cursor.fetchone()
        cursor.execute(write_sql, args(pk))
        cursor.fetchone()
        cursor.execute("COMMIT")

    def pipelined() -> None:
        with raw.pipeline():
            cursor.execute("BEGIN")
            cursor.execute(lock_sql, [pk])
        cursor.fetchone()
        with raw.pipeline():
            cursor.execute(write_sql, args(pk))
            cursor.execute("COMMIT")

    def shared_commit() -> None:
        cursor.execute("BEGIN")
        for execution in sharing:
            cursor.execute(lock_sql, [execution])
            cursor.fetchone()
            cursor.execute(write_sql, args(execution))
            cursor.fetchone()
        cursor.execute("COMMIT")

    variants: dict[str, Callable[[], None]] = {
        "as the stepper sends them: BEGIN, lock (no join), UPDATE + INSERT in one statement,"
        " COMMIT (4 round trips)": sequential,
        "pipelined: BEGIN + lock, then UPDATE + INSERT + COMMIT (2 round trips)": pipelined,
        f"{SHARED_COMMIT} executions' steps in one transaction, one COMMIT (per step)": (
            shared_commit
        ),
    }
    return _time_variants(variants, count, cursor)


def _time_variants(
    variants: dict[str, Callable[[], None]], count: int, cursor: Any
) -> dict[str, Any]:
    steps_per_call = {name: SHARED_COMMIT if "one COMMIT" in name else 1 for name in variants}
    took: dict[str, list[float]] = {name: [] for name in variants}
    clock = time.perf_counter
    names = list(variants)
    for index in range(count):  # the order rotates: no variant always follows the same one
        turn = index % len(names)
        for name in names[turn:] + names[:turn]:
            begin = clock()
            variants[name]()
            took[name].append((clock() - begin) / steps_per_call[name])
    cursor.close()
    return {
        "steps": count,
        "median_us": {name: 1e6 * statistics.median(values) for name, values in took.items()},
        "mean_us": {name: 1e6 * statistics.fmean(values) for name, values in took.items()},
    }


def run_profile(
    steps: Steps, ids: dict[str, list[int]], rng: random.Random, command: dict[str, Any]
) -> dict[str, Any]:
    count, n = command["steps"], command["n"]
    result: dict[str, Any] = {"steps": count, "n": n, "round_trip_us": round_trip_us()}
    for system in (OURS, FSM, PYSM):
        pool = ids[system][:n]
        chosen = [pool[rng.randrange(len(pool))] for _ in range(count)]
        if system == OURS:
            result[system] = profile_ours(steps.ours, chosen)
        else:
            result[system] = profile_peer(system, chosen)
        result[system]["stepped"] = dict(Counter(chosen))
    result["round_trip_after_us"] = round_trip_us()
    result["variants"] = statement_variants(count)
    return result


# ---------------------------------------------------------------------------- server cost


def _backend_cpu_ns() -> int | None:
    """CPU time this connection's server process has used (ns), read from its
    ``/proc/<pid>/schedstat``; None when the server is not on this machine (or not Linux)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    try:
        with open(f"/proc/{pid}/schedstat", encoding="ascii") as file:
            return int(file.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def worker_server_cost(
    steps: Steps, ids: dict[str, list[int]], rng: random.Random, command: dict[str, Any]
) -> dict[str, Any]:
    """``command["steps"]`` steps of one system to random rows of the first N, counting the
    statements sent and the server process's CPU time (the parent reads the WAL around it)."""
    from django.db import connection

    step = steps.by_system[command["system"]]
    pool = ids[command["system"]][: command["n"]]
    chosen = [pool[rng.randrange(len(pool))] for _ in range(command["steps"])]
    statements = 0

    def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        nonlocal statements
        statements += 1
        return execute(sql, params, many, context)

    server = _backend_cpu_ns()
    cpu = time.process_time()
    with connection.execute_wrapper(count):
        for pk in chosen:
            step(pk)
    cpu = time.process_time() - cpu
    after = _backend_cpu_ns()
    return {
        "stepped": dict(Counter(chosen)),
        "statements": statements,
        "client_cpu_us": 1e6 * cpu / len(chosen),
        "server_cpu_us": None
        if server is None or after is None
        else (after - server) / 1e3 / len(chosen),
    }


_RELATION = re.compile(r"rel \d+/(\d+)/(\d+)")


def _wal_between(admin: Any, start: str, end: str, database: int) -> list[tuple[Any, ...]]:
    """The WAL records between two LSNs that belong to ``database``: those naming its
    relations, and the COMMITs (and other relation-less records) of their transactions.
    Other databases' WAL on a shared server is left out."""
    for _ in range(200):  # (pg_walinspect reads flushed WAL only)
        if admin.execute("SELECT pg_current_wal_flush_lsn() >= %s::pg_lsn", [end]).fetchone()[0]:
            break
        time.sleep(0.05)
    rows = admin.execute(
        "SELECT xid::text::bigint, resource_manager, record_type, record_length, fpi_length,"
        " coalesce(block_ref, '') FROM pg_get_wal_records_info(%s, %s)",
        [start, end],
    ).fetchall()
    ours = [r for r in rows if {int(m.group(1)) for m in _RELATION.finditer(r[5])} == {database}]
    xids = {r[0] for r in ours if r[0]}
    return ours + [r for r in rows if not _RELATION.search(r[5]) and r[0] in xids]


def server_cost(
    args: argparse.Namespace, url: str, worker: Worker, baseline: Worker | None, tally: Tally
) -> dict[str, Any]:
    """Per system: WAL records and bytes per step (pg_walinspect), full-page images per step
    after a CHECKPOINT, the server process's CPU per step, statements per step. One worker,
    ``--server-cost-steps`` steps to random rows of the first N (after as many warm-up steps):
    counted, not timed (except the CPU), so the machine's load hardly moves them."""
    import psycopg
    from durable_steps import _pg_connect_kwargs

    n, count = args.executions[0], args.server_cost_steps
    admin = psycopg.connect(**{**_pg_connect_kwargs(url), "autocommit": True})
    try:
        try:
            admin.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
            # (a temporary slot keeps the windows' WAL from being recycled by a checkpoint on
            # a busy server before it is read; it goes when this session ends)
            admin.execute(
                "SELECT pg_create_physical_replication_slot(%s, true, true)",
                [f"bench_many_{os.getpid()}"],
            )
            walinspect = True
        except psycopg.Error:
            walinspect = False
        (database,) = admin.execute(
            "SELECT oid FROM pg_database WHERE datname = current_database()"
        ).fetchone()
        names = dict(
            admin.execute(
                "SELECT pg_relation_filenode(oid)::text, relname FROM pg_class"
                " WHERE relnamespace = 'public'::regnamespace"
            ).fetchall()
        )
        systems = [s for s in SYSTEMS if s != PYSM]
        result: dict[str, Any] = {"n": n, "steps": count, "walinspect": walinspect}
        for checkpoint in (False, True):
            for system in systems:
                command = {"cmd": "server_cost", "system": system, "n": n, "steps": count}
                runner = baseline if system == BASE and baseline is not None else worker
                if not checkpoint:  # (warm-up: the rows' pages in their steady state)
                    runner.send(command)
                    tally.add(system, runner.answer()["stepped"])
                if checkpoint:
                    admin.execute("CHECKPOINT")
                (start,) = admin.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
                runner.send(command)
                answer = runner.answer()
                tally.add(system, answer.pop("stepped"))
                (end,) = admin.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
                cell = answer
                if walinspect:
                    records = _wal_between(admin, start, end, database)
                    mix: Counter[str] = Counter()
                    images: Counter[str] = Counter()
                    for _xid, manager, kind, _length, fpi, refs in records:
                        found = _RELATION.search(refs)
                        relation = names.get(found.group(2), "?") if found else "-"
                        mix[f"{relation}: {manager}/{kind.split(' ')[0]}"] += 1
                        if fpi:
                            images[relation] += fpi
                    cell.update(
                        records=len(records) / count,
                        bytes=sum(r[3] - r[4] for r in records) / count,
                        fpi_bytes=sum(r[4] for r in records) / count,
                        mix={k: v / count for k, v in mix.most_common()},
                        fpi_by_relation={k: v / count for k, v in images.most_common()},
                    )
                result[f"{system}|{'checkpoint' if checkpoint else 'steady'}"] = cell
                when = " after a CHECKPOINT" if checkpoint else ""
                log(f"server cost: {system}{when}: {cell.get('records', 0):.2f} records/step")
    finally:
        admin.close()
    return result


def render_server_cost(cost: dict[str, Any]) -> list[str]:
    n, count = cost["n"], cost["steps"]
    systems = [s for s in SYSTEMS if f"{s}|steady" in cost]
    lines = [
        "",
        f"## Server cost per durable step (N={n:,}, one process, {count:,} steps each; counted,"
        " not timed: the load hardly moves these)",
        "",
        "| system | WAL records/step | WAL bytes/step (no FPI) | after a CHECKPOINT: records;"
        " FPI bytes/step | server CPU us/step | client CPU us/step | statements/step"
        " (+ BEGIN, COMMIT) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for system in systems:
        steady, after = cost[f"{system}|steady"], cost[f"{system}|checkpoint"]
        server = [c["server_cpu_us"] for c in (steady, after) if c["server_cpu_us"] is not None]
        nan = float("nan")
        lines.append(
            f"| {system} | {steady.get('records', nan):.2f} | {steady.get('bytes', nan):,.0f}"
            f" | {after.get('records', nan):.2f}; {after.get('fpi_bytes', nan):,.0f}"
            f" | {', '.join(f'{x:,.0f}' for x in server) or 'n/a'}"
            f" | {steady['client_cpu_us']:,.0f} | {steady['statements'] / count:.2f} |"
        )
    if not cost["walinspect"]:
        lines.append("(pg_walinspect is not available on this server: no WAL counts)")
    lines.append("")
    lines.append("WAL records per step by relation (steady state; >= 0.02 per step):")
    for system in systems:
        mix = cost[f"{system}|steady"].get("mix", {})
        shown = ", ".join(f"{k} {v:.2f}" for k, v in mix.items() if v >= 0.02)
        lines.append(f"- {system}: {shown}")
    lines.append("")
    lines.append("Full-page image bytes per step by relation, after a CHECKPOINT:")
    for system in systems:
        images = cost[f"{system}|checkpoint"].get("fpi_by_relation", {})
        lines.append(f"- {system}: " + ", ".join(f"{k} {v:,.0f}" for k, v in images.items()))
    return lines


# ============================================================================ parent process


def setup_parent_django(database_url: str) -> None:
    os.environ["DATABASE_URL"] = database_url
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
    os.environ["DJANGO_DEBUG"] = "0"
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)
    from bench_peers.models import FsmAudit, FsmDocument, PysmAudit, PysmDocument
    from django.db import connection

    with connection.schema_editor() as editor:
        for model in (FsmDocument, FsmAudit, PysmDocument, PysmAudit):
            editor.create_model(model)


def make_rows(count: int) -> dict[str, list[int]]:
    """``count`` rows of each system, in their initial state; their ids, in id order."""
    from bench_peers.models import FsmDocument, PysmDocument
    from django.db import connection

    from statecharts import stepper
    from statecharts.models import Chart, Execution, HistoryEntry

    chart = Chart.objects.load(CHART)
    template = stepper.start(chart)
    entry = HistoryEntry.objects.get(execution=template)
    quote = connection.ops.quote_name

    def copy_sql(model: Any, computed: dict[str, str], where: str) -> str:
        columns, expressions = [], []
        for field in model._meta.concrete_fields:
            if field.primary_key:
                continue
            columns.append(quote(field.column))
            expressions.append(computed.get(field.column, f"t.{quote(field.column)}"))
        return (
            f"INSERT INTO {quote(model._meta.db_table)} ({', '.join(columns)}) "
            f"SELECT {', '.join(expressions)} {where}"
        )

    if count > 1:
        executions = copy_sql(
            Execution,
            {"session_id": "'bench-many-' || g"},
            f"FROM {quote(Execution._meta.db_table)} t, generate_series(2, %s) AS g"
            " WHERE t.id = %s ORDER BY g",
        )
        history = copy_sql(
            HistoryEntry,
            {"execution_id": "e.id"},
            f"FROM {quote(HistoryEntry._meta.db_table)} t, {quote(Execution._meta.db_table)} e"
            " WHERE t.id = %s AND e.session_id LIKE 'bench-many-%%' ORDER BY e.id",
        )
        with connection.cursor() as cursor:
            cursor.execute(executions, [count, template.pk])
            cursor.execute(history, [entry.pk])
    ours = list(Execution.objects.filter(chart=chart).order_by("pk").values_list("pk", flat=True))
    batch = 5_000
    for model in (FsmDocument, PysmDocument):
        for start in range(0, count, batch):
            model.objects.bulk_create(
                [model() for _ in range(min(batch, count - start))], batch_size=batch
            )
    with connection.cursor() as cursor:
        for table in (
            "statecharts_execution",
            "statecharts_historyentry",
            FsmDocument._meta.db_table,
            PysmDocument._meta.db_table,
        ):
            cursor.execute(f"ANALYZE {quote(table)}")
    return {
        OURS: ours,
        FSM: list(FsmDocument.objects.order_by("pk").values_list("pk", flat=True)),
        PYSM: list(PysmDocument.objects.order_by("pk").values_list("pk", flat=True)),
    }


class Worker:
    def __init__(self, index: int, database_url: str, seed: int, repo: Path | None = None) -> None:
        env = dict(os.environ)
        env.pop("BENCH_REPO", None)
        if repo is not None:
            env["BENCH_REPO"] = str(repo)
        env.update(
            BENCH_DATABASE_URL=database_url,
            BENCH_SEED=str(seed),
            DJANGO_SETTINGS_MODULE=SETTINGS,
            DJANGO_DEBUG="0",
        )
        self.index = index
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env=env,
        )
        self.answer()  # ready

    def send(self, command: dict[str, Any]) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write(json.dumps(command) + "\n")
        stdin.flush()

    def answer(self) -> dict[str, Any]:
        stdout: IO[str] | None = self.process.stdout
        assert stdout is not None
        line = stdout.readline()
        if not line:
            raise SystemExit(f"worker {self.index} died (exit {self.process.wait()})")
        answer = json.loads(line)
        if "error" in answer:
            raise SystemExit(f"worker {self.index}: {answer['error']}")
        return answer

    def stop(self) -> None:
        with suppress(BrokenPipeError, OSError):
            self.send({"cmd": "quit"})
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class Tally:
    """Events sent to each row, per system (for the verification)."""

    def __init__(self) -> None:
        self.sent: dict[str, Counter[int]] = {system: Counter() for system in SYSTEMS}

    def add(self, system: str, stepped: dict[str, int]) -> None:
        system = OURS if system == BASE else system  # (the baseline steps our rows)
        for pk, count in stepped.items():
            self.sent[system][int(pk)] += count


def run_cell(
    workers: Sequence[Worker], system: str, n: int, steps: int, tally: Tally
) -> tuple[float, float]:
    """All ``workers`` take ``steps`` steps of ``system`` at once: (steps/s, CPU us/step)."""
    start_at = time.perf_counter() + 0.05
    for worker in workers:
        worker.send({"cmd": "run", "system": system, "n": n, "steps": steps, "start_at": start_at})
    answers = [worker.answer() for worker in workers]
    for answer in answers:
        tally.add(system, answer["stepped"])
    elapsed = max(a["end"] for a in answers) - min(a["start"] for a in answers)
    total = steps * len(workers)
    cpu = sum(a["cpu"] for a in answers)
    return total / elapsed, 1e6 * cpu / total


Cell = tuple[str, int, int]  # (system, executions, processes)


def measure(
    args: argparse.Namespace,
    workers: Sequence[Worker],
    tally: Tally,
    baseline: Sequence[Worker] = (),
) -> tuple[dict[Cell, list[float]], dict[Cell, list[float]], list[str]]:
    rates: dict[Cell, list[float]] = defaultdict(list)
    cpus: dict[Cell, list[float]] = defaultdict(list)
    loads = [load_average()]
    if args.warmup:
        for n in args.executions:
            for system in SYSTEMS:
                log(f"warm-up: {system}, N={n:,}, {args.warmup} steps in each worker")
                run_cell(baseline if system == BASE else workers, system, n, args.warmup, tally)
    for index in range(args.rounds):
        turn = index % len(SYSTEMS)
        order = SYSTEMS[turn:] + SYSTEMS[:turn]
        for n in args.executions:
            for processes in args.processes:
                for system in order:
                    pool = baseline if system == BASE else workers
                    rate, cpu = run_cell(pool[:processes], system, n, args.steps, tally)
                    rates[(system, n, processes)].append(rate)
                    cpus[(system, n, processes)].append(cpu)
                said = ", ".join(f"{s} {rates[(s, n, processes)][-1]:,.0f}/s" for s in SYSTEMS)
                log(f"round {index + 1}/{args.rounds}, N={n:,}, {processes} proc: {said}")
        loads.append(load_average())
    return rates, cpus, loads


# ---------------------------------------------------------------------------- verification


def verify(tally: Tally) -> list[str]:
    """Every row took exactly the events it was sent (state, counter, history/audit rows)."""
    from bench_peers.models import FsmAudit, FsmDocument, PysmAudit, PysmDocument
    from django.db.models import Count

    from statecharts.core.position import decode
    from statecharts.models import Execution, HistoryEntry

    problems: list[str] = []

    def check(system: str, pk: int, sent: int, state: str, count: int, rows: int) -> None:
        expected = (CYCLE[sent % 3], (sent + 1) // 3, sent)
        if (state, count, rows) != expected:
            problems.append(
                f"{system} row {pk}: sent {sent} events, found state {state!r} count {count} "
                f"and {rows} history/audit rows; expected {expected}"
            )

    for system, documents, audits in (
        (FSM, FsmDocument, FsmAudit),
        (PYSM, PysmDocument, PysmAudit),
    ):
        sent = tally.sent[system]
        audited = dict(
            audits.objects.values_list("document_id")
            .annotate(n=Count("id"))
            .values_list("document_id", "n")
        )
        for pk, state, count in documents.objects.values_list("pk", "state", "count"):
            check(system, pk, sent.get(pk, 0), state, count, audited.get(pk, 0))
    sent = tally.sent[OURS]
    history = dict(
        HistoryEntry.objects.filter(disposition="applied")
        .values_list("execution_id")
        .annotate(n=Count("id"))
        .values_list("execution_id", "n")
    )
    sample = set(random.Random(7).sample(sorted(sent), min(VERIFY_DECODED, len(sent))))
    for pk, status, steps, configuration in Execution.objects.exclude(
        session_id__startswith=FLOOR_SESSION
    ).values_list("pk", "status", "steps", "configuration"):
        k = sent.get(pk, 0)
        state = configuration[0] if len(configuration) == 1 else repr(configuration)
        count = (k + 1) // 3
        if pk in sample:
            position = Execution.objects.values_list("position", flat=True).get(pk=pk)
            count = decode(bytes(position)).state.datamodel.get("count")
        check(OURS, pk, k, state, count, history.get(pk, 0) - 1)
        if status != "active" or steps != 1 + k:
            problems.append(f"ours row {pk}: status {status}, steps {steps}, sent {k}")
    return problems


# ---------------------------------------------------------------------------- report


def _median(values: Sequence[float]) -> float:
    return statistics.median(values)


def render(
    args: argparse.Namespace,
    command: str,
    server: str,
    settings: dict[str, str],
    versions: dict[str, str],
    rates: dict[Cell, list[float]],
    cpus: dict[Cell, list[float]],
    loads: list[str],
    profile: dict[str, Any] | None,
) -> str:
    lines = [
        f"command: {command}",
        f"python:  {platform.python_implementation()} {platform.python_version()}"
        f" on {platform.platform()} ({os.cpu_count()} CPUs)",
        f"postgres: {server}; " + ", ".join(f"{k}={v}" for k, v in settings.items()),
        "versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()),
        f"load average (1, 5, 15 min) before the rounds: {loads[0]}; after each round: "
        + " | ".join(loads[1:]),
        f"rounds: {args.rounds} timed, each cell {args.steps} steps per process to a random row"
        f" of N (after {args.warmup} warm-up steps per process, system and N); systems'"
        " order rotated every round; statistic: MEDIAN steps/s; ratios on medians, and the"
        " per-round ratios' median (range)",
        "",
        "| N | processes | ours steps/s | django-fsm-2 | python-statemachine"
        " | ours / django-fsm-2 | per round | ours / python-statemachine | per round |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n in args.executions:
        for processes in args.processes:
            cell = {s: rates[(s, n, processes)] for s in SYSTEMS}
            med = {s: _median(v) for s, v in cell.items()}
            row = f"| {n:,} | {processes} | {med[OURS]:,.0f} | {med[FSM]:,.0f} | {med[PYSM]:,.0f}"
            for peer in (FSM, PYSM):
                paired = [o / p for o, p in zip(cell[OURS], cell[peer], strict=True)]
                row += (
                    f" | **{med[OURS] / med[peer]:.2f}x** | {_median(paired):.2f}"
                    f" ({min(paired):.2f}-{max(paired):.2f})"
                )
            lines.append(row + " |")
    if BASE in SYSTEMS:
        lines += [
            "",
            f"--baseline {args.baseline}: the same step by that checkout, in the same rounds",
            "",
            "| N | processes | ours@baseline steps/s | baseline / django-fsm-2 | per round"
            " | ours / baseline | per round |",
            "|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for n in args.executions:
            for processes in args.processes:
                cell = {s: rates[(s, n, processes)] for s in SYSTEMS}
                med = {s: _median(v) for s, v in cell.items()}
                row = f"| {n:,} | {processes} | {med[BASE]:,.0f}"
                for mine, theirs in ((BASE, FSM), (OURS, BASE)):
                    paired = [o / p for o, p in zip(cell[mine], cell[theirs], strict=True)]
                    row += (
                        f" | **{med[mine] / med[theirs]:.2f}x** | {_median(paired):.2f}"
                        f" ({min(paired):.2f}-{max(paired):.2f})"
                    )
                lines.append(row + " |")
    lines += [
        "",
        f"target (issue 16): ours >= {TARGET}x django-fsm-2 in 1 and 4 processes at N=1,000",
        "",
        "CPU of the worker processes per step (median us; the rest of the wall time is waiting"
        " for PostgreSQL, the lock, the disk, or for a CPU):",
    ]
    for n in args.executions:
        for processes in args.processes:
            lines.append(
                f"  N={n:,}, {processes} proc: "
                + ", ".join(f"{s} {_median(cpus[(s, n, processes)]):,.0f}" for s in SYSTEMS)
            )
    if profile:
        lines += ["", *render_profile(profile)]
    return "\n".join(lines)


OURS_TREE: tuple[tuple[str, str, str | None], ...] = (
    # (probe label, shown as, the SQL statement kind inside it)
    (
        "lock",
        "BEGIN + lock: SELECT ... FOR UPDATE (of the execution; PostgreSQL: no chart join)",
        "SELECT ... FOR UPDATE",
    ),
    ("chart", "chart lookup (compiled_chart, cached)", None),
    ("decode", "position decode (or the per-process cache's hit)", None),
    ("interpreter", "interpreter (advance), of which:", None),
    ("interpreter/reset", "  reset the previous session's engine (_discard_live)", None),
    ("interpreter/take", "  take an engine + bind system variables (_new_datamodel)", None),
    ("interpreter/take/build", "    of which new QuickJS engines built (prelude evaluated)", None),
    ("interpreter/restore", "  restore the datamodel snapshot (restore)", None),
    ("interpreter/rest", "  the rest: the macrostep, guard, assign, snapshot", None),
    ("encode", "position encode", None),
    ("perform", "perform instructions (none here)", None),
    ("update", "execution UPDATE (sql.update_row)", "UPDATE"),
    ("insert", "history INSERT (sql.insert_row)", "INSERT"),
    ("write", "execution UPDATE + history INSERT, one statement (sql.update_and_insert)", "WITH"),
    ("COMMIT", "COMMIT", None),
    ("rest", "everything else (send's checks, history fields, sha256, signals, ...)", None),
)
TOP_LEVEL = (
    "lock",
    "chart",
    "decode",
    "interpreter",
    "encode",
    "perform",
    "update",
    "insert",
    "write",
    "COMMIT",
)
PEER_TREE = (
    ("lock", "BEGIN + lock: SELECT ... FOR UPDATE (+ the model instance)", "SELECT ... FOR UPDATE"),
    ("transition", "transition (guard, assignment)", None),
    ("update", "UPDATE (Model.save)", "UPDATE"),
    ("insert", "audit INSERT (QuerySet.create)", "INSERT"),
    ("COMMIT", "COMMIT", None),
)


def render_profile(p: dict[str, Any]) -> list[str]:
    steps = p["steps"]
    us = 1e6 / steps
    ours = p[OURS]
    seconds = dict(ours["seconds"])
    interp = seconds.get("interpreter", 0.0)
    seconds["interpreter/rest"] = interp - sum(
        seconds.get(k, 0.0)
        for k in ("interpreter/reset", "interpreter/take", "interpreter/restore")
    )
    seconds["rest"] = ours["total"] - sum(seconds.get(k, 0.0) for k in TOP_LEVEL)
    lines = [
        f"profile: {steps} steps of each system, one process, a random row of N={p['n']:,}"
        " (perf_counter around each part; inclusive; SQL = the statement alone, timed by"
        " connection.execute_wrapper)",
        f"  one empty round trip (SELECT 1): {p['round_trip_us']:.0f} us before,"
        f" {p['round_trip_after_us']:.0f} us after",
        f"  ours: {us * ours['total']:,.0f} us per step"
        f" ({ours['statement_counts']} statements in {steps} steps)",
        f"    {'part':<72}{'us/step':>9}{'%':>7}{'of it SQL us':>14}",
    ]
    for label, shown, statement in OURS_TREE:
        if label in ours["missing"]:
            lines.append(f"    {shown:<72}  MISSING: {ours['missing'][label]} (update the probe)")
            continue
        calls = ours["calls"].get(label)
        value = seconds.get(label)
        if label == "interpreter/take/build" and calls is None:
            lines.append(f"    {shown:<72}{'0 built: every engine came from the pool':>9}")
            continue
        if value is None or (calls is None and label not in ("interpreter/rest", "rest")):
            lines.append(f"    {shown:<72}{'not called':>9}")
            continue
        sql_us = f"{us * ours['statements'].get(statement, 0.0):>14,.0f}" if statement else ""
        extra = f"  ({calls} calls)" if label == "interpreter/take/build" else ""
        lines.append(
            f"    {shown:<72}{us * value:>9,.0f}{100 * value / ours['total']:>6.1f}%{sql_us}{extra}"
        )
    variants = p.get("variants")
    if variants and "error" in variants:
        lines.append(f"  statement variants: {variants['error']}")
    elif variants:
        medians = variants["median_us"]
        base = next(iter(medians.values()))
        lines += [
            f"  our step's own statements replayed on psycopg, {variants['steps']} times each,"
            " interleaved (median us per step; saved = the first's median minus this one's):",
            f"    {'variant':<92}{'us/step':>9}{'saved us':>10}",
            *(f"    {name:<92}{us:>9,.0f}{base - us:>10,.0f}" for name, us in medians.items()),
        ]
    for peer in (FSM, PYSM):
        q = p[peer]
        lines += [
            f"  {peer}: {us * q['total']:,.0f} us per step"
            f" ({q['statement_counts']} statements in {steps} steps)",
        ]
        for label, shown, statement in PEER_TREE:
            value = q["seconds"].get(label, 0.0)
            sql_us = f"{us * q['statements'].get(statement, 0.0):>14,.0f}" if statement else ""
            lines.append(
                f"    {shown:<72}{us * value:>9,.0f}{100 * value / q['total']:>6.1f}%{sql_us}"
            )
    return lines


# ---------------------------------------------------------------------------- main


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for dist in ("django", "django-fsm-2", "python-statemachine", "quickjs-ng", "psycopg"):
        try:
            found[dist] = version(dist)
        except PackageNotFoundError:
            found[dist] = "not installed"
    return found


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Durable steps to a random one of N executions: ours vs django-fsm-2 vs"
        " python-statemachine, on PostgreSQL."
    )
    parser.add_argument("--executions", type=int, nargs="+", default=[1_000], metavar="N")
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 4], metavar="P")
    parser.add_argument("--steps", type=int, default=200, help="steps per process per cell")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--profile-steps", type=int, default=500)
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL, help="server (and maintenance DB)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write results as JSON")
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="DIR",
        help="another checkout of the project (e.g. `git worktree add DIR REV`): its stepper"
        " is measured as a fourth system, on the same rows, in the same rounds (the database"
        " is migrated by this tree: its models must fit that schema; indexes may differ)",
    )
    parser.add_argument(
        "--server-cost",
        action="store_true",
        help="also count what a step costs PostgreSQL, per system: WAL records and bytes"
        " (pg_walinspect), full-page images after a CHECKPOINT, the server process's CPU,"
        " statements (with --rounds 0: only this)",
    )
    parser.add_argument("--server-cost-steps", type=int, default=1000)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(None if argv is None else list(argv))
    if min(args.executions) < 1 or min(args.processes) < 1:
        parser.error("--executions and --processes must be >= 1")
    if args.steps < 1 or args.warmup < 0 or args.profile_steps < 1:
        parser.error("--steps, --profile-steps must be >= 1, --warmup >= 0")
    if args.rounds < (0 if args.server_cost else 1):
        parser.error("--rounds must be >= 1 (0 only with --server-cost)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    global SYSTEMS
    args = parse_args(argv)
    if args.worker:
        return worker_main()
    if args.baseline is not None:
        args.baseline = args.baseline.resolve()
        if not (args.baseline / "statecharts" / "stepper").is_dir():
            raise SystemExit(f"--baseline {args.baseline}: not a checkout of this project")
        SYSTEMS = (OURS, FSM, PYSM, BASE)
    command = shlex.join([sys.executable, *sys.argv] if argv is None else [__file__, *argv])
    args.sqlite_dir = None  # throwaway_database's other branch
    workers: list[Worker] = []
    with throwaway_database("postgres", args) as url:
        log("migrating a throwaway database and making the peers' tables")
        setup_parent_django(url)
        server, settings = server_description()
        count = max(args.executions)
        log(f"making {count:,} rows of each system")
        began = time.perf_counter()
        ids = make_rows(count)
        log(f"made in {time.perf_counter() - began:.1f} s")
        from django.db import connections

        connections.close_all()
        tally = Tally()
        baseline: list[Worker] = []
        try:
            for index in range(max(args.processes)):
                workers.append(Worker(index, url, args.seed + index))
            if args.baseline is not None:
                ids[BASE] = ids[OURS]
                for index in range(max(args.processes)):
                    baseline.append(Worker(index, url, args.seed + 100 + index, args.baseline))
            for worker in [*workers, *baseline]:
                worker.send({"cmd": "ids", "ids": ids})
                worker.answer()
            rates: dict[Cell, list[float]] = {}
            cpus: dict[Cell, list[float]] = {}
            loads: list[str] = []
            if args.rounds:
                rates, cpus, loads = measure(args, workers, tally, baseline)
            cost = None
            if args.server_cost:
                log(f"counting the server's cost of {args.server_cost_steps} steps per system")
                cost = server_cost(args, url, workers[0], baseline[0] if baseline else None, tally)
            profile = None
            if args.profile:
                log(f"profiling {args.profile_steps} steps of each system")
                workers[0].send(
                    {"cmd": "profile", "steps": args.profile_steps, "n": args.executions[0]}
                )
                profile = workers[0].answer()
                for system in (OURS, FSM, PYSM):
                    tally.add(system, profile[system]["stepped"])
        finally:
            for worker in [*workers, *baseline]:
                worker.stop()
        log("verifying every row")
        problems = verify(tally)
        if args.rounds:
            print(render(args, command, server, settings, _versions(), rates, cpus, loads, profile))
        else:
            print(f"Command: {command}\npostgres: {server}; {settings}")
            print(f"load average: {load_average()}")
        if cost is not None:
            print("\n".join(render_server_cost(cost)))
        connections.close_all()
    if args.json is not None:
        payload = {
            "command": command,
            "rates": {f"{s}|{n}|{p}": v for (s, n, p), v in rates.items()},
            "cpu_us": {f"{s}|{n}|{p}": v for (s, n, p), v in cpus.items()},
            "loads": loads,
            "profile": profile,
            "server_cost": cost,
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        print(f"JSON written to {args.json}")
    if problems:
        for problem in problems[:20]:
            print(f"VERIFICATION FAILED: {problem}", file=sys.stderr)
        print(f"{len(problems)} rows failed the verification", file=sys.stderr)
        return 1
    steps_verified = sum(sum(c.values()) for c in tally.sent.values())
    print(f"verified: every row of every system took exactly its events ({steps_verified:,} steps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
