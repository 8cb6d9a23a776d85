"""What the apps' telemetry costs when nothing listens, counted rather than timed.

The apps' telemetry points (route deliveries, route timers, invocations: docs/telemetry.md)
each test whether anything listens before building an event. On a shared, loaded machine a
few function calls per delivery are far below the noise of any timing, so this counts what
does not move with the load: the SQL queries and the Python function calls (``cProfile``) of

- one durable invocation round trip (``invocation_round_trip.py``'s chart: the parent's start,
  the child's start and first step, the parent's two steps: five steps);
- one immediate route send (``stepper.send`` of an event whose transition sends on a route,
  delivered after the commit);
- one route timer fire (20 delayed route sends, due, fired by ``fire_all_due``; per row).

With ``--baseline REV`` the same counts are taken on that revision too (a ``git archive`` of
it, this script run there with its code first on ``PYTHONPATH``) and the ratios printed.
Nothing listens in either run: no receiver, the telemetry logger quiet, no OpenTelemetry.

Usage (from the repository root)::

    python benchmarks/app_telemetry_cost.py [--baseline REV]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import subprocess
import sys
import tempfile
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
ROUNDS = 20


def _calls(profile: cProfile.Profile) -> int:
    return sum(entry[1] for entry in pstats.Stats(profile).stats.values())  # type: ignore[attr-defined]


def count() -> dict[str, float]:
    """The counts, in this process, on the code first on ``sys.path``."""
    sys.path.insert(0, str(HERE))
    import invocation_round_trip as trips
    from durable_steps import setup_django, throwaway_database

    options = SimpleNamespace(pg_url=None, sqlite_dir=None)
    with throwaway_database("sqlite", options) as url:
        setup_django(url)
        from django.conf import settings
        from django.db import connection
        from django.test import override_settings
        from django.test.utils import CaptureQueriesContext
        from django.utils import timezone

        from statecharts import stepper
        from statecharts.core import telemetry
        from statecharts.models import Chart

        assert telemetry.listeners == [], "something listens"
        found: dict[str, float] = {}

        def measure(name: str, action: Any, per: int) -> None:
            with CaptureQueriesContext(connection) as queries:
                profile = cProfile.Profile()
                profile.enable()
                action()
                profile.disable()
            found[f"{name}: queries"] = len(queries.captured_queries) / per
            found[f"{name}: Python calls"] = _calls(profile) / per

        parent = Chart.objects.load(trips.PARENT)
        for _ in range(3):
            stepper.start(parent)
        measure(
            "invocation round trip", lambda: [stepper.start(parent) for _ in range(ROUNDS)], ROUNDS
        )

        routed = f"""<scxml {trips.NS} initial="a"><state id="a">
          <transition event="go"><send type="record" target="ada" event="hi"/></transition>
          <transition event="later"><send type="record" target="ada" event="hi" delay="1s"/>
          </transition></state></scxml>"""
        route = {"ROUTE": "tests.routes.recording.Recorder", "TYPES": ["record"]}
        configured = {**getattr(settings, "STATECHARTS", {}), "ROUTES": {"record": route}}
        with override_settings(STATECHARTS=configured):
            from timers import firing

            execution = stepper.start(Chart.objects.load(routed))
            for _ in range(3):
                stepper.send(execution, "go")
            measure(
                "immediate route send",
                lambda: [stepper.send(execution, "go") for _ in range(ROUNDS)],
                ROUNDS,
            )
            for _ in range(ROUNDS):
                stepper.send(execution, "later")
            due = timezone.now() + timedelta(seconds=5)
            measure("route timer fire", lambda: firing.fire_all_due(now=due), ROUNDS)
        return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", help="also count on this git revision")
    parser.add_argument("--json", type=Path, help="write the counts as JSON")
    args = parser.parse_args()
    if args.baseline is None:
        found = count()
        if args.json is not None:
            args.json.write_text(json.dumps(found), encoding="utf-8")
        for name, value in found.items():
            print(f"{name}: {value:,.1f}")
        return
    revision = subprocess.run(
        ["git", "rev-parse", "--short", args.baseline],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="baseline-") as folder:
        archive = subprocess.run(
            ["git", "archive", "--format=tar", revision],
            cwd=REPO,
            check=True,
            capture_output=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
        (Path(folder) / "benchmarks" / Path(__file__).name).write_bytes(Path(__file__).read_bytes())
        for label, tree in ((revision, Path(folder)), ("this tree", REPO)):
            with tempfile.NamedTemporaryFile(suffix=".json") as out:
                subprocess.run(
                    [sys.executable, f"benchmarks/{Path(__file__).name}", "--json", out.name],
                    cwd=tree,
                    env={**os.environ, "PYTHONPATH": str(tree)},
                    check=True,
                    stdout=subprocess.DEVNULL,
                )
                results[label] = json.loads(Path(out.name).read_text(encoding="utf-8"))
    before, after = results[revision], results["this tree"]
    print(f"| count | {revision} | this tree | this tree / {revision} |")
    print("|---|---:|---:|---:|")
    for name, old in before.items():
        new = after[name]
        print(f"| {name} | {old:,.1f} | {new:,.1f} | {new / old:.4f} |")


if __name__ == "__main__":
    main()
