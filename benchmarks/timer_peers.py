"""Timer firing against Celery, in the same run: lateness at a steady rate, and a burst's drain.

The same ``--timers`` (10,000) items, for each system, in two modes:

- **rate**: due evenly over ``--window`` (10) seconds (1,000 due per second): the lateness of
  each (its durable write's commit minus its due), p50, p99 and max;
- **burst**: all due at the same moment: the time from that moment to the last commit (the
  drain), and items per second.

The systems:

- **this project**, exactly as ``benchmarks/timer_firing.py`` measures it (its machinery is
  reused): executions of a one-timer chart started through the stepper, fired by the
  documented 4-worker django-q2 cluster (``demo.settings.base.Q_CLUSTER``, the ORM broker)
  with ``setup_timers``; each fire is a full durable step (execution locked, stepped, saved,
  one history row), its commit stamped by the database;
- **Celery** (the ``bench`` extra): a worker with 4 prefork processes on a Redis broker
  (``--redis-url``; the database number must be empty, it is flushed afterwards), started and
  stopped by this script; the items are sent with ``apply_async(countdown=...)`` before the
  window opens, and each task does one INSERT into PostgreSQL, autocommitted, stamped with
  ``clock_timestamp()`` (``benchmarks/celery_timer_peer.py``): one durable write per task, where
  ours does a whole step.

Everything runs in one throwaway PostgreSQL database (dropped afterwards). The machine's load
is printed before and after; on a loaded machine compare the ratios, not the numbers.

Usage (from the repository root, with ``pip install -e '.[test,bench]'``)::

    python benchmarks/timer_peers.py [--timers 10000] [--window 10] [--workers 4]
                                     [--systems ours,celery] [--modes rate,burst]
                                     [--redis-url redis://127.0.0.1:6379/13] [--pg-url URL]
                                     [--json OUT] [--conn-max-age 60] [--setup-sql SQL]

Our cluster runs with ``DJANGO_CONN_MAX_AGE`` 60 (the production settings' persistent
connections) unless ``--conn-max-age`` says otherwise; it is printed with the results.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import timer_firing  # noqa: E402  (a sibling script, not a package)
from durable_steps import DEFAULT_PG_URL, setup_django, throwaway_database  # noqa: E402

STOP_GRACE = 20.0
CALIBRATION = 200  # Celery sends timed to size the window's lead
POLL = 0.25


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def summary(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {}
    return {
        "p50": timer_firing.percentile(values, 50),
        "p99": timer_firing.percentile(values, 99),
        "max": max(values),
    }


# --------------------------------------------------------------------------- this project


def run_ours(args: argparse.Namespace, url: str, window: float) -> dict[str, Any]:
    """One ``timer_firing`` cluster run: ``--timers`` due over ``window`` seconds (0: at once)."""
    from django.db import connection

    ours = argparse.Namespace(
        timers=args.timers,
        window=window,
        workers=args.workers,
        lead=args.lead,
        deadline=args.deadline,
        route_share=0.0,
    )
    with tempfile.TemporaryFile("w+") as out:
        run = timer_firing.fire_in_cluster(ours, url, out)
        errors = [
            line
            for line in timer_firing.tail(out, 20_000).splitlines()
            if "ERROR" in line or "Traceback" in line
        ][:10]
        # Drain tasks the workers ran (django-q2 logs each task it starts), sweepers too.
        started = [
            line for line in timer_firing.tail(out, 10**9).splitlines() if " processing " in line
        ]
        tasks_run = {
            "drains": sum(1 for line in started if "'timers.dispatch.drain'" in line),
            "sweepers": sum(1 for line in started if "'timers.dispatch.sweep'" in line),
        }
    result = timer_firing.collect_firing(ours, run)
    with connection.cursor() as cursor:  # the next run creates the commit stamp again
        cursor.execute("DROP TABLE bench_commit; DROP FUNCTION bench_commit_stamp() CASCADE;")
    done = result["fired_measured"]
    drain = result["last_commit"]  # seconds from the window's start to the last commit
    return {
        "items": args.timers,
        "done": done,
        "lateness": result["lateness"],
        "drain_seconds": drain,
        "per_second": done / drain if drain > 0 else 0.0,
        "cpu": relabel(result["cpu"]),
        "errors": errors,
        # The sweepers the run saw end, and the drains they enqueued (a surplus drain costs
        # a broker round trip and a new connection, and finds nothing to fire).
        "sweepers": result["sweepers"],
        "tasks_run": tasks_run,
        "drains_enqueued": sum(s["drains_enqueued"] or 0 for s in result["sweepers"]),
    }


# --------------------------------------------------------------------------- Celery


@contextmanager
def redis_db(redis_url: str) -> Iterator[Any]:
    """The Redis database of ``redis_url``, refused unless empty, flushed afterwards."""
    import redis

    client = redis.Redis.from_url(redis_url)
    if client.dbsize():
        raise SystemExit(f"{redis_url} is not empty: pick an unused database (--redis-url)")
    try:
        yield client
    finally:
        client.flushdb()
        client.close()


@contextmanager
def celery_worker(args: argparse.Namespace, url: str, out: Any) -> Iterator[subprocess.Popen[str]]:
    env = {
        # A plain Celery worker: without DJANGO_SETTINGS_MODULE Celery's Django fixup stays off.
        **{k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"},
        "TIMER_PEERS_BROKER": args.redis_url,
        "TIMER_PEERS_QUEUE": f"timer_peers_{os.getpid()}",
        "TIMER_PEERS_PG": url,
    }
    os.environ.update({k: env[k] for k in ("TIMER_PEERS_BROKER", "TIMER_PEERS_QUEUE")})
    command = [
        sys.executable, "-m", "celery", "-A", "celery_timer_peer", "worker",
        "--concurrency", str(args.workers), "--pool", "prefork",
        "--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel", "WARNING",
    ]  # fmt: skip
    worker = subprocess.Popen(
        command,
        cwd=HERE,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        yield worker
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGTERM)
            try:
                worker.wait(timeout=STOP_GRACE)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait(timeout=STOP_GRACE)


def celery_rows(since: int = 0) -> list[tuple[int, float, float]]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT item, due, committed FROM bench_celery_fire WHERE item >= %s", [since]
        )
        return [(int(r[0]), float(r[1]), float(r[2])) for r in cursor.fetchall()]


def celery_count() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM bench_celery_fire WHERE item >= 0")
        return int(cursor.fetchone()[0])


def run_celery(args: argparse.Namespace, url: str, windows: list[float]) -> list[dict[str, Any]]:
    """One worker (``--workers`` prefork processes) for every mode, one after the other."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE bench_celery_fire (item integer PRIMARY KEY,"
            " due double precision NOT NULL, committed double precision NOT NULL)"
        )
    import celery_timer_peer

    results = []
    with (
        redis_db(args.redis_url),
        tempfile.TemporaryFile("w+") as out,
        celery_worker(args, url, out) as worker,
    ):
        celery_timer_peer.app.conf.task_default_queue = os.environ["TIMER_PEERS_QUEUE"]
        celery_timer_peer.app.conf.broker_url = args.redis_url
        # Ready: a probe task (item -1) has been run.
        celery_timer_peer.fire.apply_async((-1, time.time()))
        deadline = time.monotonic() + 60
        while not celery_rows(-1):
            if worker.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the Celery worker did not start:\n{timer_firing.tail(out)}")
            time.sleep(0.2)
        log(f"celery worker up (pid {worker.pid}, {args.workers} prefork processes)")
        # Calibrate the sending (items -2, -3, ...: due now, not measured), so the window
        # opens after the last send whatever the machine's load.
        started = time.perf_counter()
        for i in range(CALIBRATION):
            celery_timer_peer.fire.apply_async((-2 - i, time.time()), countdown=0)
        per_send = (time.perf_counter() - started) / CALIBRATION
        for index, window in enumerate(windows):
            base = (index + 1) * 1_000_000
            window_start = time.time() + per_send * args.timers * 1.5 + args.celery_lead
            dues = [window_start + window * (i + 0.5) / args.timers for i in range(args.timers)]
            started = time.perf_counter()
            for i, due in enumerate(dues):
                celery_timer_peer.fire.apply_async((base + i, due), countdown=due - time.time())
            sent = time.perf_counter() - started
            if time.time() >= window_start:
                raise RuntimeError("sending overran the window's start: raise --celery-lead")
            log(
                f"celery: {args.timers} sent in {sent:.1f} s; window opens in"
                f" {window_start - time.time():.1f} s"
            )
            stop = window_start + window + args.deadline
            done = 0
            sampler: timer_firing.CpuSampler | None = None
            while time.time() < stop:
                time.sleep(POLL)
                if sampler is None:
                    if time.time() >= window_start:
                        sampler = timer_firing.CpuSampler(worker.pid)  # its process group
                    continue
                sampler.sample()
                with connection.cursor() as cursor:
                    cursor.execute(
                        "SELECT count(*) FROM bench_celery_fire WHERE item >= %s", [base]
                    )
                    done = int(cursor.fetchone()[0])
                if done >= args.timers:
                    break
            rows = celery_rows(base)
            lateness = [committed - due for _, due, committed in rows]
            drain = max((c for _, _, c in rows), default=window_start) - window_start
            results.append(
                {
                    "items": args.timers,
                    "done": len(rows),
                    "lateness": summary(lateness),
                    "drain_seconds": drain,
                    "per_second": len(rows) / drain if drain > 0 else 0.0,
                    "send_seconds": sent,
                    "cpu": relabel(sampler.result()) if sampler is not None else {},
                }
            )
            log(f"celery window {window} s: {len(rows)} done")
    return results


def relabel(cpu: dict[str, Any]) -> dict[str, Any]:
    """``CpuSampler`` names the sampled process group "cluster (django-q2)"; here it is the
    Celery worker's."""
    seconds = dict(cpu.get("cpu_seconds", {}))
    if "cluster (django-q2)" in seconds:
        seconds["workers"] = seconds.pop("cluster (django-q2)")
    return {**cpu, "cpu_seconds": seconds}


# --------------------------------------------------------------------------- report


def render(command: str, result: dict[str, Any]) -> str:
    lines = [
        "# Timers against Celery",
        "",
        f"`{command}`",
        "",
        f"{result['timers']} items; load average before {result['load_before']},"
        f" after {result['load_after']}; our cluster's CONN_MAX_AGE"
        f" {result.get('conn_max_age', 0)}.",
        "",
        "| | rate: p50 | rate: p99 | rate: max | burst: drain | burst: per second"
        " | burst: CPU per item (workers + postgres) | burst: others' CPU |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for system, runs in result["systems"].items():
        rate, burst = runs.get("rate"), runs.get("burst")
        cells = [system]
        if rate:
            late = rate["lateness"]
            cells += [f"{late.get(p, float('nan')):.3f} s" for p in ("p50", "p99", "max")]
            if rate["done"] != rate["items"]:
                cells[-1] += f" ({rate['items'] - rate['done']} not done)"
        else:
            cells += ["", "", ""]
        if burst:
            cells += [f"{burst['drain_seconds']:.2f} s", f"{burst['per_second']:.0f}/s"]
            if burst["done"] != burst["items"]:
                cells[-1] += f" ({burst['items'] - burst['done']} not done)"
            used = burst["cpu"].get("cpu_seconds", {})
            done = max(burst["done"], 1)
            workers, postgres = used.get("workers", 0.0), used.get("postgres", 0.0)
            cells += [
                f"{1000 * workers / done:.2f} + {1000 * postgres / done:.2f} ms",
                f"{used.get('other', 0.0):.0f} s of {burst['cpu'].get('seconds', 0.0):.0f} s",
            ]
        else:
            cells += ["", "", "", ""]
        lines.append("| " + " | ".join(cells) + " |")
    ours, peer = result["systems"].get("ours", {}), result["systems"].get("celery", {})
    if ours.get("burst") and peer.get("burst"):
        ratio = peer["burst"]["drain_seconds"] / ours["burst"]["drain_seconds"]
        lines += ["", f"Burst: Celery's drain / ours = {ratio:.2f} (target > 1)."]
    if ours.get("rate") and peer.get("rate"):
        a, b = ours["rate"]["lateness"].get("p99"), peer["rate"]["lateness"].get("p99")
        if a and b:
            lines += [f"Rate: our p99 / Celery's = {a / b:.2f} (target <= 1)."]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--timers", type=int, default=10_000)
    parser.add_argument("--window", type=float, default=10.0, help="seconds the rate mode spans")
    parser.add_argument("--workers", type=int, default=None, help="default: Q_CLUSTER's")
    parser.add_argument("--systems", default="celery,ours")
    parser.add_argument("--modes", default="rate,burst")
    parser.add_argument("--lead", type=float, default=5.0, help="ours: see timer_firing.py")
    parser.add_argument(
        "--celery-lead",
        type=float,
        default=5.0,
        help="seconds between the last send (estimated, 50%% slack) and the window",
    )
    parser.add_argument(
        "--deadline",
        type=float,
        default=120.0,
        help="seconds after the window to wait for the last item",
    )
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/13")
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL, help="server (and maintenance DB)")
    parser.add_argument("--json", type=Path, metavar="OUT")
    parser.add_argument(
        "--setup-sql",
        action="append",
        default=[],
        metavar="SQL",
        help="run on the throwaway database after migrating, before any system (an "
        'experiment, e.g. "ALTER TABLE timers_timer SET (fillfactor = 50)"); repeatable',
    )
    parser.add_argument(
        "--conn-max-age",
        default=os.environ.get("DJANGO_CONN_MAX_AGE") or "60",
        help="ours: the cluster's DJANGO_CONN_MAX_AGE (default: the environment's, else 60, "
        "what the production settings use; 0: a new connection per task and broker poll)",
    )
    return parser.parse_args(None if argv is None else list(argv))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    command = shlex.join([sys.executable, *sys.argv] if argv is None else [__file__, *argv])
    args.sqlite_dir = None
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    windows = {"rate": args.window, "burst": 1e-6}  # burst: all due at once
    os.environ["DJANGO_CONN_MAX_AGE"] = str(args.conn_max_age)  # (the cluster inherits it)
    result: dict[str, Any] = {
        "command": command,
        "conn_max_age": args.conn_max_age,
        "timers": args.timers,
        "load_before": timer_firing.load_average(),
        "systems": {},
    }
    with throwaway_database("postgres", args) as url:
        log("migrating a throwaway database")
        setup_django(url)
        from django.conf import settings

        if args.workers is None:
            args.workers = int(settings.Q_CLUSTER["workers"])
        if args.setup_sql:
            from django.db import connection

            with connection.cursor() as cursor:
                for sql in args.setup_sql:
                    cursor.execute(sql)
            result["setup_sql"] = args.setup_sql
        for system in [s.strip() for s in args.systems.split(",") if s.strip()]:
            if system == "ours":
                result["systems"]["ours"] = {
                    mode: run_ours(args, url, windows[mode]) for mode in modes
                }
            elif system == "celery":
                runs = run_celery(args, url, [windows[mode] for mode in modes])
                result["systems"]["celery"] = dict(zip(modes, runs, strict=True))
            else:
                raise SystemExit(f"unknown system {system!r} (ours, celery)")
            log(json.dumps(result["systems"][system], default=str)[:2000])
        result["load_after"] = timer_firing.load_average()
        from django.db import connections

        connections.close_all()
    print(render(command, result))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
    every = all(
        run["done"] == run["items"] for runs in result["systems"].values() for run in runs.values()
    )
    return 0 if every else 1


if __name__ == "__main__":
    sys.exit(main())
