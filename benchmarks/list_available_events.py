"""What ``?fields=available_events`` adds to the API's executions list.

One page of ``--rows`` executions of chart (b) of core_throughput.py
(``charts/datamodel_ecmascript.scxml``: a 4-region parallel state with guarded transitions),
listed through DRF's test client by a superuser, with and without the field, in the same
process and run. Measured: CPU time of the whole request (``time.process_time``: the
database is SQLite in this process, so its work counts too), median over ``--rounds`` of
each round's median over ``--calls`` requests. Reported: both medians, and the extra CPU per
row of the page.

Usage (from the repository root)::

    python benchmarks/list_available_events.py [--rows 50] [--rounds 5] [--calls 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CHART = HERE / "charts" / "datamodel_ecmascript.scxml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()

    folder = tempfile.mkdtemp(prefix="list-events-")
    sys.path.insert(0, str(REPO))
    os.environ["DATABASE_URL"] = f"sqlite:///{folder}/bench.sqlite3"
    os.environ["DJANGO_SETTINGS_MODULE"] = "demo.settings.test"
    os.environ["DJANGO_DEBUG"] = "0"
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.test.utils import setup_test_environment
    from rest_framework.test import APIClient

    from statecharts import stepper
    from statecharts.models import Chart

    setup_test_environment()
    call_command("migrate", verbosity=0, interactive=False)
    chart = Chart.objects.load(CHART.read_text())
    from statecharts.core import Event

    cycle = ("produce", "tick", "done", "tick", "audit", "stats")
    for i in range(args.rows):  # spread over the states of one cycle (trusted inputs)
        execution = stepper.start(chart)
        for name in cycle[: i % len(cycle)]:
            stepper.feed(execution, stepper.Input.external(Event(name)))
    client = APIClient()
    client.force_authenticate(User.objects.create_superuser("bench", password="x"))

    def cpu(params: dict[str, object]) -> float:
        start = time.process_time()
        response = client.get("/api/executions/", {"page_size": args.rows, **params})
        elapsed = time.process_time() - start
        assert response.status_code == 200 and len(response.json()["results"]) == args.rows
        return elapsed * 1e3

    plain: list[float] = []
    fields: list[float] = []
    for params in ({}, {"fields": "available_events"}):  # warm-up
        cpu(params)
    for _ in range(args.rounds):
        plain.append(statistics.median(cpu({}) for _ in range(args.calls)))
        fields.append(
            statistics.median(cpu({"fields": "available_events"}) for _ in range(args.calls))
        )
    a, b = statistics.median(plain), statistics.median(fields)
    print(f"rows per page: {args.rows}")
    print(f"list, plain:                     {a:8.2f} ms CPU")
    print(f"list, ?fields=available_events:  {b:8.2f} ms CPU  ({b / a:.2f}x)")
    print(f"extra per row:                   {(b - a) / args.rows * 1e3:8.0f} us CPU")


if __name__ == "__main__":
    main()
