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
        # The lock alone: chunks of TIMER_FIRE_CHUNK executions, each locked in a
        # transaction rolled back, the two ways alternately.
        from django.db import transaction

        from statecharts.models import Execution
        from timers.conf import timer_settings

        chunk = timer_settings.TIMER_FIRE_CHUNK
        ids = list(Execution.objects.order_by("pk").values_list("pk", flat=True))
        chunks = [set(ids[i : i + chunk]) for i in range(0, len(ids) - chunk + 1, chunk)]
        lock_only: dict[str, list[float]] = {name: [] for name in variants}
        for index in range(args.rounds * 2):
            name = list(variants)[(index + index // 2) % 2]
            lock = variants[name]
            cpu = time.process_time()
            for pks in chunks:
                with transaction.atomic():
                    lock(pks)
                    transaction.set_rollback(True)
            lock_only[name].append(1e6 * (time.process_time() - cpu) / len(chunks))
        sql.lock_executions = compiled_lock
        from django.db import connections

        connections.close_all()
    medians = {
        name: (statistics.median(c for c, _ in rows), statistics.median(s for _, s in rows))
        for name, rows in per_fire.items()
    }
    print(f"`{' '.join([sys.executable, *sys.argv])}`; load {timer_firing.load_average()}")
    print({n: [round(c, 3) for c, _ in rows] for n, rows in per_fire.items()}, file=sys.stderr)
    print({n: [round(c) for c in rows] for n, rows in lock_only.items()}, file=sys.stderr)
    print("| lock | client CPU per fire | server CPU per fire | rounds |\n|---|---:|---:|---:|")
    for name, (client, server) in medians.items():
        print(f"| {name} | {client:.3f} ms | {server:.3f} ms | {len(per_fire[name])} |")
    alone = {name: statistics.median(rows) for name, rows in lock_only.items()}
    print(
        f"\nthe lock alone, client CPU per chunk of {chunk}: queryset {alone['queryset']:.0f} us,"
        f" compiled {alone['compiled']:.0f} us ({alone['compiled'] / alone['queryset']:.2f}x;"
        f" {len(chunks)} chunks x {args.rounds} rounds each)"
    )
    (qc, qs), (cc, cs) = medians["queryset"], medians["compiled"]
    print(
        f"\ncompiled / queryset: client {cc / qc:.2f}x,"
        f" client + server {(cc + cs) / (qc + qs):.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
