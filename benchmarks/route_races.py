"""Fire vs cancel of the same route timer row: 1,000 trials on PostgreSQL with real threads.

Each trial is an execution whose delayed route send (``nudge`` on a recording route) is due;
one thread fires its row (``timers.routequeue.fire``) while another runs the step that
``<cancel>``s it, released together. Every row must end with exactly one fate (delivered once,
or cancelled and never delivered: the delivery ledger says which), and both orders must be
observed. The test suite runs the same race 200 times (tests/routes/test_route_races.py);
this script runs the full 1,000 and reports the split and the time. Numbers:
docs/performance.md.

Usage (from the repository root)::

    python benchmarks/route_races.py [--trials N] [--pairs P] [--chunk C] [--pg-url URL]

``--chunk C``: the firer fires C rows at a time in one transaction
(``timers.routequeue.fire_rows``, as the firing loop does), against steps cancelling them.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from durable_steps import DEFAULT_PG_URL, setup_django, throwaway_database  # noqa: E402


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=1_000)
    parser.add_argument("--pairs", type=int, default=8, help="pairs of racing threads")
    parser.add_argument("--chunk", type=int, default=1, help="rows per chunk fire")
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL, help="server (and maintenance DB)")
    args = parser.parse_args(argv)
    options = SimpleNamespace(pg_url=args.pg_url, sqlite_dir=None)
    with throwaway_database("postgres", options) as url:
        setup_django(url)
        from django.test import override_settings

        from tests.routes.racing import race_fire_and_cancel
        from tests.routes.recording import settings_with

        with override_settings(STATECHARTS=settings_with()):
            began = time.perf_counter()
            fates = race_fire_and_cancel(args.trials, args.pairs, args.chunk)
            seconds = time.perf_counter() - began
    print(
        f"fire vs cancel, {args.trials} trials on PostgreSQL ({args.pairs} pairs of threads,"
        f" chunks of {args.chunk}): "
        f"{fates['fired']} fired, {fates['cancelled']} cancelled, each exactly one fate; "
        f"{seconds:.1f} s (set-up included)"
    )
    if not (fates["fired"] and fates["cancelled"]):
        print("only one order was observed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
