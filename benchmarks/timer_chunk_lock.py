"""A chunked fire's lock, the ORM queryset against the compiled plan, in the same run.

``stepper.lock_many`` (``statecharts.stepper.sql.lock_executions``) locks a chunk's executions
with one ``SELECT ... FOR UPDATE``. It used to build that statement through the ORM on every
chunk; it is now compiled once per connection and padded size, as the single lock is. This
drains due timers (one firer in this process, ``timers.dispatch.drain``, chunks of
``TIMER_FIRE_CHUNK``) with the old way ("queryset") and the new ("compiled") in alternating
rounds, on a throwaway PostgreSQL database, and prints the CPU per fire of this process and
of its PostgreSQL backend (medians over the rounds), and their ratios.

Usage (from the repository root)::

    python benchmarks/timer_chunk_lock.py [--timers 300] [--rounds 6] [--pg-url URL]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import timer_firing  # noqa: E402  (a sibling script, not a package)
from durable_steps import DEFAULT_PG_URL, setup_django, throwaway_database  # noqa: E402


def queryset_lock(pks: set[int]) -> dict[int, Any]:
    """The lock as it was: the ORM builds the statement every time."""
    from django.db import connections

    from statecharts.stepper import sql

    conn = connections[sql.database()]
    locked = sql.locking_queryset(conn).filter(pk__in=pks).order_by("pk")
    return {execution.pk: execution for execution in locked}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--timers", type=int, default=300, help="fires per round")
    parser.add_argument("--rounds", type=int, default=6, help="rounds per variant")
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    args = parser.parse_args(argv)
    args.sqlite_dir = None
    with throwaway_database("postgres", args) as url:
        setup_django(url)
        from statecharts import stepper
        from statecharts.models import Chart
        from statecharts.stepper import sql
        from timers import dispatch

        compiled_lock = sql.lock_executions
        variants = {"queryset": queryset_lock, "compiled": compiled_lock}
        chart = Chart.objects.load(timer_firing.CHART)

        def due(count: int) -> None:
            for _ in range(count):
                stepper.start(chart, data={"delay": "1ms"})
            timer_firing.forget_positions()  # a worker has never seen these executions
            time.sleep(0.05)

        due(50)
        for lock in variants.values():  # warm-up: imports, plans, the connection
            sql.lock_executions = lock
            dispatch.drain()
        per_fire: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
        for index in range(args.rounds * 2):
            name = list(variants)[(index + index // 2) % 2]  # A B B A A B ...
            due(args.timers)
            sql.lock_executions = variants[name]
            server, cpu = timer_firing.backend_cpu(), time.process_time()
            fired = dispatch.drain()
            cpu, server = time.process_time() - cpu, timer_firing.backend_cpu() - server
            per_fire[name].append((1000 * cpu / fired, 1000 * server / fired))
        sql.lock_executions = compiled_lock
        from django.db import connections

        connections.close_all()
    medians = {
        name: (statistics.median(c for c, _ in rows), statistics.median(s for _, s in rows))
        for name, rows in per_fire.items()
    }
    print(f"`{' '.join([sys.executable, *sys.argv])}`; load {timer_firing.load_average()}")
    print("| lock | client CPU per fire | server CPU per fire | rounds |\n|---|---:|---:|---:|")
    for name, (client, server) in medians.items():
        print(f"| {name} | {client:.3f} ms | {server:.3f} ms | {len(per_fire[name])} |")
    (qc, qs), (cc, cs) = medians["queryset"], medians["compiled"]
    print(
        f"\ncompiled / queryset: client {cc / qc:.2f}x,"
        f" client + server {(cc + cs) / (qc + qs):.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
