"""What one timer fire costs PostgreSQL: CPU per fire (this firer and its backend) and WAL per
fire, by relation, for ``dispatch.drain()`` of due timers in one process (no cluster).

    python benchmarks/timer_fire_cost.py --timers 1000 --rounds 3
    # the code of another tree, e.g. a base:
    PYTHONPATH=/tmp/base python benchmarks/timer_fire_cost.py --repo /tmp/base

Each round starts ``--timers`` executions of the one-timer chart of ``timer_firing.py``
(their timers due 1 ms later), forgets the positions this process cached (as a worker that
never saw them), then measures one ``dispatch.drain()``: wall, this process's CPU, its
PostgreSQL backend's CPU (``/proc``, the server on this machine), and the WAL written between
the drain's first and last LSN (records and their length without full-page images, which
depend on when the last checkpoint was). The WAL is read with ``pg_waldump`` (``--waldump``; the
server's ``pg_wal`` must be readable) and only records of this database's relations, and the
commits of the transactions that wrote them, are counted, so other databases' writes on a
shared server do not count. The drain's heartbeat thread (its own connection) is counted in
the WAL, not in the backend CPU.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from durable_steps import DEFAULT_PG_URL, throwaway_database  # noqa: E402

RECORD = re.compile(
    r"rmgr: (\w+)\s+len \(rec/tot\):\s+(\d+)/\s*\d+, tx:\s+(\d+), lsn: \S+, prev \S+, "
    r"desc: (\S+)(.*)"
)
RELATION = re.compile(r"rel \d+/(\d+)/(\d+)")


def scalar(sql: str, params: Any = None) -> Any:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()[0]


def scalar_free(sql: str) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql)


def backend_cpu() -> float:
    pid = int(scalar("SELECT pg_backend_pid()"))
    with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


def wal_records(waldump: str, wal_dir: str, start: str, end: str, db_oid: int) -> list[tuple]:
    """(rmgr, total length, xid, desc, relation oid or None) of this database's records and
    of the commits of the transactions that wrote them, between two LSNs."""
    out = subprocess.run(
        [waldump, "-p", wal_dir, "-s", start, "-e", end],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    ours: list[tuple] = []
    commits: list[tuple] = []
    xids: set[int] = set()
    for line in out.splitlines():
        match = RECORD.search(line)
        if match is None:
            continue
        rmgr, length, xid, desc, rest = match.groups()
        rel = RELATION.search(rest)
        if rel is not None and int(rel.group(1)) == db_oid:
            ours.append((rmgr, int(length), int(xid), desc, int(rel.group(2))))
            xids.add(int(xid))
        elif rmgr == "Transaction" and desc == "COMMIT":
            commits.append((rmgr, int(length), int(xid), desc, None))
    return ours + [c for c in commits if c[2] in xids]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timers", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    parser.add_argument("--repo", default=str(HERE.parent), help="the tree to import")
    parser.add_argument("--waldump", default="/usr/lib/postgresql/15/bin/pg_waldump")
    parser.add_argument("--label", default="")
    parser.add_argument(
        "--perf",
        metavar="OUT",
        help="also record the backend with `perf record -g` during each drain (OUT.<round>)",
    )
    parser.add_argument(
        "--setup-sql", action="append", default=[], help="run after migrating (experiments)"
    )
    args = parser.parse_args()
    args.sqlite_dir = None
    sys.path.insert(0, args.repo)
    with throwaway_database("postgres", args) as url:
        os.environ["DATABASE_URL"] = url
        os.environ["DJANGO_SETTINGS_MODULE"] = "demo.settings.test"
        os.environ["DJANGO_DEBUG"] = "0"
        import django
        from django.core.management import call_command

        django.setup()
        call_command("migrate", verbosity=0, interactive=False)
        for sql in args.setup_sql:
            scalar_free(sql)
        return measure(args)


def measure(args: argparse.Namespace) -> int:
    from timer_firing import CHART, forget_positions

    import statecharts
    from statecharts import stepper
    from statecharts.models import Chart
    from timers import dispatch
    from timers.models import Timer

    print(f"code: {Path(statecharts.__file__).parent.parent} {args.label}", flush=True)
    chart = Chart.objects.load(CHART)
    db_oid = int(scalar("SELECT oid FROM pg_database WHERE datname = current_database()"))
    wal_dir = str(scalar("SHOW data_directory")) + "/pg_wal"

    def due(count: int) -> None:
        for _ in range(count):
            stepper.start(chart, data={"delay": "1ms"})
        forget_positions()
        time.sleep(0.05)

    due(50)
    dispatch.drain()
    names = {}
    rows = []
    for _ in range(args.rounds):
        due(args.timers)
        start_lsn = scalar("SELECT pg_current_wal_insert_lsn()::text")
        recorder = None
        if args.perf:
            pid = int(scalar("SELECT pg_backend_pid()"))
            recorder = subprocess.Popen(
                ["perf", "record", "-g", "-q", "-p", str(pid), "-o", f"{args.perf}.{len(rows)}"]
            )
            time.sleep(0.5)
        server, cpu, wall = backend_cpu(), time.process_time(), time.perf_counter()
        fired = dispatch.drain()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        server = backend_cpu() - server
        if recorder is not None:
            recorder.send_signal(signal.SIGINT)
            recorder.wait()
        end_lsn = scalar("SELECT pg_current_wal_insert_lsn()::text")
        records = wal_records(args.waldump, wal_dir, start_lsn, end_lsn, db_oid)
        if not names:
            from django.db import connection

            with connection.cursor() as cursor:
                cursor.execute("SELECT relfilenode, relname FROM pg_class WHERE relfilenode > 0")
                names = dict(cursor.fetchall())
        by_rel: Counter[str] = Counter()
        by_rel_bytes: Counter[str] = Counter()
        for rmgr, length, _xid, desc, rel in records:
            key = f"{names.get(rel, rel)} {rmgr}/{desc}" if rel else f"{rmgr}/{desc}"
            by_rel[key] += 1
            by_rel_bytes[key] += length
        rows.append(
            {
                "fired": fired,
                "wall_ms": 1000 * wall / fired,
                "cpu_ms": 1000 * cpu / fired,
                "server_ms": 1000 * server / fired,
                "wal_records": len(records) / fired,
                "wal_bytes": sum(r[1] for r in records) / fired,
                "by_rel": {k: (v / fired, by_rel_bytes[k] / fired) for k, v in by_rel.items()},
            }
        )
        left = Timer.objects.filter(status="pending").count()
        print(
            f"round: {fired} fired ({left} pending left), wall {rows[-1]['wall_ms']:.2f} ms,"
            f" client CPU {rows[-1]['cpu_ms']:.3f} ms, server CPU {rows[-1]['server_ms']:.3f}"
            f" ms, WAL {rows[-1]['wal_records']:.2f} records {rows[-1]['wal_bytes']:.0f} B"
            " per fire",
            flush=True,
        )
    for key in ("cpu_ms", "server_ms", "wal_records", "wal_bytes"):
        values = [r[key] for r in rows]
        print(f"{key}: min {min(values):.3f} median {statistics.median(values):.3f}")
    print("WAL per fire by relation (last round): records, bytes")
    for key, (n, b) in sorted(rows[-1]["by_rel"].items(), key=lambda kv: -kv[1][1]):
        print(f"  {n:7.3f} {b:8.1f}  {key}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
