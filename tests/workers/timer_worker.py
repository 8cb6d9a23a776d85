"""A timer firer in its own process, to be SIGKILLed mid-fire and then replaced by a new one.

Run by tests/timers/test_timer_races.py, never collected by pytest::

    DATABASE_URL=... python tests/workers/timer_worker.py start-and-fire CHART N START FIRE K
    DATABASE_URL=... python tests/workers/timer_worker.py fire FIRE
    DATABASE_URL=... python tests/workers/timer_worker.py fire-and-freeze FIRE K

``start-and-fire`` starts N executions of the stored chart CHART (a pk) at START (ISO 8601),
each scheduling timers in its start step, and prints ``STARTED <pk>,<pk>,...``. Then it fires
due timers at FIRE (``firing.fire_all_due``) with the stepper's ``fault_hook`` installed: the K-th
time a firing step reaches the "advanced" phase (the chart has taken the event, nothing of the
step is committed, the execution row and the claimed timers are held) it prints ``AT advanced``
and blocks forever, waiting for its SIGKILL. If it never gets there it prints ``DONE <report>``.

``fire`` is the restarted worker: it fires everything due at FIRE and prints
``REPORT <json outcomes>``.

``fire-and-freeze`` is a firer that hangs in the K-th firing step it reaches (the same freeze,
without starting anything first), for a timer that takes down every firer that tries it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


# Timers per firing transaction in the killed worker: with 2, the first chunk commits before
# the freeze (in the third firing step, inside the second chunk).
CHUNK = 2


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    modes = parser.add_subparsers(dest="mode", required=True)
    first = modes.add_parser("start-and-fire")
    first.add_argument("chart", type=int)
    first.add_argument("count", type=int)
    first.add_argument("start", type=datetime.fromisoformat)
    first.add_argument("fire", type=datetime.fromisoformat)
    first.add_argument("freeze_at", type=int, help="freeze in the K-th firing step")
    again = modes.add_parser("fire")
    again.add_argument("fire", type=datetime.fromisoformat)
    hang = modes.add_parser("fire-and-freeze")
    hang.add_argument("fire", type=datetime.fromisoformat)
    hang.add_argument("freeze_at", type=int, help="freeze in the K-th firing step")
    args = parser.parse_args(argv)

    if not os.environ.get("DATABASE_URL"):
        # Without it the worker would use the development database, not the test one.
        parser.error("DATABASE_URL must name the test database")
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "demo.settings.test")

    import django

    django.setup()

    from django.test import override_settings

    from statecharts import stepper
    from statecharts.models import Chart
    from statecharts.stepper import transaction as step_transaction
    from timers import firing

    if args.mode == "fire":
        report = firing.fire_all_due(now=args.fire)
        print(f"REPORT {json.dumps(report.outcomes)}", flush=True)
        return 0

    if args.mode == "start-and-fire":
        chart = Chart.objects.get(pk=args.chart)
        pks = [stepper.start(chart, now=args.start).pk for _ in range(args.count)]
        print(f"STARTED {','.join(map(str, pks))}", flush=True)

    seen = 0

    def freeze(phase: str) -> None:
        nonlocal seen
        if phase != "advanced":
            return
        seen += 1
        if seen == args.freeze_at:
            print("AT advanced", flush=True)
            threading.Event().wait()

    step_transaction.fault_hook = freeze
    with override_settings(STATECHARTS={"TIMER_FIRE_CHUNK": CHUNK}):
        report = firing.fire_all_due(now=args.fire)
    print(f"DONE {json.dumps(report.outcomes)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
