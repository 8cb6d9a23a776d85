"""Live timers' lateness while an overdue backlog drains: paced catch-up off against on.

The situation after downtime (issue 33; docs/timers.md, "Paced catch-up"): ``--backlog``
timer rows were due an hour ago when the worker group starts, and live timers keep coming
due (``--live`` of them over ``--window`` seconds) while the backlog drains. Unpaced, claims
take due rows in due order, so a live timer waits behind the whole backlog; paced
(``timers.pacing``: ``TIMER_CATCHUP_PER_SECOND``), claims take live rows first and overdue
ones at the catch-up rate.

Each mode runs in the same throwaway PostgreSQL database (``statecharts_bench_<pid>``,
migrated, dropped afterwards), one after the other, the same way:

1. the backlog: ``--sinks`` executions of a chart whose ``alarm`` transition keeps it
   waiting (each fire is a real durable step), then ``--backlog`` timer rows written with one
   ``INSERT ... SELECT generate_series`` copying one row the stepper wrote (so every row is
   what a delayed send writes), spread over the sinks, due between 1 h and 1 h minus
   ``--backlog`` ms ago;
2. ``--live`` executions of ``timer_firing.CHART`` started through the stepper (before the
   cluster, so the setup never competes with the firing), their timers due evenly over
   ``--window`` seconds from ``--lead`` seconds after the cluster is expected up
   (``--cluster-start`` seconds after the setup): work that comes due during the catch-up;
3. a real django-q2 cluster (``timer_firing.qcluster``: ``demo.settings.base.Q_CLUSTER``,
   ``--workers`` workers) and ``setup_timers``, with ``TIMER_CATCHUP_PER_SECOND`` 0 (off),
   ``--rate`` (on) or the mode's own rate passed to it: the backlog starts draining; wait
   until every row is settled (bounded by ``--deadline``), stop the cluster.

Lateness of a live timer = the moment its step COMMITTED (a deferred constraint trigger on
the history table, as in ``timer_firing.py``) minus its due. Reported per mode: live p50,
p99, max; the backlog's drain time (its last commit minus the cluster's start) and rate;
the live timers' lateness by second of the window. The ratio is the live p99 with pacing on
over the one with it off, in the same run.

Usage (from the repository root)::

    python benchmarks/timer_backlog.py [--backlog 20000] [--live 1000] [--window 20]
                                       [--sinks 1000] [--rate 250] [--workers 4]
                                       [--lead 20] [--deadline 300] [--modes off,on]
                                       [--pg-url URL] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from durable_steps import (  # noqa: E402  (a sibling script, not a package)
    DEFAULT_PG_URL,
    server_description,
    setup_django,
    throwaway_database,
)
from timer_firing import (  # noqa: E402
    CHART,
    COMMIT_STAMP_SQL,
    load_average,
    log,
    percentile,
    qcluster,
    start_executions,
    tail,
    wait_for_cluster,
)

SINK_CHART = """\
<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"
       name="bench_backlog_sink" initial="waiting">
  <state id="waiting">
    <onentry><send id="alarm" event="alarm" delay="1d"/></onentry>
    <transition event="alarm"/>
  </state>
</scxml>
"""
POLL = 0.25

# The backlog: copies of each sink's own timer row (written by the stepper), new ordinals,
# due an hour ago, spread over the sinks round robin (consecutive rows: different sinks).
BACKLOG_SQL = """
INSERT INTO timers_timer (
    execution_id, send_id, ordinal, event, codec, target, due, macrostep, microstep, round,
    content_index, owner, context, scheduled_in, delivery, fire_timeout_seconds, status,
    attempts, last_error, reason, created
)
SELECT t.execution_id, t.send_id, 1000 + g.i, t.event, t.codec, t.target,
       now() - interval '1 hour' + g.i * interval '1 millisecond' - %(span)s * interval '1 ms',
       t.macrostep, t.microstep, t.round, t.content_index, t.owner, t.context, t.scheduled_in,
       t.delivery, t.fire_timeout_seconds, 'pending', 0, '', '', now()
FROM generate_series(0, %(n)s - 1) AS g(i)
JOIN (
    SELECT row_number() OVER (ORDER BY id) - 1 AS k, timers_timer.*
    FROM timers_timer WHERE execution_id = ANY(%(sinks)s) AND ordinal = 1
) AS t ON t.k = g.i %% %(count)s
"""


def run_mode(args: argparse.Namespace, url: str, mode: str) -> dict[str, Any]:
    """One mode, from an empty timer table to every row settled."""
    from django.core.management import call_command
    from django.db import connection

    from statecharts import stepper
    from statecharts.models import Chart

    rate = 0.0 if mode == "off" else args.rate if mode == "on" else float(mode)
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE timers_timer, bench_commit, django_q_task, django_q_ormq")
    sink_chart, live_chart = Chart.objects.load(SINK_CHART), Chart.objects.load(CHART)

    started = time.perf_counter()
    sinks = [stepper.start(sink_chart).pk for _ in range(args.sinks)]
    with connection.cursor() as cursor:
        cursor.execute(
            BACKLOG_SQL,
            {"n": args.backlog, "span": args.backlog, "sinks": sinks, "count": args.sinks},
        )
        originals = "DELETE FROM timers_timer WHERE ordinal = 1 AND execution_id = ANY(%s)"
        cursor.execute(originals, [sinks])
        cursor.execute("ANALYZE timers_timer")
    log(f"[{mode}] backlog: {args.backlog} rows over {args.sinks} sinks")
    # The live timers, started before the cluster (the setup never competes with the firing,
    # whatever the mode): due from --lead seconds after the cluster is expected up, over
    # --window, so they come due while the backlog drains.
    open_at = time.time() + args.per_start * args.live * 1.5 + args.cluster_start + args.lead
    dues = [open_at + args.window * (i + 0.5) / args.live for i in range(args.live)]
    live = start_executions(live_chart, dues)
    log(f"[{mode}] set up in {time.perf_counter() - started:.1f} s")
    with tempfile.TemporaryFile("w+") as out:
        overrides = {"TIMER_CATCHUP_PER_SECOND": rate}
        with qcluster(url, args.workers, out, overrides=overrides) as cluster:
            wait_for_cluster(out, cluster, 60)
            call_command("setup_timers", stdout=open("/dev/null", "w"))  # noqa: SIM115
            cluster_up = time.time()
            pacing = "off" if not rate else f"{rate:g}/s"
            opens = open_at - cluster_up
            log(f"[{mode}] cluster up, pacing {pacing}; the window opens in {opens:.1f} s")
            deadline = open_at + args.window + args.deadline
            pending = -1
            while time.time() < deadline:
                if cluster.poll() is not None:
                    raise RuntimeError(f"the cluster exited:\n{tail(out)}")
                with connection.cursor() as cursor:
                    cursor.execute("SELECT count(*) FROM timers_timer WHERE status = 'pending'")
                    pending = cursor.fetchone()[0]
                if pending == 0 and time.time() > open_at + args.window:
                    break
                time.sleep(POLL)
            log(f"[{mode}] {pending} pending at the end; stopping the cluster")
    return collect(args, mode, rate, live, dues, sinks, cluster_up, open_at, pending)


def collect(
    args: argparse.Namespace,
    mode: str,
    rate: float,
    live: list[int],
    dues: list[float],
    sinks: list[int],
    cluster_up: float,
    open_at: float,
    pending: int,
) -> dict[str, Any]:
    from django.db import connection

    due_of = dict(zip(live, dues, strict=True))
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT h.execution_id, extract(epoch FROM c.committed)
            FROM statecharts_historyentry h JOIN bench_commit c ON c.history_id = h.id
            WHERE h.execution_id = ANY(%s) AND h.seq = 2
            """,
            [live],
        )
        committed = dict(cursor.fetchall())
        cursor.execute(
            """
            SELECT count(*), extract(epoch FROM max(c.committed))
            FROM statecharts_historyentry h JOIN bench_commit c ON c.history_id = h.id
            WHERE h.execution_id = ANY(%s) AND h.seq >= 2
            """,
            [sinks],
        )
        backlog_fired, last = cursor.fetchone()
    lateness = [float(committed[pk]) - due_of[pk] for pk in live if pk in committed]
    drained = float(last) - cluster_up if last is not None else math.nan
    during = [
        float(committed[pk]) - due_of[pk]
        for pk in live
        if pk in committed and last is not None and due_of[pk] <= float(last)
    ]
    per_second = []
    for second in range(math.ceil(args.window)):
        bucket = [
            float(committed[pk]) - due_of[pk]
            for pk in live
            if pk in committed and second <= due_of[pk] - open_at < second + 1
        ]
        if bucket:
            per_second.append(
                {"second": second, "p50": percentile(bucket, 50), "p99": percentile(bucket, 99)}
            )
    return {
        "mode": mode,
        "rate": rate,
        "live_scheduled": len(live),
        "live_fired": len(lateness),
        "live_p50": percentile(lateness, 50) if lateness else math.nan,
        "live_p99": percentile(lateness, 99) if lateness else math.nan,
        "live_max": max(lateness) if lateness else math.nan,
        "live_due_while_draining": len(during),
        "live_p99_while_draining": percentile(during, 99) if during else math.nan,
        "backlog": args.backlog,
        "backlog_fired": int(backlog_fired),
        "backlog_drain_s": drained,
        "backlog_per_s": int(backlog_fired) / drained if drained and drained > 0 else math.nan,
        "window_opened_after_cluster_s": open_at - cluster_up,
        "pending_at_end": pending,
        "per_second": per_second,
    }


def render(command: str, server: str, result: dict[str, Any]) -> str:
    lines = [
        "# Live timers while an overdue backlog drains (timers.pacing)",
        "",
        f"command: `{command}`",
        f"server: {server}",
        f"load before: {result['load_before']}; after: {result['load_after']}",
        "",
        "| mode | live p50 | live p99 | live max | p99 of those due while draining | "
        "backlog drained in | backlog rate | live fired | window opened |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["modes"]:
        label = "off" if not r["rate"] else f"on ({r['rate']:g}/s per process)"
        lines.append(
            f"| {label} | {r['live_p50']:.3f} s | {r['live_p99']:.3f} s | {r['live_max']:.3f} s"
            f" | {r['live_p99_while_draining']:.3f} s ({r['live_due_while_draining']})"
            f" | {r['backlog_drain_s']:.1f} s | {r['backlog_per_s']:.0f}/s"
            f" | {r['live_fired']}/{r['live_scheduled']}"
            f" | {r['window_opened_after_cluster_s']:.1f} s after the cluster's start |"
        )
    by = {r["mode"]: r for r in result["modes"]}
    off = by.get("off")
    for r in result["modes"]:
        if off is None or r is off or not off["live_p99"]:
            continue
        lines += [
            "",
            f"pacing {r['rate']:g}/s against off: live p99 "
            f"{r['live_p99'] / off['live_p99']:.3f}x; backlog drain time "
            f"{r['backlog_drain_s'] / off['backlog_drain_s']:.2f}x",
        ]
    for r in result["modes"]:
        lines += ["", f"{r['mode']}: live lateness by second of the window (p50 / p99)"]
        lines += [f"  {s['second']:>3}: {s['p50']:.3f} / {s['p99']:.3f}" for s in r["per_second"]]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backlog", type=int, default=20_000, help="overdue rows")
    parser.add_argument("--live", type=int, default=1_000, help="live timers in the window")
    parser.add_argument("--window", type=float, default=20.0, help="seconds the live dues span")
    parser.add_argument("--sinks", type=int, default=1_000, help="executions the backlog uses")
    parser.add_argument("--rate", type=float, default=250.0, help="TIMER_CATCHUP_PER_SECOND")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument(
        "--lead", type=float, default=20.0, help="s from the cluster's start to the window's"
    )
    parser.add_argument(
        "--cluster-start", type=float, default=8.0, help="s a cluster takes to start (estimate)"
    )
    parser.add_argument("--deadline", type=float, default=300.0)
    parser.add_argument(
        "--modes", default="off,on", help="off, on (--rate) or a rate, comma-separated"
    )
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    parser.add_argument("--json", type=Path, metavar="OUT")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    command = shlex.join([sys.executable, *sys.argv] if argv is None else [__file__, *argv])
    args.sqlite_dir = None
    result: dict[str, Any] = {"command": command, "load_before": load_average(), "modes": []}
    with throwaway_database("postgres", args) as url:
        log("migrating a throwaway database")
        setup_django(url)
        from django.db import connection

        from statecharts import stepper
        from statecharts.models import Chart

        with connection.cursor() as cursor:
            cursor.execute(COMMIT_STAMP_SQL)
        calibration = Chart.objects.load(CHART)
        started = time.perf_counter()
        for _ in range(50):
            stepper.start(calibration, data={"delay": "1d"})
        args.per_start = (time.perf_counter() - started) / 50
        server, _settings = server_description()
        for mode in args.modes.split(","):
            result["modes"].append(run_mode(args, url, mode.strip()))
        result["load_after"] = load_average()
        print(render(command, server, result))
        from django.db import connections

        connections.close_all()
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
    return 0 if all(r["pending_at_end"] == 0 for r in result["modes"]) else 1


if __name__ == "__main__":
    sys.exit(main())
