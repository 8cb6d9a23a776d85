"""Durable steps per second, against the floor of a bare database transaction, same run.

A durable step (``statecharts.stepper.send``) is one ``transaction.atomic(durable=True)`` that
locks the execution row, decodes the position blob, advances the interpreter, encodes the new
position, updates the execution row and inserts one ``HistoryEntry`` row. Its floor is what
any durable step must pay whatever the interpreter does: a bare transaction that

    with transaction.atomic(durable=True):
        Execution.objects.select_for_update().get(pk=pk)       # lock + read one row
        row.position = blob; row.save(update_fields=["position"])  # blob of the same size
        HistoryEntry.objects.create(...)                        # one history row

on the same tables, through the same ORM and connection settings (SQLite: IMMEDIATE
transactions, the project's ``demo.database``). The floor's blob is the stepped execution's
real current position and its history row copies the fields of the stepper's latest one, so
both write the same bytes. Target: stepper steps/s >= 50% of the floor's.

Two small charts (source below), each driven by one external event ``toggle``:

- ``toggle/null``: null datamodel, two states, ``toggle`` flips between them;
- ``counter/ecmascript``: the same with an ECMAScript datamodel and ``count += 1`` on every
  ``toggle`` (one ``<assign>``, evaluated in the QuickJS sandbox, so the datamodel changes
  and is snapshotted into the blob on every step).

Method, per database and chart: the chart is stored and two executions are started (one
stepped by the stepper, one written by the floor: the floor's history ``seq`` must not collide
with the stepper's). One untimed warm-up round of each, then ``--rounds`` timed rounds of
``--steps`` sequential steps, interleaved floor, stepper, floor, stepper, ... (garbage
collected before each round, timed with ``time.perf_counter``). Reported: the MEDIAN steps/s
of each and their ratio (stepper / floor, on medians), the headline; as a check against drift
(the disk's fsync latency comes in bursts), the median and range of the per-round ratios (each
stepper round against the floor round just before it). Also reported: the CPU time of this
Python process per step (``time.process_time``; the rest of the wall time is spent waiting for
the database), and the position blob's size. Afterwards the run is verified: the
stepped execution took exactly every step (steps, history rows, configuration, and for the
counter chart the datamodel's ``count``), and the floor wrote exactly its rows.

Each database is measured in its own child process with its OWN throwaway database: SQLite, a
file in a new temporary directory under ``--sqlite-dir`` (default: the system's temporary
directory; its file system type is reported, since a tmpfs would make every fsync free),
deleted afterwards; PostgreSQL, a dedicated database
``statecharts_bench_<pid>`` created on the server of ``--pg-url`` (default
``postgres://root@127.0.0.1:5432/postgres``), migrated, and dropped afterwards. Django runs
with ``DJANGO_DEBUG=0`` (no query log), as in production.

**The state index** (``Execution.active_states``, what ``Execution.objects.in_state`` reads;
GIN-indexed on PostgreSQL) is measured twice in the same run:

- each round also times ``--steps`` steps of a third execution with the stepper's
  ``active_states`` write taken out (the step as it was before the column existed: the
  UPDATE does not set it, so PostgreSQL's GIN index is not touched), interleaved floor,
  stepper, stepper without the write. Reported: its median steps/s and the ratio with /
  without (on medians, and per round). The verification checks that the third execution took
  every step and that its ``active_states`` was never written.
- on PostgreSQL, after the steps, ``--state-rows`` executions (default 1,000,000) are added
  with ``INSERT ... SELECT generate_series`` (0.1% waiting for payment in ``paying``, 10% in
  a parallel ``shipping`` state, 40% finished, the rest in ``shopping``), ``ANALYZE``d, and
  four queries the API's list and the admin's filter run are timed, ``--state-rounds``
  times each, interleaved with the index and without it (dropped inside a transaction that
  is rolled back): the first page (``ORDER BY created DESC, id DESC LIMIT 100``) and the
  ``count()``, for the selective state (``paying``) and the common one (``shipping``).
  Reported: median milliseconds and the plan's scan (``EXPLAIN ANALYZE``) of each.

**Many executions** (issue 16): ``--random-over N [N ...]`` sends every event to a random one
of N executions instead, against django-fsm-2 and python-statemachine in the same run, from 1
and 4 processes (PostgreSQL; the ``bench`` extra). That mode is ``benchmarks/many_executions.py``
(then every other option is that script's: ``--processes``, ``--rounds``, ``--profile``,
``--baseline`` ...); this flag runs it, so both modes start here::

    python benchmarks/durable_steps.py --random-over 1000 100000 --rounds 9

``--profile`` then also runs ``--steps`` floor transactions and ``--steps`` stepper steps per
chart under cProfile (after the timed rounds, so it does not disturb them) and prints where the
time goes: the phases of a step side by side for the floor and the stepper (BEGIN, SELECT FOR
UPDATE, UPDATE, INSERT, COMMIT, and the stepper's own: chart lookup, position decode,
interpreter, position encode, effects, clock, outbox), in us per step and % of the step, then
the stepper's self time grouped by component and its top functions. cProfile inflates
Python-heavy code, so read these as shares, not as speeds.

Usage (from the repository root)::

    python benchmarks/durable_steps.py [--db sqlite|postgres|both] [--steps N] [--rounds R]
                                       [--warmup W] [--pg-url URL] [--sqlite-dir DIR]
                                       [--state-rows N] [--state-rounds R]
                                       [--profile] [--json OUT]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import os
import platform
import pstats
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

SQLITE = "sqlite"
POSTGRES = "postgres"
DATABASES = (SQLITE, POSTGRES)
DEFAULT_PG_URL = "postgres://root@127.0.0.1:5432/postgres"
TARGET = 0.5  # stepper steps/s >= 50% of the floor's
RESULT_MARKER = "DURABLE_STEPS_RESULT "
EVENT = "toggle"

TOGGLE_NULL = """\
<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="null"
       name="bench_toggle" initial="off">
  <state id="off"><transition event="toggle" target="on"/></state>
  <state id="on"><transition event="toggle" target="off"/></state>
</scxml>
"""

COUNTER_ECMASCRIPT = """\
<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"
       name="bench_counter" initial="off">
  <datamodel><data id="count" expr="0"/></datamodel>
  <state id="off">
    <transition event="toggle" target="on"><assign location="count" expr="count + 1"/></transition>
  </state>
  <state id="on">
    <transition event="toggle" target="off"><assign location="count" expr="count + 1"/></transition>
  </state>
</scxml>
"""


@dataclass(frozen=True)
class BenchChart:
    key: str
    title: str
    source: str
    counter: str | None  # datamodel variable incremented by every toggle, if any


CHARTS = (
    BenchChart("toggle/null", "toggle, null datamodel", TOGGLE_NULL, None),
    BenchChart(
        "counter/ecmascript", "toggle + count += 1, ECMAScript", COUNTER_ECMASCRIPT, "count"
    ),
)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- results


@dataclass
class ChartResult:
    chart: str
    blob_bytes: list[int] = field(default_factory=list)  # position size before each round
    floor: list[float] = field(default_factory=list)  # steps/s, one per timed round
    stepper: list[float] = field(default_factory=list)
    floor_cpu: list[float] = field(default_factory=list)  # this process's CPU us per step
    stepper_cpu: list[float] = field(default_factory=list)
    # The stepper with its active_states write taken out (the state index's cost).
    plain: list[float] = field(default_factory=list)
    plain_cpu: list[float] = field(default_factory=list)
    profile: dict[str, Any] | None = None

    @property
    def floor_median(self) -> float:
        return statistics.median(self.floor)

    @property
    def stepper_median(self) -> float:
        return statistics.median(self.stepper)

    @property
    def ratio(self) -> float:
        return self.stepper_median / self.floor_median

    @property
    def paired_ratios(self) -> list[float]:
        return [s / f for f, s in zip(self.floor, self.stepper, strict=True)]

    @property
    def plain_median(self) -> float:
        return statistics.median(self.plain)

    @property
    def index_ratio(self) -> float:
        """Steps/s with the active_states write / without it (medians)."""
        return self.stepper_median / self.plain_median

    @property
    def paired_index_ratios(self) -> list[float]:
        return [s / p for s, p in zip(self.stepper, self.plain, strict=True)]


@dataclass
class DatabaseResult:
    database: str
    server: str
    settings: dict[str, str]
    charts: list[ChartResult]
    state_query: dict[str, Any] | None = None


# --------------------------------------------------------------------------- child: one database


def _pg_connect_kwargs(url: str) -> dict[str, Any]:
    """psycopg.connect() arguments for the server (and maintenance database) of ``url``."""
    parts = urlsplit(url)
    kwargs: dict[str, Any] = {
        "host": parts.hostname or "127.0.0.1",
        "port": parts.port or 5432,
        "user": parts.username or "root",
        "dbname": parts.path.lstrip("/") or "postgres",
    }
    if parts.password:
        kwargs["password"] = parts.password
    return kwargs


@contextmanager
def throwaway_database(database: str, args: argparse.Namespace) -> Iterator[str]:
    """Yield a DATABASE_URL for an empty database of its own; remove it afterwards."""
    pg_url: str = args.pg_url
    if database == SQLITE:
        directory = tempfile.mkdtemp(prefix="statecharts_bench_", dir=args.sqlite_dir)
        try:
            yield f"sqlite:///{Path(directory) / 'bench.sqlite3'}"
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        return
    import psycopg

    admin = _pg_connect_kwargs(pg_url)
    name = f"statecharts_bench_{os.getpid()}"
    with psycopg.connect(**admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    parts = urlsplit(pg_url)
    try:
        yield urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, ""))
    finally:
        from django.db import connections

        connections.close_all()
        with psycopg.connect(**admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def setup_django(database_url: str) -> None:
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))  # benchmark the working tree
    os.environ["DATABASE_URL"] = database_url
    os.environ["DJANGO_SETTINGS_MODULE"] = "demo.settings.test"
    os.environ["DJANGO_DEBUG"] = "0"
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)


def _file_system(path: str) -> str:
    """The type of the file system holding ``path`` (Linux: /proc/mounts), or "unknown"."""
    try:
        mounts = Path("/proc/mounts").read_text(encoding="utf-8").splitlines()
    except OSError:
        return "unknown"
    best, kind = "", "unknown"
    target = os.path.realpath(path)
    for line in mounts:
        fields = line.split()
        if len(fields) < 3:
            continue
        mount_point = fields[1].replace("\\040", " ")
        inside = target == mount_point or target.startswith(mount_point.rstrip("/") + "/")
        if inside and len(mount_point) >= len(best):
            best, kind = mount_point, fields[2]
    return kind


def server_description() -> tuple[str, dict[str, str]]:
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            import sqlite3

            pragmas = {}
            for pragma in ("journal_mode", "synchronous"):
                cursor.execute(f"PRAGMA {pragma}")
                pragmas[pragma] = str(cursor.fetchone()[0])
            options = connection.settings_dict.get("OPTIONS", {})
            pragmas["transaction_mode"] = str(options.get("transaction_mode", "DEFERRED"))
            name = str(connection.settings_dict["NAME"])
            where = f"file in {os.path.dirname(name)} on {_file_system(name)}"
            return f"SQLite {sqlite3.sqlite_version} ({where})", pragmas
        cursor.execute("SELECT version()")
        version = str(cursor.fetchone()[0]).split(" on ")[0]
        settings = {}
        for name in ("fsync", "synchronous_commit", "wal_sync_method"):
            cursor.execute(f"SHOW {name}")
            settings[name] = str(cursor.fetchone()[0])
        host = connection.settings_dict.get("HOST") or "local socket"
        return f"{version} at {host} (TCP)", settings


@contextmanager
def without_active_states() -> Iterator[None]:
    """The step as it was before ``active_states`` existed: not computed, not in the UPDATE.

    (The stepper reads both names from its module at every step, so patching them there is
    exactly that step; they are put back afterwards.)"""
    from statecharts.stepper import applying as step

    saved = step._RUNNING_STEP_FIELDS, step._STEP_FIELDS, step._active_ids
    step._RUNNING_STEP_FIELDS = tuple(f for f in saved[0] if f != "active_states")
    step._STEP_FIELDS = tuple(f for f in saved[1] if f != "active_states")
    step._active_ids = lambda compiled, state: []  # type: ignore[assignment]
    try:
        yield
    finally:
        step._RUNNING_STEP_FIELDS, step._STEP_FIELDS, step._active_ids = saved


class Pair:
    """One chart's executions: ``stepped`` by the stepper, ``floored`` by the floor."""

    def __init__(self, chart: BenchChart) -> None:
        from django.db import transaction
        from django.utils import timezone

        from statecharts import stepper
        from statecharts.models import Chart, Execution, HistoryEntry

        # Bound once, as the stepper's module-level imports are (the querysets are still
        # built per step, as the stepper's are).
        self._atomic = transaction.atomic
        self._now = timezone.now
        self._executions = Execution.objects
        self._history = HistoryEntry.objects
        self.chart = chart
        stored = Chart.objects.load(chart.source)
        self.stepped_pk: int = stepper.start(stored).pk
        self.floored_pk: int = stepper.start(stored).pk
        self.plain_pk: int = stepper.start(stored).pk  # stepped without active_states
        self.plain_started_states = list(
            Execution.objects.values_list("active_states", flat=True).get(pk=self.plain_pk)
        )
        self.sent = 0  # events the stepper applied
        self.plain_sent = 0  # events the stepper without the active_states write applied
        self.floor_rows = 0  # history rows the floor inserted
        self._floor_seq = 1  # the floored execution's start wrote seq 1
        self.blob = b""
        self.template: dict[str, Any] = {}

    def refresh_floor_payload(self) -> int:
        """Untimed: take the stepped execution's real blob and latest history row as payload."""
        from statecharts.models import Execution, HistoryEntry

        self.blob = bytes(
            Execution.objects.values_list("position", flat=True).get(pk=self.stepped_pk)
        )
        latest = HistoryEntry.objects.filter(execution_id=self.stepped_pk).order_by("-seq").first()
        assert latest is not None
        self.template = {
            "input": latest.input,
            "disposition": latest.disposition,
            "status_after": latest.status_after,
            "configuration_after": latest.configuration_after,
            "effects": latest.effects,
            "reachability": latest.reachability,
            "position_sha256": latest.position_sha256,
        }
        return len(self.blob)

    def floor_step(self) -> None:
        """One floor transaction: lock the row, write the blob, insert one history row."""
        self._floor_seq += 1
        pk = self.floored_pk
        with self._atomic(durable=True):
            row = self._executions.select_for_update().get(pk=pk)
            row.position = self.blob
            row.save(update_fields=["position"])
            self._history.create(
                execution_id=pk, seq=self._floor_seq, created=self._now(), **self.template
            )

    def floor_round(self, steps: int) -> tuple[float, float]:
        """Time ``steps`` floor transactions: (steps/s, this process's CPU us per step)."""
        step = self.floor_step
        gc.collect()
        cpu, start = time.process_time(), time.perf_counter()
        for _ in range(steps):
            step()
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        self.floor_rows += steps
        return steps / elapsed, 1e6 * cpu / steps

    def stepper_round(self, steps: int) -> tuple[float, float]:
        """Time ``steps`` stepper.send calls: (steps/s, this process's CPU us per step)."""
        from statecharts import stepper

        pk, send = self.stepped_pk, stepper.send
        gc.collect()
        cpu, start = time.process_time(), time.perf_counter()
        for _ in range(steps):
            send(pk, EVENT)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        self.sent += steps
        return steps / elapsed, 1e6 * cpu / steps

    def plain_round(self, steps: int) -> tuple[float, float]:
        """``stepper_round`` with the step's ``active_states`` write taken out."""
        from statecharts import stepper

        pk, send = self.plain_pk, stepper.send
        with without_active_states():
            gc.collect()
            cpu, start = time.process_time(), time.perf_counter()
            for _ in range(steps):
                send(pk, EVENT)
            elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        self.plain_sent += steps
        return steps / elapsed, 1e6 * cpu / steps

    def verify(self) -> None:
        from statecharts.core.position import decode
        from statecharts.models import Execution, HistoryEntry

        plain = Execution.objects.get(pk=self.plain_pk)
        if plain.steps != 1 + self.plain_sent or plain.status != "active":
            raise SystemExit(
                f"VERIFICATION FAILED, {self.chart.key}: the execution stepped without "
                f"active_states has {plain.steps} steps ({plain.status}), expected "
                f"{1 + self.plain_sent}"
            )
        if self.plain_sent % 2 and plain.active_states != self.plain_started_states:
            raise SystemExit(
                f"VERIFICATION FAILED, {self.chart.key}: active_states was written by the "
                f"stepper without the write: {plain.active_states}"
            )

        stepped = Execution.objects.get(pk=self.stepped_pk)
        where = f"{self.chart.key}: stepped execution after {self.sent} events"
        expected_conf = ["on"] if self.sent % 2 else ["off"]
        problems = []
        if stepped.status != "active":
            problems.append(f"status {stepped.status!r} ({stepped.failure_reason})")
        if stepped.steps != 1 + self.sent:
            problems.append(f"steps {stepped.steps} != {1 + self.sent}")
        rows = HistoryEntry.objects.filter(execution_id=self.stepped_pk, disposition="applied")
        if rows.count() != 1 + self.sent:
            problems.append(f"{rows.count()} applied history rows != {1 + self.sent}")
        if stepped.configuration != expected_conf:
            problems.append(f"configuration {stepped.configuration} != {expected_conf}")
        if self.chart.counter is not None:
            datamodel = decode(bytes(stepped.position)).state.datamodel
            if datamodel.get(self.chart.counter) != self.sent:
                problems.append(f"{self.chart.counter} = {datamodel.get(self.chart.counter)!r}")
        floor_rows = HistoryEntry.objects.filter(execution_id=self.floored_pk).count()
        if floor_rows != 1 + self.floor_rows:
            problems.append(f"floor history rows {floor_rows} != {1 + self.floor_rows}")
        if problems:
            raise SystemExit(f"VERIFICATION FAILED, {where}: " + "; ".join(problems))


# Phases of a step, for the profile: (label, ((file suffix, function names), ...)). They do
# not nest in one another (Model.save is counted without the save that QuerySet.create makes);
# what they leave out is reported as "everything else". The floor runs the ORM calls; the
# stepper runs the same statements compiled once (statecharts.stepper.sql).
PHASES: tuple[tuple[str, tuple[tuple[str, tuple[str, ...]], ...]], ...] = (
    ("BEGIN (atomic __enter__)", (("django/db/transaction.py", ("__enter__",)),)),
    (
        "SELECT ... FOR UPDATE (QuerySet.get; the stepper's sql.lock_execution)",
        (
            ("django/db/models/query.py", ("get",)),
            ("statecharts/stepper/sql.py", ("lock_execution",)),
        ),
    ),
    (
        "UPDATE execution (Model.save; the stepper's sql.update_row)",
        (
            ("django/db/models/base.py", ("save",)),
            ("statecharts/stepper/sql.py", ("update_row",)),
        ),
    ),
    (
        "INSERT history (QuerySet.create; the stepper's sql.insert_row)",
        (
            ("django/db/models/query.py", ("create",)),
            ("statecharts/stepper/sql.py", ("insert_row",)),
        ),
    ),
    ("COMMIT (atomic __exit__)", (("django/db/transaction.py", ("__exit__",)),)),
    ("compiled_chart (cache lookup)", (("statecharts/runtime.py", ("compiled_chart",)),)),
    (
        "_load_position (cache hit or decode)",
        (("statecharts/stepper/applying.py", ("_load_position",)),),
    ),
    ("advance (the interpreter)", (("statecharts/drivers/durable.py", ("advance",)),)),
    ("encode the position", (("statecharts/core/position.py", ("encode",)),)),
    ("perform (effects)", (("statecharts/stepper/performing.py", ("perform",)),)),
    ("clock (statecharts_settings.now)", (("statecharts/conf.py", ("now",)),)),
    ("deliver (empty outbox)", (("statecharts/stepper/delivery.py", ("deliver",)),)),
)
EVERYTHING_ELSE = "everything else (ORM instances, history fields, sha256, signals, ...)"

StatsTable = dict[tuple[str, int, str], tuple[Any, ...]]


def _profiled_loop(step: Callable[[], object], steps: int) -> None:
    for _ in range(steps):
        step()


def _profile(step: Callable[[], object], steps: int) -> tuple[StatsTable, float]:
    """Run ``steps`` steps under cProfile: the raw stats and the loop's cumulative seconds."""
    profiler = cProfile.Profile()
    gc.collect()
    profiler.enable()
    _profiled_loop(step, steps)
    profiler.disable()
    raw: StatsTable = pstats.Stats(profiler, stream=io.StringIO()).stats  # type: ignore[attr-defined]
    total = sum(
        entry[3]
        for (filename, _line, name), entry in raw.items()
        if name == "_profiled_loop" and filename.endswith("durable_steps.py")
    )
    return raw, total


def _phases(raw: StatsTable, total: float, steps: int) -> list[tuple[str, float, float]]:
    """(label, us per step, % of the step) for each phase, then everything else."""
    rows: list[tuple[str, float, float]] = []
    accounted = 0.0
    for label, places in PHASES:
        seconds = 0.0
        for (filename, _line, name), entry in raw.items():
            where = filename.replace("\\", "/")
            if any(name in names and where.endswith(suffix) for suffix, names in places):
                seconds += entry[3] - sum(
                    timing[3]
                    for (caller_file, _, caller), timing in entry[4].items()
                    if caller == "create" and caller_file.endswith("django/db/models/query.py")
                )
        accounted += seconds
        rows.append((label, 1e6 * seconds / steps, 100.0 * seconds / total))
    rest = total - accounted
    rows.append((EVERYTHING_ELSE, 1e6 * rest / steps, 100.0 * rest / total))
    return rows


def _component(filename: str, function: str) -> str:
    text = f"{filename} {function}"
    if "sqlite3" in text or "psycopg" in text:
        return "database driver (incl. waiting for the server / disk)"
    if "/django/" in filename:
        return "Django (ORM, transaction, signals)"
    if "quickjs" in text.lower() or "statecharts/core/datamodel" in filename:
        return "ECMAScript datamodel (QuickJS)"
    if "statecharts/core/position" in filename or "statecharts/core/state" in filename:
        return "position encode/decode"
    if "json" in text:
        return "json (stdlib)"
    if "statecharts/core" in filename or "statecharts/drivers" in filename:
        return "interpreter (statecharts.core, drivers)"
    if "/statecharts/" in filename:
        return "stepper glue (stepper, runtime, conf, handlers)"
    return "other (stdlib, builtins)"


def profile_pair(pair: Pair, steps: int) -> dict[str, Any]:
    """cProfile ``steps`` floor transactions and ``steps`` stepper steps (after the timing)."""
    from statecharts import stepper

    floor_raw, floor_total = _profile(pair.floor_step, steps)
    pair.floor_rows += steps
    pk, send = pair.stepped_pk, stepper.send
    raw, total = _profile(lambda: send(pk, EVENT), steps)
    pair.sent += steps
    components: dict[str, float] = {}
    for (filename, _line, name), entry in raw.items():
        key = _component(filename.replace("\\", "/"), name)
        components[key] = components.get(key, 0.0) + entry[2]
    top = sorted(raw.items(), key=lambda item: item[1][2], reverse=True)[:12]
    return {
        "steps": steps,
        "floor_us_per_step": 1e6 * floor_total / steps,
        "stepper_us_per_step": 1e6 * total / steps,
        "floor_phases": _phases(floor_raw, floor_total, steps),
        "stepper_phases": _phases(raw, total, steps),
        "stepper_components_self_percent": sorted(
            ((key, 100.0 * value / total) for key, value in components.items()),
            key=lambda item: item[1],
            reverse=True,
        ),
        "stepper_top_self": [
            (f"{_short(filename)}:{line}({name})", 100.0 * entry[2] / total, entry[1])
            for (filename, line, name), entry in top
        ],
    }


def _short(filename: str) -> str:
    filename = filename.replace("\\", "/")
    for anchor in ("/site-packages/", "/statecharts/", "/lib/python"):
        if anchor in filename:
            tail = filename.split(anchor, 1)[1]
            return ("statecharts/" + tail) if anchor == "/statecharts/" else tail
    return filename


def run_database(args: argparse.Namespace) -> DatabaseResult:
    database = args.child
    with throwaway_database(database, args) as url:
        log(f"[{database}] migrating a throwaway database")
        setup_django(url)
        server, settings = server_description()
        results = []
        for chart in CHARTS:
            pair = Pair(chart)
            result = ChartResult(chart.key)
            if args.warmup:
                log(f"[{database}] {chart.key}: warm-up, {args.warmup} steps of each")
                pair.stepper_round(args.warmup)
                pair.plain_round(args.warmup)
                pair.refresh_floor_payload()
                pair.floor_round(args.warmup)
            for index in range(1, args.rounds + 1):
                result.blob_bytes.append(pair.refresh_floor_payload())
                rate, cpu = pair.floor_round(args.steps)
                result.floor.append(rate)
                result.floor_cpu.append(cpu)
                rate, cpu = pair.stepper_round(args.steps)
                result.stepper.append(rate)
                result.stepper_cpu.append(cpu)
                rate, cpu = pair.plain_round(args.steps)
                result.plain.append(rate)
                result.plain_cpu.append(cpu)
                log(
                    f"[{database}] {chart.key} round {index}/{args.rounds}: floor "
                    f"{result.floor[-1]:,.0f}/s, stepper {result.stepper[-1]:,.0f}/s, "
                    f"ratio {result.stepper[-1] / result.floor[-1]:.2f}; without "
                    f"active_states {result.plain[-1]:,.0f}/s"
                )
            pair.verify()
            if args.profile:
                log(f"[{database}] {chart.key}: profiling {args.steps} steps of each")
                result.profile = profile_pair(pair, args.steps)
                pair.verify()
            results.append(result)
        state_query = None
        if database == POSTGRES and args.state_rows:
            state_query = measure_state_queries(args.state_rows, args.state_rounds)
        from django.db import connections

        connections.close_all()
    return DatabaseResult(database, server, settings, results, state_query)


# ----------------------------------------------------------------- the state index at scale

# (share of the rows per 1,000, configuration, active_states, status) of the added executions
STATE_GROUPS: tuple[tuple[range, list[str], list[str], str], ...] = (
    (range(0, 1), ["paying"], ["fulfilment", "paying"], "active"),
    (
        range(1, 101),
        ["boxed", "invoiced"],
        ["fulfilment", "shipping", "packing", "boxed", "billing", "invoiced"],
        "active",
    ),
    (range(101, 501), ["done"], ["done"], "completed"),
    (range(501, 1000), ["shopping"], ["shopping"], "active"),
)
SELECTIVE_STATE, COMMON_STATE = "paying", "shipping"
INDEX_NAME = "statecharts_execution_active_states"


def _case(column: str, values: Callable[[tuple[Any, ...]], Any]) -> str:
    """A CASE over ``g % 1000`` giving each group's value (JSON text cast, or text); ``%%``
    since the statement has parameters."""
    parts = []
    for group in STATE_GROUPS:
        shares, value = group[0], values(group)
        literal = json.dumps(value) if not isinstance(value, str) else value
        cast = "::jsonb" if not isinstance(value, str) else ""
        parts.append(
            f"WHEN g %% 1000 BETWEEN {shares.start} AND {shares.stop - 1} "
            f"THEN '{literal}'{cast}"
        )
    return f"CASE {' '.join(parts)} END"


def add_executions(rows: int) -> None:
    """Add ``rows`` executions of one chart with ``INSERT ... SELECT generate_series`` (the GIN
    index dropped while inserting and built again afterwards, as a bulk load would), then
    ``ANALYZE``. Every column not set here gets its model default."""
    from django.db import connection

    from statecharts.models import Chart, Execution

    chart = Chart.objects.load(TOGGLE_NULL)
    blob = bytes(Execution.objects.filter(chart=chart).values_list("position", flat=True)[0])
    quote = connection.ops.quote_name
    computed = {
        "chart_id": ("%s", [chart.pk]),
        "status": (_case("status", lambda group: group[3]), []),
        "session_id": ("'bench-state-' || g", []),
        "position": ("%s", [blob]),
        "configuration": (_case("configuration", lambda group: group[1]), []),
        "active_states": (_case("active_states", lambda group: group[2]), []),
        "steps": ("1 + g %% 7", []),
        "created": ("now() - g * interval '1 second'", []),
        "updated": ("now() - g * interval '1 second'", []),
    }
    columns, expressions, params = [], [], []
    for model_field in Execution._meta.concrete_fields:
        if model_field.primary_key:
            continue
        columns.append(quote(model_field.column))
        if model_field.attname in computed:
            sql, values = computed[model_field.attname]
            expressions.append(sql)
            params.extend(values)
        else:
            expressions.append("%s")  # its default ("" for text, None where nullable)
            params.append(model_field.get_db_prep_save(model_field.get_default(), connection))
    table = quote(Execution._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [INDEX_NAME])
        (index_sql,) = cursor.fetchone()
    with connection.cursor() as cursor:  # (autocommit: the FK check is deferred to commit)
        cursor.execute(f"DROP INDEX {INDEX_NAME}")
        cursor.execute(
            f"INSERT INTO {table} ({', '.join(columns)}) SELECT {', '.join(expressions)} "
            "FROM generate_series(1, %s) AS g",
            [*params, rows],
        )
        cursor.execute(index_sql)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {table}")


def _state_queries() -> dict[str, tuple[str, Callable[[], object], Any]]:
    """name -> (what it is, a call that runs it, its queryset for EXPLAIN)."""
    from statecharts.models import Execution

    queries: dict[str, tuple[str, Callable[[], object], Any]] = {}
    for label, state in (("selective", SELECTIVE_STATE), ("common", COMMON_STATE)):
        found = Execution.objects.in_state(state)
        page = found.values_list("pk", flat=True)[:100]
        queries[f"{label} page"] = (
            f"in_state({state!r}): first page of 100, newest first",
            lambda page=page: list(page.all()),
            page,
        )
        queries[f"{label} count"] = (
            f"in_state({state!r}).count()",
            lambda found=found: found.all().count(),
            found.values("pk"),
        )
    return queries


def _plan_scan(queryset: Any) -> tuple[str, float]:
    """The plan's innermost scan node (the index, for a bitmap scan) and its execution time
    (ms), from EXPLAIN ANALYZE."""
    from django.db import connection

    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS) {sql}", params)
        plan = [row[0] for row in cursor.fetchall()]
    scans = [line.strip().lstrip("-> ").split("  (")[0] for line in plan if "Scan" in line]
    executed = [line for line in plan if line.startswith("Execution Time")]
    took = float(executed[0].split(":")[1].split()[0]) if executed else float("nan")
    return (scans[-1] if scans else plan[0].split("  (")[0]), took  # the innermost scan


def _shown_plan(scan: str, took_ms: float) -> str:
    return f"{scan} ({took_ms:.2f} ms)"


def measure_state_queries(rows: int, rounds: int) -> dict[str, Any]:
    """Time the in_state queries with and without the GIN index, interleaved (see the module
    docstring)."""
    from django.db import connection, transaction

    from statecharts.models import Execution

    log(f"[postgres] adding {rows:,} executions for the state queries")
    started = time.perf_counter()
    add_executions(rows)
    log(f"[postgres] added in {time.perf_counter() - started:.1f} s; timing the queries")
    queries = _state_queries()
    timings: dict[str, dict[str, list[float]]] = {
        name: {"indexed": [], "unindexed": []} for name in queries
    }
    plans: dict[str, dict[str, str]] = {name: {} for name in queries}
    matches = {name: 0 for name in queries}

    def timed(run: Callable[[], object]) -> float:
        start = time.perf_counter()
        run()
        return 1000 * (time.perf_counter() - start)

    for index in range(rounds + 1):  # the first round warms the cache and is not kept
        for name, (_, run, _queryset) in queries.items():
            took = timed(run)
            if index:
                timings[name]["indexed"].append(took)
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(f"DROP INDEX {INDEX_NAME}")
            for name, (_, run, _queryset) in queries.items():
                took = timed(run)
                if index:
                    timings[name]["unindexed"].append(took)
            transaction.set_rollback(True)  # the index is back
    for name, (_, run, queryset) in queries.items():
        result = run()
        matches[name] = result if isinstance(result, int) else len(result)  # type: ignore[arg-type]
        plans[name]["indexed"] = _shown_plan(*_plan_scan(queryset))
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(f"DROP INDEX {INDEX_NAME}")
            plans[name]["unindexed"] = _shown_plan(*_plan_scan(queryset))
            transaction.set_rollback(True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_relation_size(%s)", [INDEX_NAME])
        index_bytes = int(cursor.fetchone()[0])
    return {
        "rows": Execution.objects.count(),
        "added": rows,
        "rounds": rounds,
        "index_bytes": index_bytes,
        "queries": {
            name: {
                "what": what,
                "matches": matches[name],
                "indexed_ms": statistics.median(timings[name]["indexed"]),
                "unindexed_ms": statistics.median(timings[name]["unindexed"]),
                "indexed_plan": plans[name]["indexed"],
                "unindexed_plan": plans[name]["unindexed"],
            }
            for name, (what, _run, _queryset) in queries.items()
        },
    }


# --------------------------------------------------------------------------- parent: report


class ChildFailed(Exception):
    """The benchmark process of one database failed (its stderr says why)."""


def _child(database: str, args: argparse.Namespace) -> DatabaseResult:
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        database,
        "--steps",
        str(args.steps),
        "--rounds",
        str(args.rounds),
        "--warmup",
        str(args.warmup),
        "--pg-url",
        args.pg_url,
        "--state-rows",
        str(args.state_rows),
        "--state-rounds",
        str(args.state_rounds),
    ]
    if args.profile:
        command.append("--profile")
    if args.sqlite_dir:
        command += ["--sqlite-dir", args.sqlite_dir]
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=False, cwd=REPO)
    if done.returncode != 0:
        raise ChildFailed(f"{database}: the benchmark process failed (exit {done.returncode})")
    for line in done.stdout.splitlines():
        if line.startswith(RESULT_MARKER):
            raw = json.loads(line[len(RESULT_MARKER) :])
            charts = [ChartResult(**c) for c in raw["charts"]]
            return DatabaseResult(
                raw["database"], raw["server"], raw["settings"], charts, raw.get("state_query")
            )
    raise ChildFailed(f"{database}: the benchmark process printed no result")


def _blob(sizes: Sequence[int]) -> str:
    low, high = min(sizes), max(sizes)
    return f"{low}" if low == high else f"{low}-{high}"


def render(args: argparse.Namespace, command: str, results: Sequence[DatabaseResult]) -> str:
    lines = [
        f"command: {command}",
        f"python:  {platform.python_implementation()} {platform.python_version()}"
        f" on {platform.platform()} ({os.cpu_count()} CPUs)",
    ]
    for db in results:
        settings = ", ".join(f"{k}={v}" for k, v in db.settings.items())
        lines.append(f"{db.database}: {db.server}; {settings}")
    lines += [
        f"rounds: {args.rounds} timed x {args.steps} sequential steps per side, interleaved"
        f" floor/stepper (after {args.warmup} warm-up steps of each); statistic: MEDIAN"
        " steps/s; ratio = stepper / floor on medians (per-round ratios: median and range).",
        "",
        "| database | chart | blob bytes | floor steps/s | stepper steps/s | stepper / floor"
        " | per-round ratio: median (range) | >= 50%? |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for db in results:
        for c in db.charts:
            paired = c.paired_ratios
            met = "yes" if c.ratio >= TARGET else "**no**"
            lines.append(
                f"| {db.database} | {c.chart} | {_blob(c.blob_bytes)} | {c.floor_median:,.0f}"
                f" | {c.stepper_median:,.0f} | **{100 * c.ratio:.0f}%**"
                f" | {100 * statistics.median(paired):.0f}%"
                f" ({100 * min(paired):.0f}-{100 * max(paired):.0f}%) | {met} |"
            )
    lines += [
        "",
        "the state index: the same stepper with its active_states write taken out, interleaved"
        " in the same rounds (with / without, on medians; per-round: median and range)",
        "",
        "| database | chart | with active_states steps/s | without steps/s | with / without"
        " | per-round: median (range) |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for db in results:
        for c in db.charts:
            paired = c.paired_index_ratios
            lines.append(
                f"| {db.database} | {c.chart} | {c.stepper_median:,.0f} | {c.plain_median:,.0f}"
                f" | **{100 * c.index_ratio:.0f}%** | {100 * statistics.median(paired):.0f}%"
                f" ({100 * min(paired):.0f}-{100 * max(paired):.0f}%) |"
            )
    for db in results:
        query = db.state_query
        if not query:
            continue
        lines += [
            "",
            f"in_state queries on {db.database}: {query['rows']:,} executions"
            f" ({query['added']:,} added), GIN index {query['index_bytes'] / 2**20:.1f} MiB;"
            f" median of {query['rounds']} timed runs each, with and without the index"
            " (dropped in a rolled-back transaction), interleaved",
            "",
            "| query | matching | with the index | without | plan with | plan without |",
            "|---|---:|---:|---:|---|---|",
        ]
        for item in query["queries"].values():
            lines.append(
                f"| {item['what']} | {item['matches']:,} | {item['indexed_ms']:.2f} ms"
                f" | {item['unindexed_ms']:.2f} ms | {item['indexed_plan']}"
                f" | {item['unindexed_plan']} |"
            )
    lines += [
        "",
        "per step, medians: wall time, and CPU time of this Python process (the rest of the"
        " wall time is waiting for the database: server, disk, fsync)",
    ]
    for db in results:
        for c in db.charts:
            floor_cpu = statistics.median(c.floor_cpu)
            stepper_cpu = statistics.median(c.stepper_cpu)
            lines.append(
                f"  {db.database} {c.chart}: floor {1e6 / c.floor_median:,.0f} us wall,"
                f" {floor_cpu:,.0f} us CPU; stepper {1e6 / c.stepper_median:,.0f} us wall,"
                f" {stepper_cpu:,.0f} us CPU (x{stepper_cpu / floor_cpu:.1f} the floor's CPU)"
            )
    for db in results:
        for c in db.charts:
            if c.profile is None:
                continue
            p = c.profile
            lines += [
                "",
                f"profile: {db.database} {c.chart}, {p['steps']} steps of each under cProfile"
                " (which inflates Python-heavy code: read the shares, not the speeds)",
                f"  {'phase':<70}{'floor us':>10}{'%':>6}{'stepper us':>12}{'%':>6}",
            ]
            for (label, f_us, f_pct), (_, s_us, s_pct) in zip(
                p["floor_phases"], p["stepper_phases"], strict=True
            ):
                lines.append(f"  {label:<70}{f_us:>10,.0f}{f_pct:>6.1f}{s_us:>12,.0f}{s_pct:>6.1f}")
            lines.append(
                f"  {'whole step':<70}{p['floor_us_per_step']:>10,.0f}{100:>6.1f}"
                f"{p['stepper_us_per_step']:>12,.0f}{100:>6.1f}"
            )
            lines.append("  stepper, self time by component (% of the step):")
            lines += [
                f"    {pct:5.1f}%  {label}" for label, pct in p["stepper_components_self_percent"]
            ]
            lines.append("  stepper, top functions by self time (% of the step, calls):")
            lines += [
                f"    {pct:5.1f}%  {calls:>7}  {name}" for name, pct, calls in p["stepper_top_self"]
            ]
    return "\n".join(lines)


def _random_over(argv: list[str]) -> int | None:
    """The many-executions mode: with ``--random-over N [N ...]`` in ``argv``, run
    ``benchmarks/many_executions.py`` with N as its ``--executions`` and every other option
    as given (they are its options then); None without the flag."""
    if "--random-over" not in argv:
        return None
    import many_executions  # (a sibling script; only this mode needs it)

    at = argv.index("--random-over")
    end = at + 1
    while end < len(argv) and argv[end].isdigit():
        end += 1
    if end == at + 1:
        raise SystemExit("--random-over needs at least one N")
    code: int = many_executions.main(
        [*argv[:at], *argv[end:], "--executions", *argv[at + 1 : end]]
    )
    return code


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Durable stepper steps/s vs a bare lock+update+insert transaction."
    )
    parser.add_argument("--db", choices=(*DATABASES, "both"), default="both")
    parser.add_argument("--steps", type=int, default=200, help="sequential steps per round")
    parser.add_argument("--rounds", type=int, default=15, help="timed rounds of each side")
    parser.add_argument("--warmup", type=int, default=50, help="untimed warm-up steps per side")
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL, help="server (and maintenance DB)")
    parser.add_argument(
        "--sqlite-dir", help="where the SQLite file goes (default: the system temporary dir)"
    )
    parser.add_argument(
        "--state-rows",
        type=int,
        default=1_000_000,
        help="PostgreSQL: executions added for the in_state queries (0: skip them)",
    )
    parser.add_argument(
        "--state-rounds", type=int, default=15, help="timed rounds of each in_state query"
    )
    parser.add_argument(
        "--profile", action="store_true", help="also cProfile the floor and the stepper"
    )
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write results as JSON")
    parser.add_argument(
        "--random-over",
        type=int,
        nargs="+",
        metavar="N",
        help="events to a random one of N executions, against django-fsm-2 and "
        "python-statemachine: runs benchmarks/many_executions.py with the other options",
    )
    parser.add_argument("--child", choices=DATABASES, help=argparse.SUPPRESS)
    args = parser.parse_args(None if argv is None else list(argv))
    if args.steps < 1 or args.rounds < 1 or args.warmup < 0:
        parser.error("--steps and --rounds must be >= 1, --warmup >= 0")
    if args.state_rows < 0 or args.state_rounds < 1:
        parser.error("--state-rows must be >= 0, --state-rounds >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    delegated = _random_over(list(sys.argv[1:] if argv is None else argv))
    if delegated is not None:
        return delegated
    args = parse_args(argv)
    if args.child:
        result = run_database(args)
        print(RESULT_MARKER + json.dumps(asdict(result)), flush=True)
        return 0
    command = shlex.join([sys.executable, *sys.argv] if argv is None else [__file__, *argv])
    databases = DATABASES if args.db == "both" else (args.db,)
    results: list[DatabaseResult] = []
    failures: list[str] = []
    for database in databases:
        try:
            results.append(_child(database, args))
        except ChildFailed as exc:
            failures.append(str(exc))
    if results:
        print(render(args, command, results))
    if args.json is not None:
        payload: dict[str, Any] = {
            "command": command,
            "settings": {"steps": args.steps, "rounds": args.rounds, "warmup": args.warmup},
            "results": [
                {
                    **asdict(db),
                    "ratios": {c.chart: c.ratio for c in db.charts},
                }
                for db in results
            ],
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        print(f"JSON written to {args.json}")
    for failure in failures:
        print(f"BENCHMARK FAILED: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
