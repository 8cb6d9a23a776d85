"""Durable timer firing on PostgreSQL with the documented django-q2 worker setup.

Two measurements, each in the same run, on a throwaway PostgreSQL database
(``statecharts_bench_<pid>`` on the server of ``--pg-url``, migrated, dropped afterwards):

1. **Firing lateness.** ``--timers`` executions of a one-timer chart (below) are started
   through the stepper, each with a ``<send delayexpr>`` whose delay comes from its start data,
   so the timers come due spread evenly over a ``--window``-second window that opens at least
   ``--lead`` seconds after the setup ends (real clock; the setup's length is estimated from a
   first 100 starts, whose timers are due in a day, with 50% slack; the setup is not
   measured). Every timer row is exactly what the stepper writes. Then a real django-q2 cluster
   (``manage.py qcluster`` with ``demo.settings.base.Q_CLUSTER``: the ORM broker, 4 workers, poll
   0.1 s) and ``setup_timers`` (the every-minute schedule plus one sweeper, as documented) do
   the firing; each fire is a real durable step (``waiting`` -> ``fired``). The cluster is
   started before the executions, as in production (the sweepers are running when the timers
   come due).

   Lateness per timer = the moment its step COMMITTED minus its ``due``. The commit moment is
   taken by the database: a deferred constraint trigger on the history table (created after
   the setup, in the throwaway database only) records ``clock_timestamp()`` when the firing
   transaction commits, with the backend's ``application_name``, which the cluster's
   processes set to their OS pid (``--cluster-child``: the benchmark launches ``qcluster`` by
   ``call_command`` after connecting one ``connection_created`` receiver; nothing else
   differs from ``manage.py qcluster``). The history row's ``created`` (the step's clock) is
   reported too: the firer reads the clock once per claimed batch, so ``created`` is the batch's
   claim time, up to one batch's work earlier than the commit.

   Reported: lateness p50/p99/max, timers fired per second, how many worker processes and
   drain tasks (database connections) fired them, lateness per second of the window, the
   sweeper tasks, and the CPU used while firing (from /proc: the cluster's process group,
   PostgreSQL, everything else; the machine's idle share). Target: p99 <= 1 s.

2. **The due query at scale.** The exact SELECTs of a real ``timers.firing.claim()``
   (``claimable(now)`` ordered by ``(due, id)``, ``LIMIT``, ``FOR UPDATE SKIP LOCKED``) and of
   one poll of a real ``timers.dispatch.sweep()``, captured, then run under ``EXPLAIN
   (ANALYZE, BUFFERS)`` and timed (median and p99 of ``--explain-repeat`` runs, each rolled
   back) with 10,000 and then ``--explain-rows`` (1,000,000) pending rows, each case with 50
   timers due now and with none due (an idle sweeper's usual poll), next to
   ``--settled-rows`` (1,000,000) settled rows due over the past 30 days (what
   ``prune_timers`` keeps; they are what misleads the planner). Rows are inserted with
   ``INSERT ... SELECT generate_series`` (pending: due over the next 30 days; the due ones
   last), then ``ANALYZE``.

``--codecs`` compares the payload codecs (docs/payload-codecs.md): the cost per fire of a
timer whose event carries a ~200-byte payload, with ``PAYLOAD_CODEC`` "json" and
"encrypted", one firer in this process, alternating rounds in the same run.

``--profile`` adds a third part, one firer in this process and no cluster: ``stepper.send`` of
the same transition to ``--profile-timers`` waiting executions (the step without the timer
machinery) against ``drain()`` of as many due timers, each timed (wall, this process's CPU,
its PostgreSQL backend's CPU), then a drain under cProfile (the phases of a fire) and the
statements of one fire: the per-fire cost that bounds what the workers can do. With
``--route-share`` it also drains as many due route timers, measured the same way (the
per-fire cost ratio route / SCXML timer, and the statements of one route fire_due()).

``--route-share S`` makes that share of the executions send their alarm on a route (a delayed
route send, ``timers.routequeue``), fired by the same cluster; their lateness is reported
apart (the take-and-decide commit minus the due).

Usage (from the repository root)::

    python benchmarks/timer_firing.py [--timers 10000] [--window 10] [--workers 4]
                                      [--explain-rows 1000000] [--settled-rows 1000000]
                                      [--lead 5] [--deadline 120] [--profile]
                                      [--route-share S] [--codecs] [--codec-rounds 3]
                                      [--skip-firing] [--skip-explain] [--pg-url URL]
                                      [--json OUT]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import math
import os
import platform
import pstats
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import IO, Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from durable_steps import (  # noqa: E402  (a sibling script, not a package)
    DEFAULT_PG_URL,
    _component,
    server_description,
    setup_django,
    throwaway_database,
)

TARGET_P99 = 1.0  # seconds
STOP_GRACE = 20.0  # seconds a SIGTERMed cluster gets before its process group is SIGKILLed
CALIBRATION = 100  # starts timed to estimate the setup's length (their timers are due in 1 d)
POLL = 0.25  # how often the benchmark looks at the database while the cluster fires

CHART = """\
<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"
       name="bench_timer" initial="waiting">
  <datamodel><data id="delay" expr="'1d'"/></datamodel>
  <state id="waiting">
    <onentry><send id="alarm" event="alarm" delayexpr="delay"/></onentry>
    <transition event="alarm" target="fired"/>
  </state>
  <state id="fired"/>
</scxml>
"""

# --route-share: that share of the executions sends its alarm on a route instead (a delayed
# route send: a route timer row, timers.routequeue), fired by the same cluster and loop. The
# route is the tests' recording route (tests/routes/recording.py): its delivery is a list
# append, so what is measured is the platform's part (liveness, take and decide with the
# ledger claim, the ledger settle).
ROUTE_CHART = """\
<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"
       name="bench_route_timer" initial="waiting">
  <datamodel><data id="delay" expr="'1d'"/></datamodel>
  <state id="waiting">
    <onentry><send id="alarm" type="record" target="x" event="alarm" delayexpr="delay"/></onentry>
  </state>
</scxml>
"""
BENCH_ROUTES = {
    "record": {"ROUTE": "tests.routes.recording.Recorder", "TYPES": ["record"]},
}

# A route timer's fire is decided when its take-and-decide transaction commits: the ledger
# row's insert, stamped the same way as the history rows below.
ROUTE_COMMIT_STAMP_SQL = """
CREATE TABLE bench_route_commit (
    delivery_id bigint PRIMARY KEY,
    committed timestamptz NOT NULL,
    backend integer NOT NULL,
    app text NOT NULL
);
CREATE FUNCTION bench_route_commit_stamp() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO bench_route_commit VALUES
        (NEW.id, clock_timestamp(), pg_backend_pid(), current_setting('application_name'));
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER bench_route_commit_stamp AFTER INSERT ON routes_routedelivery
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION bench_route_commit_stamp();
"""


def route_settings_on() -> None:
    """Register the benchmark's route in this process (the cluster child does it too)."""
    from django.conf import settings
    from django.test import override_settings

    override_settings(STATECHARTS={**settings.STATECHARTS, "ROUTES": BENCH_ROUTES}).enable()


def is_route(index: int, share: float) -> bool:
    """Whether the index-th execution of the window uses the route chart (spread evenly)."""
    return math.floor((index + 1) * share) > math.floor(index * share)


# In the throwaway database only: stamp each history row with the time its transaction
# commits (a deferred constraint trigger runs at COMMIT) and with who committed it.
COMMIT_STAMP_SQL = """
CREATE TABLE bench_commit (
    history_id bigint PRIMARY KEY,
    committed timestamptz NOT NULL,
    backend integer NOT NULL,
    app text NOT NULL
);
CREATE FUNCTION bench_commit_stamp() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO bench_commit VALUES
        (NEW.id, clock_timestamp(), pg_backend_pid(), current_setting('application_name'));
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER bench_commit_stamp AFTER INSERT ON statecharts_historyentry
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION bench_commit_stamp();
"""

TIMER_COLUMNS = (
    "execution_id, send_id, ordinal, event, target, due, macrostep, microstep, round,"
    " content_index, owner, context, status, attempts, last_error, reason, claimed_until,"
    " created, settled"
)
DUE_NOW = 50  # pending rows due now in the EXPLAIN part (the rest: over the next 30 days)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (``p`` in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


# --------------------------------------------------------------------------- the cluster


# STATECHARTS keys a cluster child runs with besides the test settings' (JSON; qcluster's
# ``overrides``, e.g. timer_recovery.py's TIMER_LEASE_SECONDS).
OVERRIDES_ENV = "TIMER_BENCH_STATECHARTS"


def cluster_child(workers: int, routes: bool = False) -> None:
    """``manage.py qcluster``, with each database connection named after its process's pid,
    and the STATECHARTS overrides its parent passed in ``OVERRIDES_ENV``."""
    os.chdir(REPO)
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.core.management import call_command
    from django.db.backends.signals import connection_created
    from django_q.conf import Conf

    def name_connection(sender: Any, connection: Any, **kwargs: Any) -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('application_name', %s, false)", [str(os.getpid())])

    connection_created.connect(name_connection, weak=False)
    overrides = json.loads(os.environ.get(OVERRIDES_ENV) or "{}")
    if overrides:
        from django.conf import settings
        from django.test import override_settings

        override_settings(STATECHARTS={**settings.STATECHARTS, **overrides}).enable()
    if routes:
        route_settings_on()
    if workers != Conf.WORKERS:  # --workers other than demo.settings.base.Q_CLUSTER's
        Conf.WORKERS = workers
        Conf.QUEUE_LIMIT = workers**2  # what django-q2 derives from "workers"
    call_command("qcluster")


@contextmanager
def qcluster(
    database_url: str,
    workers: int,
    out: IO[str],
    routes: bool = False,
    overrides: dict[str, Any] | None = None,
) -> Iterator[subprocess.Popen[str]]:
    """The django-q2 cluster in a child process of this script (``cluster_child``), its
    STATECHARTS settings with ``overrides``; stopped on leaving."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "demo.settings.test",
        "DJANGO_DEBUG": "0",
        OVERRIDES_ENV: json.dumps(overrides or {}),
    }
    command = [sys.executable, str(Path(__file__).resolve()), "--cluster-child"]
    command += ["--workers", str(workers)] + (["--route-share", "1"] if routes else [])
    cluster = subprocess.Popen(
        command,
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: the fallback kills its workers too
    )
    try:
        yield cluster
    finally:
        stop_cluster(cluster)


def stop_cluster(cluster: subprocess.Popen[str]) -> None:
    """SIGTERM to its process group (a sweeper then ends at its next poll; django-q2 waits for
    running tasks), SIGKILL to the group if it has not stopped after ``STOP_GRACE``."""
    if cluster.poll() is not None:
        return
    os.killpg(cluster.pid, signal.SIGTERM)
    try:
        cluster.wait(timeout=STOP_GRACE)
    except subprocess.TimeoutExpired:
        os.killpg(cluster.pid, signal.SIGKILL)
        cluster.wait(timeout=STOP_GRACE)


def tail(out: IO[str], chars: int = 4_000) -> str:
    out.flush()
    out.seek(0)
    return out.read()[-chars:]


def wait_for_cluster(out: IO[str], cluster: subprocess.Popen[str], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cluster.poll() is not None:
            raise RuntimeError(f"the cluster exited ({cluster.returncode}):\n{tail(out)}")
        out.flush()
        out.seek(0)
        if " running." in out.read():
            return
        time.sleep(0.2)
    raise RuntimeError(f"the cluster did not start within {seconds} s:\n{tail(out)}")


# --------------------------------------------------------------------------- CPU accounting


class CpuSampler:
    """CPU seconds used while the cluster fires, by whom: the cluster's processes (its process
    group), PostgreSQL's, this benchmark, everything else; and the machine's idle share.

    Sampled from /proc (Linux) each time ``sample()`` is called; a process that exits between
    two samples loses at most one interval of its CPU time (PostgreSQL backends end with
    their drain task's connection).
    """

    def __init__(self, cluster_pgid: int) -> None:
        self.cluster_pgid = cluster_pgid
        self.ticks = os.sysconf("SC_CLK_TCK")
        self.last: dict[int, tuple[str, int]] = {}
        self.used: Counter[str] = Counter()
        self.machine: Counter[str] = Counter()
        self.start_machine = self._machine()
        self.started = time.monotonic()
        self.seconds = 0.0
        self.last = self._read()

    def _machine(self) -> list[int]:
        with open("/proc/stat", encoding="ascii") as stat:
            return [int(x) for x in stat.readline().split()[1:]]

    def _read(self) -> dict[int, tuple[str, int]]:
        current: dict[int, tuple[str, int]] = {}
        me = os.getpid()
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", encoding="utf-8", errors="replace") as f:
                    text = f.read()
            except OSError:
                continue
            pid = int(entry.name)
            comm = text[text.index("(") + 1 : text.rindex(")")]
            rest = text[text.rindex(")") + 2 :].split()
            if int(rest[2]) == self.cluster_pgid:
                who = "cluster (django-q2)"
            elif comm == "postgres":
                who = "postgres"
            elif pid == me:
                who = "benchmark"
            else:
                who = "other"
            current[pid] = (who, int(rest[11]) + int(rest[12]))
        return current

    def sample(self) -> None:
        current = self._read()
        for pid, (who, ticks) in current.items():
            before = self.last.get(pid)
            # A process first seen now started after the previous sample: all of its CPU counts.
            self.used[who] += ticks - before[1] if before else ticks
        self.last = current
        self.seconds = time.monotonic() - self.started

    def result(self) -> dict[str, Any]:
        end = self._machine()
        delta = [b - a for a, b in zip(self.start_machine, end, strict=False)]
        total = sum(delta[:8]) or 1
        return {
            "seconds": self.seconds,
            "cpu_seconds": {who: ticks / self.ticks for who, ticks in self.used.items()},
            "idle_share": delta[3] / total,
            "iowait_share": delta[4] / total,
        }


# --------------------------------------------------------------------------- part 1: firing


def start_executions(
    chart: Any, dues: Sequence[float], route_chart: Any = None, share: float = 0.0
) -> list[int]:
    """One execution per due time (epoch seconds); returns their pks. With ``route_chart``,
    ``share`` of them (spread evenly) send their alarm on a route instead."""
    from statecharts import stepper

    pks = []
    for index, due in enumerate(dues):
        which = route_chart if route_chart is not None and is_route(index, share) else chart
        delay_ms = round((due - time.time()) * 1000)
        if delay_ms < 1000:
            raise RuntimeError(
                "the setup overran the window's start; run again with a larger --lead"
            )
        pks.append(stepper.start(which, data={"delay": f"{delay_ms}ms"}).pk)
    return pks


def run_firing(args: argparse.Namespace, database_url: str) -> dict[str, Any]:
    from statecharts.conf import statecharts_settings

    clock = statecharts_settings.CLOCK
    with tempfile.TemporaryFile("w+") as out:
        run = fire_in_cluster(args, database_url, out)
        cluster_log = tail(out, 20_000)
    result = collect_firing(args, run)
    result.update(
        clock=clock if isinstance(clock, str) else repr(clock),
        unsettled=run["pending"],
        waited_after_window=run["settled_at"] - (run["window_start"] + args.window),
        cluster_exit=run["cluster"].returncode,
        cluster_errors=[
            line for line in cluster_log.splitlines() if "ERROR" in line or "Traceback" in line
        ][:20],
    )
    return result


def fire_in_cluster(args: argparse.Namespace, database_url: str, out: IO[str]) -> dict[str, Any]:
    """Start the cluster and ``setup_timers``, schedule the window's timers, wait (bounded)
    until they are settled, stop the cluster."""
    from django.core.management import call_command
    from django.db import connection

    from statecharts.models import Chart
    from timers.models import RouteTimer, Timer

    chart = Chart.objects.load(CHART)
    routes = args.route_share > 0
    route_chart = None
    if routes:
        route_settings_on()
        route_chart = Chart.objects.load(ROUTE_CHART)
    with qcluster(database_url, args.workers, out, routes) as cluster:
        wait_for_cluster(out, cluster, 60)
        call_command("setup_timers", stdout=io.StringIO())  # the schedule, and a sweeper now
        log(f"cluster up (pid {cluster.pid}, {args.workers} workers); setup_timers done")

        # Calibrate the setup: these executions' timers are due in a day (they stay pending).
        started = time.perf_counter()
        start_executions(chart, [time.time() + 86_400] * CALIBRATION)
        per_start = (time.perf_counter() - started) / CALIBRATION
        setup_estimate = per_start * args.timers * 1.5 + 2
        window_start = time.time() + setup_estimate + args.lead
        dues = [window_start + args.window * (i + 0.5) / args.timers for i in range(args.timers)]
        log(
            f"setup: {per_start * 1000:.1f} ms per start; starting {args.timers} executions,"
            f" timers due from {setup_estimate + args.lead:.0f} s from now over {args.window} s"
        )
        started = time.perf_counter()
        pks = start_executions(chart, dues, route_chart, args.route_share)
        setup_seconds = time.perf_counter() - started
        with connection.cursor() as cursor:
            cursor.execute(COMMIT_STAMP_SQL)
            if routes:
                cursor.execute(ROUTE_COMMIT_STAMP_SQL)
        lead = window_start - time.time()
        log(f"setup took {setup_seconds:.1f} s; the window opens in {lead:.1f} s")

        # pks are consecutive: a range keeps this poll cheap (the cancel index covers it).
        window_timers = Timer.objects.filter(execution_id__gte=min(pks), execution_id__lte=max(pks))
        window_routes = RouteTimer.objects.filter(
            execution_id__gte=min(pks), execution_id__lte=max(pks)
        )
        deadline = window_start + args.window + args.deadline
        pending = args.timers
        sampler: CpuSampler | None = None
        while time.time() < deadline:
            if cluster.poll() is not None:
                raise RuntimeError(f"the cluster exited ({cluster.returncode}):\n{tail(out)}")
            if sampler is None and time.time() >= window_start:
                sampler = CpuSampler(cluster.pid)
            elif sampler is not None:
                sampler.sample()
                pending = window_timers.filter(status="pending").count()
                if routes:
                    pending += window_routes.count()  # (a route timer row goes when fired)
                if pending == 0:
                    break
            time.sleep(POLL)
        settled_at = time.time()
        cpu = sampler.result() if sampler is not None else {}
        log(f"{'all settled' if pending == 0 else f'{pending} still pending'}; stopping cluster")
    return {
        "cluster": cluster,
        "pks": pks,
        "dues": dict(zip(pks, dues, strict=True)),
        "route_pks": [
            pk for index, pk in enumerate(pks) if routes and is_route(index, args.route_share)
        ],
        "window_start": window_start,
        "lead": lead,
        "setup_seconds": setup_seconds,
        "per_start": per_start,
        "pending": pending,
        "settled_at": settled_at,
        "cpu": cpu,
    }


def collect_firing(args: argparse.Namespace, run: dict[str, Any]) -> dict[str, Any]:
    from django.db import connection
    from django_q.models import Task

    from statecharts.models import Execution
    from timers import dispatch

    pks, window_start = run["pks"], run["window_start"]
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT t.status, extract(epoch FROM t.due), extract(epoch FROM h.created),
                   extract(epoch FROM c.committed), c.backend, c.app
            FROM timers_timer t
            LEFT JOIN statecharts_historyentry h ON h.execution_id = t.execution_id AND h.seq = 2
            LEFT JOIN bench_commit c ON c.history_id = h.id
            WHERE t.execution_id = ANY(%s)
            """,
            [pks],
        )
        rows = cursor.fetchall()
    statuses = Counter(row[0] for row in rows)
    fired = [row for row in rows if row[0] == "fired" and row[3] is not None]
    scxml_timers = len(rows)
    routes = collect_route_firing(run) if args.route_share > 0 else None
    due = [float(row[1]) for row in fired]
    created = [float(row[2]) for row in fired]
    committed = [float(row[3]) for row in fired]
    lateness = [c - d for c, d in zip(committed, due, strict=True)]
    created_lateness = [c - d for c, d in zip(created, due, strict=True)]
    claim_lag = [c - s for c, s in zip(committed, created, strict=True)]
    moved = Execution.objects.filter(pk__in=pks, configuration=["fired"], steps=2).count()

    per_second: list[dict[str, Any]] = []
    for second in range(math.ceil(args.window)):
        bucket = [
            late
            for d, late in zip(due, lateness, strict=True)
            if second <= d - window_start < second + 1
        ]
        if bucket:
            per_second.append(
                {
                    "second": second,
                    "timers": len(bucket),
                    "p50": percentile(bucket, 50),
                    "p99": percentile(bucket, 99),
                    "max": max(bucket),
                }
            )
    processes = Counter(str(row[5]) for row in fired)
    backends = {row[4] for row in fired}
    sweepers = [
        {
            "started": task.started.timestamp() - window_start,
            "stopped": task.stopped.timestamp() - window_start,
            "drains_enqueued": task.result,
            "success": task.success,
        }
        for task in Task.objects.filter(func=dispatch.SWEEP).order_by("started")
    ]
    first_commit, last_commit = (min(committed), max(committed)) if committed else (0.0, 0.0)
    return {
        "timers": args.timers,
        "window": args.window,
        "workers": args.workers,
        "setup_seconds": run["setup_seconds"],
        "ms_per_start": run["per_start"] * 1000,
        "lead": run["lead"],
        "statuses": dict(statuses),
        "fired_measured": len(fired),
        "executions_moved": moved,
        "lateness": summary(lateness),
        "created_lateness": summary(created_lateness),
        "commit_minus_created": summary(claim_lag),
        "early": sum(1 for late in created_lateness if late < 0),
        "first_commit": first_commit - window_start,
        "last_commit": last_commit - window_start,
        "fired_per_second_active": len(fired) / (last_commit - first_commit) if fired else 0.0,
        "fired_per_second_window": len(fired) / (last_commit - window_start) if fired else 0.0,
        "arrival_per_second": args.timers / args.window,
        "processes": dict(processes.most_common()),
        "connections": len(backends),
        "per_second": per_second,
        "sweepers": sweepers,
        "cpu": run["cpu"],
        "scxml_timers": scxml_timers,
        "routes": routes,
        "met": bool(lateness)
        and percentile(lateness, 99) <= TARGET_P99
        and len(fired) == scxml_timers
        and (routes is None or routes["met"]),
    }


def collect_route_firing(run: dict[str, Any]) -> dict[str, Any]:
    """The route timers' part: each one's lateness is its take-and-decide commit (the ledger
    row's insert) minus its due (known here: the row is deleted when it fires)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT d.execution_id, d.status, extract(epoch FROM c.committed)
            FROM routes_routedelivery d
            LEFT JOIN bench_route_commit c ON c.delivery_id = d.id
            WHERE d.execution_id = ANY(%s)
            """,
            [run["route_pks"]],
        )
        rows = cursor.fetchall()
    dues = run["dues"]
    decided = [row for row in rows if row[2] is not None]
    lateness = [float(row[2]) - dues[row[0]] for row in decided]
    scheduled = len(run["route_pks"])
    return {
        "scheduled": scheduled,
        "statuses": dict(Counter(row[1] for row in rows)),
        "measured": len(decided),
        "lateness": summary(lateness),
        "met": bool(lateness)
        and percentile(lateness, 99) <= TARGET_P99
        and len(decided) == scheduled
        and all(row[1] == "delivered" for row in rows),
    }


def summary(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {}
    return {
        "p50": percentile(values, 50),
        "p90": percentile(values, 90),
        "p99": percentile(values, 99),
        "max": max(values),
        "min": min(values),
    }


# --------------------------------------------------------------------------- part 2: EXPLAIN


def captured_select(run: Callable[[], object]) -> str:
    """The first SELECT that ``run`` sends (in a transaction, rolled back)."""
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        run()
        transaction.set_rollback(True)
    return next(q["sql"] for q in queries.captured_queries if q["sql"].startswith("SELECT"))


def claim_select_sql() -> str:
    """The SELECT a real ``timers.firing.claim()`` runs now."""
    from statecharts.conf import statecharts_settings
    from timers.firing import claim

    return captured_select(
        lambda: claim(statecharts_settings.now(), statecharts_settings.TIMER_BATCH)
    )


def sweep_poll_sql() -> str:
    """The query a real ``timers.dispatch.sweep()`` polls with (one poll, nothing enqueued)."""
    from timers.dispatch import sweep

    ticks = iter([0.0, 0.0, 1.0, 1.0, 1.0])
    return captured_select(
        lambda: sweep(
            0.5, enqueue=lambda func: None, sleep=lambda s: None, monotonic=ticks.__next__
        )
    )


def explain(sql: str) -> list[str]:
    from django.db import connection, transaction

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS) {sql}")
        lines = [str(row[0]) for row in cursor.fetchall()]
        transaction.set_rollback(True)
    return lines


def time_query(sql: str, repeat: int) -> dict[str, float]:
    """Median and p99 ms of ``sql`` (in a transaction rolled back each time: it may lock)."""
    from django.db import connection, transaction

    samples = []
    rows: list[Any] = []
    for _ in range(repeat):
        with transaction.atomic(), connection.cursor() as cursor:
            begin = time.perf_counter()
            cursor.execute(sql)
            rows = cursor.fetchall()
            samples.append((time.perf_counter() - begin) * 1000)
            transaction.set_rollback(True)
    return {
        "median_ms": statistics.median(samples),
        "p99_ms": percentile(samples, 99),
        "rows": len(rows),
    }


def execute(*statements: str) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def scalar(sql: str) -> Any:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetchone()[0]


def bulk_timers(count: int, status: str, due: str) -> None:
    """Insert ``count`` timer rows (no execution behind them: they are only looked at)."""
    if count <= 0:
        return
    first = int(scalar("SELECT coalesce(max(ordinal), 0) FROM timers_timer WHERE send_id = 'bulk'"))
    settled = "NULL" if status == "pending" else "now()"
    execute(
        f"INSERT INTO timers_timer ({TIMER_COLUMNS}) "
        'SELECT 2000000000 + g, \'bulk\', g, \'{"name": "bulk", "type": "external"}\','
        f" '{{\"kind\": \"self\"}}', {due}, 1, 1, 1, NULL, 'onentry:waiting:0', NULL,"
        f" '{status}', 0, '', '', NULL, now(), {settled}"
        f" FROM generate_series({first + 1}, {first + count}) AS g"
    )


def pending_count(where: str = "") -> int:
    return int(scalar(f"SELECT count(*) FROM timers_timer WHERE status = 'pending' {where}"))


def run_explain(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The claim SELECT and the sweeper's poll, with 10,000 and ``--explain-rows`` pending rows
    (``DUE_NOW`` of them due now, the rest over the next 30 days), next to
    ``--settled-rows`` settled rows (due over the past 30 days: what ``prune_timers`` keeps),
    each with a few timers due and with none due (an idle sweeper's usual poll)."""
    settled = args.settled_rows - int(
        scalar("SELECT count(*) FROM timers_timer WHERE status <> 'pending'")
    )
    bulk_timers(settled, "fired", f"now() - (g::float8 / {max(1, settled)}) * interval '30 d'")
    results = []
    for target in (10_000, args.explain_rows):
        execute("DELETE FROM timers_timer WHERE status = 'pending' AND due <= now()")
        future = target - DUE_NOW - pending_count()
        bulk_timers(future, "pending", "now() + interval '1 minute' + random() * interval '30 d'")
        for due_now in (DUE_NOW, 0):
            if due_now:  # inserted last: the end of the heap, as newly scheduled rows are
                bulk_timers(due_now, "pending", "now() - random() * interval '1 s'")
            else:
                execute("DELETE FROM timers_timer WHERE status = 'pending' AND due <= now()")
            execute("ANALYZE timers_timer")
            case: dict[str, Any] = {
                "pending": pending_count(),
                "due_now": pending_count("AND due <= now()"),
                "rows": int(scalar("SELECT count(*) FROM timers_timer")),
                "index_size": str(
                    scalar("SELECT pg_size_pretty(pg_relation_size('timers_timer_due'))")
                ),
                "queries": {},
            }
            for name, sql in (("claim", claim_select_sql()), ("sweeper poll", sweep_poll_sql())):
                explain(sql)  # warm the cache once, as a running firer's would be
                plan = explain(sql)
                case["queries"][name] = {
                    "sql": sql,
                    "plan": plan,
                    "scan": next((line.strip(" ->") for line in plan if "Scan" in line), "?"),
                    "timing": time_query(sql, args.explain_repeat),
                }
            log(
                f"EXPLAIN: {case['pending']:,} pending ({case['due_now']} due), {case['rows']:,}"
                " rows: "
                + "; ".join(
                    f"{name} {q['timing']['median_ms']:.3f} ms {q['scan'].split('  ')[0]}"
                    for name, q in case["queries"].items()
                )
            )
            results.append(case)
    return results


# --------------------------------------------------------------------------- part 3: profile

# (label, module, qualified name): cumulative time per fire under cProfile. Each function is
# imported and found in the profile by its code object (file, first line, name), so a phase
# whose function was renamed or moved is reported MISSING, never as a phase that costs 0 us
# (the names before chunked firing did just that). Indentation in a label says what it is
# inside of: today's fire is a chunk of timers in one transaction (``fire_rows``).
FIRE_PHASES: tuple[tuple[str, str, str], ...] = (
    (
        "claim a batch (SELECT ... SKIP LOCKED, UPDATE claimed_until)",
        "timers.claiming",
        "claim_batch",
    ),
    ("renew the batch's claims when it runs long (_keep)", "timers.claiming", "_keep"),
    ("fire a chunk: one transaction for its timers (fire_rows)", "timers.chunks", "fire_rows"),
    (
        "  lock the chunk's executions (one SELECT ... FOR UPDATE)",
        "statecharts.stepper.sql",
        "lock_executions",
    ),
    ("  liveness, decode the row, resolve its delivery (_prepare)", "timers.fire_one", "_prepare"),
    ("  take the timers: pending -> fired (one UPDATE ... RETURNING)", "timers.chunks", "_take"),
    ("  deliver: the execution's step (_deliver)", "timers.fire_one", "_deliver"),
    (
        "    position decode (a new execution: no cache hit)",
        "statecharts.stepper.applying",
        "_load_position",
    ),
    ("    advance (the interpreter)", "statecharts.drivers.durable", "advance"),
    (
        "      take an engine from the pool + bind (_new_datamodel)",
        "statecharts.core.interpreter",
        "Interpreter._new_datamodel",
    ),
    (
        "        of which a new QuickJS engine built (prelude evaluated)",
        "statecharts.core.datamodel.ecmascript",
        "_Engine.__init__",
    ),
    (
        "      restore the datamodel snapshot",
        "statecharts.core.datamodel.ecmascript",
        "EcmascriptDatamodel.restore",
    ),
    (
        "      reset the previous execution's engine (_discard_live)",
        "statecharts.core.interpreter",
        "Interpreter._discard_live",
    ),
    ("    encode the position", "statecharts.core.position", "encode"),
    ("    UPDATE the execution (sql.update_row)", "statecharts.stepper.sql", "update_row"),
    ("    INSERT the history row (sql.insert_row)", "statecharts.stepper.sql", "insert_row"),
    ("  COMMIT", "django.db.backends.base.base", "BaseDatabaseWrapper.commit"),
    ("after the commit: deliver the outbox", "statecharts.stepper.delivery", "deliver"),
    (
        "database driver: all statements (incl. waiting for the server)",
        "psycopg",
        "Cursor.execute",
    ),
)


def _profile_key(module: str, qualified: str) -> tuple[str, int, str] | None:
    """The (file, first line, name) under which cProfile records this function; None if it
    is not there any more (or is not a Python function)."""
    import importlib

    try:
        owner: Any = importlib.import_module(module)
        for part in qualified.split("."):
            owner = getattr(owner, part)
    except (ImportError, AttributeError):
        return None
    code = getattr(getattr(owner, "__wrapped__", owner), "__code__", None)
    if code is None:
        return None
    return (code.co_filename, code.co_firstlineno, code.co_name)


def forget_positions() -> None:
    """Empty this thread's cache of decoded positions (the stepper keeps the last ones it
    wrote, per thread), so the next step of each execution decodes its blob, as a worker that
    has never seen it would."""
    from statecharts.stepper import applying as step

    cache = getattr(step, "_positions", None)
    if cache is None:
        raise SystemExit("profile: statecharts.stepper.applying._positions is gone; update")
    cache.cache = {}


CHUNK_SHOWN = 5  # due timers whose fire_due() statements the profile lists


def backend_cpu() -> float:
    """CPU seconds used so far by this connection's PostgreSQL backend (same machine)."""
    pid = int(scalar("SELECT pg_backend_pid()"))
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            rest = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


def measured(run: Callable[[], int]) -> dict[str, float]:
    """Wall, this process's CPU and its backend's CPU per item of ``run()`` (returns items)."""
    from django.db import connection

    connection.ensure_connection()
    server, cpu, wall = backend_cpu(), time.process_time(), time.perf_counter()
    items = run()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    server = backend_cpu() - server
    return {
        "items": items,
        "per_second": items / wall,
        "wall_ms": 1000 * wall / items,
        "cpu_ms": 1000 * cpu / items,
        "server_cpu_ms": 1000 * server / items,
    }


def run_profile(args: argparse.Namespace) -> dict[str, Any]:
    """One firer in this process, no cluster: what one fire costs, against the same step
    without the timer machinery, and where the time goes."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from statecharts import stepper
    from statecharts.models import Chart
    from timers import dispatch, firing
    from timers.models import Timer

    chart = Chart.objects.load(CHART)
    n = args.profile_timers

    def executions(count: int, delay: str) -> list[int]:
        pks = [stepper.start(chart, data={"delay": delay}).pk for _ in range(count)]
        # A cluster worker has never seen these executions: forget the positions this process
        # cached when it started them, so each step decodes its blob as a worker's would.
        forget_positions()
        time.sleep(0.05)  # a "1ms" delay is then due
        return pks

    executions(50, "1ms")
    dispatch.drain()  # warm-up: imports, the compiled chart, the connection

    waiting = executions(n, "1d")

    def send_all() -> int:
        for pk in waiting:
            stepper.send(pk, "alarm")
        return len(waiting)

    send = measured(send_all)
    executions(n, "1ms")
    fire = measured(dispatch.drain)
    log(
        f"profile: stepper.send {send['per_second']:.0f}/s, one drain {fire['per_second']:.0f}"
        " fires/s"
    )

    executions(n, "1ms")
    profiler = cProfile.Profile()
    profiler.enable()
    profiled = dispatch.drain()
    profiler.disable()
    raw: dict[tuple[str, int, str], tuple[Any, ...]] = pstats.Stats(  # type: ignore[attr-defined]
        profiler, stream=io.StringIO()
    ).stats
    drain_key = _profile_key("timers.dispatch", "drain")
    if drain_key is None or drain_key not in raw:
        raise SystemExit("profile: timers.dispatch.drain is gone; update run_profile")
    total = raw[drain_key][3]
    phases: list[tuple[str, float | None, float | str]] = []
    for label, module, qualified in FIRE_PHASES:
        key = _profile_key(module, qualified)
        if key is None:
            phases.append((label, None, f"MISSING: {module}.{qualified} (update FIRE_PHASES)"))
            continue
        entry = raw.get(key)
        if entry is None:
            phases.append((label, None, "not called"))
            continue
        seconds = entry[3]
        phases.append((label, 1e6 * seconds / profiled, 100 * seconds / total))
    components: Counter[str] = Counter()
    for (filename, _line, name), entry in raw.items():
        components[_component(filename.replace("\\", "/"), name)] += entry[2]

    executions(CHUNK_SHOWN, "1ms")
    due = Timer.objects.filter(status="pending", due__lte=datetime.now().astimezone()).count()
    with CaptureQueriesContext(connection) as queries:
        report = firing.fire_due()
    routes = profile_routes(n) if args.route_share > 0 else None
    return {
        "routes": routes,
        "send": send,
        "fire": fire,
        "profiled_us_per_fire": 1e6 * total / profiled,
        "phases": phases,
        "components": [(k, 100 * v / total) for k, v in components.most_common()],
        "one_chunk": {
            "due": due,
            "outcomes": str(report),
            "statements": [q["sql"][:90] for q in queries.captured_queries],
        },
    }


def profile_routes(n: int) -> dict[str, Any]:
    """``--profile --route-share S``: the same drain of ``n`` due route timers (delayed route
    sends on the recording route, nothing else due), measured like the SCXML drain; and the
    statements of one ``fire_due()`` with ``CHUNK_SHOWN`` route timers due."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from statecharts import stepper
    from statecharts.models import Chart
    from timers import dispatch, firing

    route_settings_on()
    chart = Chart.objects.load(ROUTE_CHART)

    def due_routes(count: int) -> None:
        for _ in range(count):
            stepper.start(chart, data={"delay": "1ms"})
        time.sleep(0.05)

    due_routes(50)
    dispatch.drain()  # warm-up
    due_routes(n)
    fire = measured(dispatch.drain)
    log(f"profile: one drain of route timers {fire['per_second']:.0f} fires/s")
    due_routes(CHUNK_SHOWN)
    with CaptureQueriesContext(connection) as queries:
        report = firing.fire_due()
    return {
        "fire": fire,
        "one_chunk": {
            "due": CHUNK_SHOWN,
            "outcomes": str(report),
            "statements": [q["sql"][:90] for q in queries.captured_queries],
        },
    }


# A payload like an application's (about 200 bytes of JSON): the codec comparison's event.
PAYLOAD_CHART = CHART.replace(
    '<send id="alarm" event="alarm" delayexpr="delay"/>',
    '<send id="alarm" event="alarm" delayexpr="delay"><param name="order" expr="({id: 81723,'
    " customer: 'Ada Lovelace', email: 'ada@example.org', lines: [{sku: 'A-1', qty: 2},"
    " {sku: 'B-7', qty: 1}], note: 'leave at the door, ring twice'})"
    '"/></send>',
).replace('name="bench_timer"', 'name="bench_timer_payload"')


def run_codecs(args: argparse.Namespace) -> dict[str, Any]:
    """The cost per fire of the payload codec (docs/payload-codecs.md), off and on, in the
    same run: one firer in this process drains ``--profile-timers`` due timers whose event
    carries PAYLOAD_CHART's payload, with PAYLOAD_CODEC "json" and then "encrypted" (the fire
    decrypts the timer's event and encrypts the fired step's history input), alternating
    ``--codec-rounds`` times so drift in the machine's load falls on both."""
    from cryptography.fernet import Fernet
    from django.test import override_settings

    from statecharts import stepper
    from statecharts.models import Chart
    from timers import dispatch

    keys = [{"id": "bench", "key": Fernet.generate_key().decode()}]
    codecs = {
        "json": "statecharts.policies.codecs.JSONCodec",
        "encrypted": "statecharts.policies.codecs.EncryptingCodec",
    }
    chart = Chart.objects.load(PAYLOAD_CHART)
    n = args.profile_timers
    results: dict[str, list[dict[str, float]]] = {"json": [], "encrypted": []}
    for round_ in range(args.codec_rounds + 1):
        for name in ("json", "encrypted"):
            settings = {"PAYLOAD_CODECS": codecs, "PAYLOAD_CODEC": name, "PAYLOAD_KEYS": keys}
            with override_settings(STATECHARTS=settings):
                for _ in range(n if round_ else 50):
                    stepper.start(chart, data={"delay": "1ms"})
                forget_positions()
                time.sleep(0.05)
                run = measured(dispatch.drain)
            if round_:  # round 0 warms up both
                results[name].append(run)
    # The codec alone, no database: one fire decodes the timer's event and encodes the
    # fired step's history input (an encode and a decode of the same payload).
    payload = {
        "id": 81723,
        "customer": "Ada Lovelace",
        "email": "ada@example.org",
        "lines": [{"sku": "A-1", "qty": 2}, {"sku": "B-7", "qty": 1}],
        "note": "leave at the door, ring twice",
    }
    alone: dict[str, float] = {}
    for name in ("json", "encrypted"):
        settings = {"PAYLOAD_CODECS": codecs, "PAYLOAD_CODEC": name, "PAYLOAD_KEYS": keys}
        with override_settings(STATECHARTS=settings):
            from statecharts.policies import codecs as payload_codecs

            codec = payload_codecs.resolve(name)
            rounds = 5_000
            started = time.perf_counter()
            for _ in range(rounds):
                codec.decode(codec.encode(payload))
            alone[name] = 1e6 * (time.perf_counter() - started) / rounds
    summary: dict[str, Any] = {"alone_us": alone}
    for name, runs in results.items():
        summary[name] = {
            key: statistics.median(r[key] for r in runs)
            for key in ("per_second", "wall_ms", "cpu_ms", "server_cpu_ms")
        }
    log("codecs: " + ", ".join(f"{k} {summary[k]['wall_ms']:.3f} ms/fire" for k in results))
    return {"timers": n, "rounds": args.codec_rounds, "codecs": summary}


# --------------------------------------------------------------------------- report


def render(command: str, server: str, settings: dict[str, str], r: dict[str, Any]) -> str:
    from django.conf import settings as django_settings

    q = django_settings.Q_CLUSTER
    lines = [
        f"command: {command}",
        f"python:  {platform.python_implementation()} {platform.python_version()}"
        f" on {platform.platform()} ({os.cpu_count()} CPUs), load average before:"
        f" {r['load_before']}, after: {r['load_after']}",
        f"postgres: {server}; " + ", ".join(f"{k}={v}" for k, v in settings.items()),
        "Q_CLUSTER: "
        + ", ".join(f"{k}={q[k]}" for k in ("orm", "workers", "timeout", "retry", "poll") if k in q)
        + (
            f" (workers overridden: {r['firing']['workers']})"
            if r.get("firing") and r["firing"]["workers"] != q.get("workers")
            else ""
        ),
    ]
    f = r.get("firing")
    if f:
        late, made = f["lateness"], f["created_lateness"]
        lines += [
            "",
            f"firing: {f['timers']:,} timers due evenly over {f['window']} s"
            f" ({f['arrival_per_second']:,.0f}/s), window opened {f['lead']:.1f} s after the setup"
            f" ({f['setup_seconds']:.0f} s, {f['ms_per_start']:.1f} ms per start);"
            f" clock {f['clock']}",
            f"  statuses: {f['statuses']}; executions moved to 'fired' with 2 steps:"
            f" {f['executions_moved']:,}; fired before due: {f['early']};"
            f" unsettled at the deadline: {f['unsettled']}",
            "  lateness (commit - due): "
            + ", ".join(f"{k} {late[k]:.3f} s" for k in ("p50", "p90", "p99", "max"))
            + f"  -> p99 <= {TARGET_P99:.0f} s: {'MET' if f['met'] else 'NOT MET'}",
            "  lateness by the history row's created (the batch's clock): "
            + ", ".join(f"{k} {made[k]:.3f} s" for k in ("p50", "p99", "max")),
            "  commit - created: "
            + ", ".join(f"{k} {f['commit_minus_created'][k]:.3f} s" for k in ("p50", "p99", "max")),
            f"  fired/s: {f['fired_per_second_active']:,.0f} (first to last commit:"
            f" {f['first_commit']:.2f} .. {f['last_commit']:.2f} s after the window opened);"
            f" {f['fired_per_second_window']:,.0f} from the window's opening to the last commit",
            f"  fired by {len(f['processes'])} worker processes {f['processes']},"
            f" over {f['connections']} database connections (one per drain task)",
            "  lateness by due second: "
            + "; ".join(
                f"{b['second']}: p50 {b['p50']:.2f} p99 {b['p99']:.2f} max {b['max']:.2f}"
                for b in f["per_second"]
            ),
            "  sweeper tasks the cluster saved (s from the window's opening; one still running"
            " when the cluster stops may not be saved): "
            + "; ".join(
                f"{s['started']:.1f}..{s['stopped']:.1f} enqueued {s['drains_enqueued']}"
                for s in f["sweepers"]
            ),
        ]
        routes = f.get("routes")
        if routes and routes["lateness"]:
            rl = routes["lateness"]
            lines.append(
                f"  of which route timers (delayed route sends, --route-share): "
                f"{routes['scheduled']:,} scheduled, {routes['measured']:,} decided, ledger"
                f" {routes['statuses']}; lateness (take-and-decide commit - due): "
                + ", ".join(f"{k} {rl[k]:.3f} s" for k in ("p50", "p90", "p99", "max"))
                + f"  -> p99 <= {TARGET_P99:.0f} s: {'MET' if routes['met'] else 'NOT MET'}"
                f"; SCXML timers: {f['scxml_timers']:,}"
            )
        cpu = f["cpu"]
        if cpu:
            used = cpu["cpu_seconds"]
            fired = max(1, f["fired_measured"])
            lines.append(
                f"  CPU while firing ({cpu['seconds']:.1f} s, {os.cpu_count()} CPUs): "
                + ", ".join(f"{who} {sec:.1f} s" for who, sec in sorted(used.items()))
                + f"; machine idle {100 * cpu['idle_share']:.0f}%,"
                f" iowait {100 * cpu['iowait_share']:.0f}%; per fire: cluster"
                f" {1000 * used.get('cluster (django-q2)', 0) / fired:.2f} ms +"
                f" postgres {1000 * used.get('postgres', 0) / fired:.2f} ms CPU"
            )
        if f["cluster_errors"]:
            lines.append("  cluster log errors: " + " | ".join(f["cluster_errors"]))
    cases = r.get("explain", [])
    if cases:
        lines += [
            "",
            "due queries (median / p99 ms of repeated runs, each rolled back; the plan's scan):",
            "| pending | due now | rows in all | query | median ms | p99 ms | scan |",
            "|---:|---:|---:|---|---:|---:|---|",
        ]
        for e in cases:
            for name, q in e["queries"].items():
                lines.append(
                    f"| {e['pending']:,} | {e['due_now']} | {e['rows']:,} | {name}"
                    f" | {q['timing']['median_ms']:.3f} | {q['timing']['p99_ms']:.3f}"
                    f" | {q['scan'].split('  (')[0]} |"
                )
        for e in cases:
            lines.append(
                f"plans with {e['pending']:,} pending rows, {e['due_now']} due now"
                f" ({e['rows']:,} rows in all; timers_timer_due {e['index_size']}):"
            )
            for name, q in e["queries"].items():
                lines += [f"  {name}: {q['sql']}", *("    " + line for line in q["plan"])]
    p = r.get("profile")
    if p:
        send, fire = p["send"], p["fire"]
        lines += [
            "",
            "one firer in this process (no cluster), per step: wall, this process's CPU, its"
            " PostgreSQL backend's CPU",
            f"  stepper.send('alarm') to {send['items']} waiting executions (the same step,"
            f" no timer): {send['per_second']:,.0f}/s, {send['wall_ms']:.2f} ms wall,"
            f" {send['cpu_ms']:.2f} ms CPU + {send['server_cpu_ms']:.2f} ms server CPU",
            f"  drain() of {fire['items']} due timers: {fire['per_second']:,.0f} fires/s,"
            f" {fire['wall_ms']:.2f} ms wall, {fire['cpu_ms']:.2f} ms CPU +"
            f" {fire['server_cpu_ms']:.2f} ms server CPU",
            f"  capacity: {fire['cpu_ms'] + fire['server_cpu_ms']:.2f} ms of CPU per fire, so at"
            f" most {1000 * (os.cpu_count() or 1) / (fire['cpu_ms'] + fire['server_cpu_ms']):,.0f}"
            f" fires/s on {os.cpu_count()} CPUs with nothing else running",
            f"  a drain under cProfile ({p['profiled_us_per_fire']:,.0f} us per fire; cProfile"
            " inflates Python-heavy code: read the shares):",
            *(_phase_line(label, us, pct) for label, us, pct in p["phases"]),
            "  self time by component:",
            *(f"    {pct:5.1f}%  {label}" for label, pct in p["components"]),
            f"  the statements of one fire_due() with {p['one_chunk']['due']} timers due"
            f" ({p['one_chunk']['outcomes']}): {len(p['one_chunk']['statements'])}",
            *("    " + s for s in p["one_chunk"]["statements"]),
        ]
        pr = p.get("routes")
        if pr:
            rf = pr["fire"]
            route_ms = rf["cpu_ms"] + rf["server_cpu_ms"]
            scxml_ms = fire["cpu_ms"] + fire["server_cpu_ms"]
            lines += [
                f"  drain() of {rf['items']} due route timers (--route-share):"
                f" {rf['per_second']:,.0f} fires/s, {rf['wall_ms']:.2f} ms wall,"
                f" {rf['cpu_ms']:.2f} ms CPU + {rf['server_cpu_ms']:.2f} ms server CPU;"
                f" per fire, route / SCXML timer: CPU {rf['cpu_ms'] / fire['cpu_ms']:.2f}x,"
                f" CPU + server CPU {route_ms / scxml_ms:.2f}x, wall"
                f" {rf['wall_ms'] / fire['wall_ms']:.2f}x",
                f"  the statements of one fire_due() with {pr['one_chunk']['due']} route timers"
                f" due ({pr['one_chunk']['outcomes']}): {len(pr['one_chunk']['statements'])}",
                *("    " + s for s in pr["one_chunk"]["statements"]),
            ]
    c = r.get("codecs")
    if c:
        json_, enc = c["codecs"]["json"], c["codecs"]["encrypted"]
        alone = c["codecs"]["alone_us"]
        lines += [
            "",
            f"payload codec, one firer in this process: drain() of {c['timers']} due timers"
            f" carrying a ~200-byte payload, median of {c['rounds']} alternating rounds",
            *(
                f"  {name:<10} {v['per_second']:,.0f} fires/s, {v['wall_ms']:.3f} ms wall,"
                f" {v['cpu_ms']:.3f} ms CPU + {v['server_cpu_ms']:.3f} ms server CPU per fire"
                for name, v in c["codecs"].items()
                if name != "alone_us"
            ),
            "  the codec alone (an encode and a decode of the payload, no database): "
            + ", ".join(f"{k} {v:.1f} us" for k, v in alone.items()),
            f"  encrypted - json: {enc['wall_ms'] - json_['wall_ms']:+.3f} ms wall,"
            f" {enc['cpu_ms'] - json_['cpu_ms']:+.3f} ms CPU per fire",
        ]
    return "\n".join(lines)


def _phase_line(label: str, us: float | None, pct: float | str) -> str:
    if us is None:
        return f"    {label:<68}{pct}"
    return f"    {label:<68}{us:>8,.0f} us {pct:5.1f}%"


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Durable timer firing lateness on PostgreSQL.")
    parser.add_argument("--timers", type=int, default=10_000)
    parser.add_argument("--window", type=float, default=10.0, help="seconds the dues span")
    parser.add_argument(
        "--workers", type=int, default=None, help="django-q2 workers (default: Q_CLUSTER's)"
    )
    parser.add_argument("--explain-rows", type=int, default=1_000_000)
    parser.add_argument("--explain-repeat", type=int, default=50)
    parser.add_argument(
        "--settled-rows", type=int, default=1_000_000, help="settled rows next to the pending"
    )
    parser.add_argument(
        "--lead", type=float, default=5.0, help="seconds between the setup's end and the window"
    )
    parser.add_argument(
        "--deadline",
        type=float,
        default=120.0,
        help="seconds after the window to wait for every timer to settle",
    )
    parser.add_argument(
        "--route-share",
        type=float,
        default=0.0,
        help="share of the executions whose alarm is a delayed route send (0..1)",
    )
    parser.add_argument("--profile", action="store_true", help="also profile one drain")
    parser.add_argument("--profile-timers", type=int, default=500)
    parser.add_argument(
        "--codecs", action="store_true", help="also compare the payload codecs per fire"
    )
    parser.add_argument("--codec-rounds", type=int, default=3)
    parser.add_argument("--skip-firing", action="store_true")
    parser.add_argument("--skip-explain", action="store_true")
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL, help="server (and maintenance DB)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write results as JSON")
    parser.add_argument("--cluster-child", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(None if argv is None else list(argv))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.cluster_child:
        cluster_child(args.workers, args.route_share > 0)
        return 0
    command = shlex.join([sys.executable, *sys.argv] if argv is None else [__file__, *argv])
    args.sqlite_dir = None  # throwaway_database's other branch
    result: dict[str, Any] = {"command": command, "load_before": load_average()}
    with throwaway_database("postgres", args) as url:
        log("migrating a throwaway database")
        setup_django(url)
        from django.conf import settings

        if args.workers is None:
            args.workers = int(settings.Q_CLUSTER["workers"])
        server, server_settings = server_description()
        if not args.skip_firing:
            result["firing"] = run_firing(args, url)
        if args.profile:
            result["profile"] = run_profile(args)
        if args.codecs:
            result["codecs"] = run_codecs(args)
        if not args.skip_explain:
            result["explain"] = run_explain(args)
        result["load_after"] = load_average()
        print(render(command, server, server_settings, result))
        from django.db import connections

        connections.close_all()
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
        print(f"JSON written to {args.json}")
    firing = result.get("firing")
    if firing is None:
        return 0
    routes = firing.get("routes")
    every_route_timer = routes is None or routes["measured"] == routes["scheduled"]
    return 0 if firing["fired_measured"] == firing["scxml_timers"] and every_route_timer else 1


if __name__ == "__main__":
    sys.exit(main())
