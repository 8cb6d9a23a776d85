"""Durable invocation round trips per second, against single-execution steps, same run.

A round trip is everything one ``<invoke>`` costs, durably:

1. the parent's start step writes the invocation row and the start message;
2. delivering it stores nothing new (the child chart is already stored by hash) and starts the
   child in its own transaction;
3. the child's first step sends ``hello`` to ``#_parent`` and finishes: two outbox rows;
4. delivering them: the parent's step applies ``hello``, then its step applies
   ``done.invoke`` and finishes (the invocation row becomes ``done``).

That is five durable steps (parent start, child start, two parent steps, plus the bookkeeping
between them). The baseline, measured interleaved with it in the same run on the same
database, is the project's plainest durable step: ``stepper.send`` of one event to one
execution of a two-state chart. Reported: round trips per second, the steps per second they
amount to (5 per round trip), single steps per second, and the ratio of the two step rates
(median of the interleaved rounds; the machine is shared and noisy, so only the ratio is
meaningful).

Usage (from the repository root)::

    python benchmarks/invocation_round_trip.py [--db sqlite|postgres|both] [--trips N]
                                               [--rounds R] [--pg-url URL]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from durable_steps import setup_django, throwaway_database  # noqa: E402

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
CHILD = f"""<scxml {NS} initial="f">
  <final id="f"><onentry><send target="#_parent" event="hello"/></onentry>
    <donedata><param name="n" expr="1"/></donedata></final>
</scxml>"""
PARENT = f"""<scxml {NS} initial="s">
  <datamodel><data id="got" expr="0"/></datamodel>
  <state id="s">
    <invoke id="kid" type="scxml"><content>{CHILD}</content></invoke>
    <transition event="hello"><assign location="got" expr="got + 1"/></transition>
    <transition event="done.invoke.kid" target="done"/>
  </state>
  <final id="done"/>
</scxml>"""
TOGGLE = f"""<scxml {NS} initial="a">
  <state id="a"><transition event="toggle" target="b"/></state>
  <state id="b"><transition event="toggle" target="a"/></state>
</scxml>"""
STEPS_PER_TRIP = 5


def measure(trips: int, rounds: int) -> dict[str, float]:
    from statecharts import stepper
    from statecharts.models import Chart, Execution

    parent_chart = Chart.objects.load(PARENT)
    toggle = stepper.start(Chart.objects.load(TOGGLE))
    # warm up both
    for _ in range(5):
        stepper.start(parent_chart)
        stepper.send(toggle, "toggle")
    trip_rates: list[float] = []
    step_rates: list[float] = []
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(trips):
            stepper.start(parent_chart)
        trip_rates.append(trips / (time.perf_counter() - started))
        steps = trips * STEPS_PER_TRIP
        started = time.perf_counter()
        for _ in range(steps):
            stepper.send(toggle, "toggle")
        step_rates.append(steps / (time.perf_counter() - started))
    unfinished = Execution.objects.filter(parent__isnull=True, chart=parent_chart).exclude(
        status="completed"
    )
    assert not unfinished.exists(), "a round trip did not finish"
    ratios = [t * STEPS_PER_TRIP / s for t, s in zip(trip_rates, step_rates, strict=True)]
    return {
        "trips_per_s": statistics.median(trip_rates),
        "trip_steps_per_s": statistics.median(trip_rates) * STEPS_PER_TRIP,
        "steps_per_s": statistics.median(step_rates),
        "ratio": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="postgres")
    parser.add_argument("--trips", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--pg-url", default="postgres://root@127.0.0.1:5432/postgres")
    args = parser.parse_args(argv)
    options = SimpleNamespace(pg_url=args.pg_url, sqlite_dir=None)
    with throwaway_database(args.db, options) as url:
        setup_django(url)
        result = measure(args.trips, args.rounds)
    print(f"command: python benchmarks/invocation_round_trip.py --db {args.db} "
          f"--trips {args.trips} --rounds {args.rounds}")
    print(f"database: {args.db}; {args.rounds} interleaved rounds, median")
    print(
        f"round trips/s {result['trips_per_s']:,.1f} "
        f"(= {result['trip_steps_per_s']:,.0f} steps/s at {STEPS_PER_TRIP} steps a trip); "
        f"single steps/s {result['steps_per_s']:,.0f}; "
        f"ratio {result['ratio']:.2f} (rounds {result['ratio_min']:.2f}-{result['ratio_max']:.2f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
