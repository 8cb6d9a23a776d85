"""What reading an execution costs on hostile chart shapes (issue 28, item 1): the available
events of one execution whose active state holds

- ``guarded N``: N guarded transitions, each with its own event (``e{i}``, ``x > {i}``);
- ``descriptors N``: one transition with N descriptors (``e0 e1 ...``);
- ``prefix N``: N/2 guarded transitions on the prefix descriptor ``a`` and N/2 on names
  under it (``a.{i}``): every name matches every ``a`` transition.

Measured: wall-clock seconds of one call (``time.perf_counter``; one call each, the shapes
are slow enough on their own) of the core's ``available_events`` (the first: it also pays
the sandbox's one-time check of each guard's text, which the doors then find done) and,
with ``--doors``, of the doors that show it: ``GET /api/executions/{id}/``, the list with
``?fields=available_events`` (a page holding that one execution), and the admin's change
page, through Django's test client as a superuser (SQLite in a temporary folder); and, from
one more detail request, how many of its events are ``truncated`` and how many guards were
left unevaluated by the request's guard time (``unguarded``).

Usage (from the repository root)::

    python benchmarks/available_events_shapes.py [--doors] [--shapes guarded:2000,...]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
NS = "http://www.w3.org/2005/07/scxml"
HEAD = f'<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript" name="{{name}}" initial="s">'
DATA = '<datamodel><data id="x" expr="0"/></datamodel>'


def guarded(n: int) -> str:
    body = "".join(f'<transition event="e{i}" cond="x &gt; {i}" target="t"/>' for i in range(n))
    return f'{HEAD}{DATA}<state id="s">{body}</state><state id="t"/></scxml>'


def descriptors(n: int) -> str:
    names = " ".join(f"e{i}" for i in range(n))
    return (
        f'{HEAD}{DATA}<state id="s"><transition event="{names}" target="t"/></state>'
        '<state id="t"/></scxml>'
    )


def prefix(n: int) -> str:
    half = n // 2
    body = "".join(f'<transition event="a" cond="x &gt; {i}" target="t"/>' for i in range(half))
    body += "".join(f'<transition event="a.{i}" cond="x &gt; {i}"/>' for i in range(half))
    return f'{HEAD}{DATA}<state id="s">{body}</state><state id="t"/></scxml>'


SHAPES: dict[str, Callable[[int], str]] = {
    "guarded": guarded,
    "descriptors": descriptors,
    "prefix": prefix,
}
DEFAULT = "guarded:2000,guarded:10000,descriptors:10000,prefix:2000,prefix:10000"


def timed(function: Callable[[], object]) -> float:
    start = time.perf_counter()
    response = function()
    elapsed = time.perf_counter() - start
    assert getattr(response, "status_code", 200) == 200, response
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default=DEFAULT, help=f"shape:size,... ({DEFAULT})")
    parser.add_argument("--doors", action="store_true", help="also the API and the admin")
    args = parser.parse_args()

    folder = tempfile.mkdtemp(prefix="events-shapes-")
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
    from statecharts.core import Interpreter, load_chart
    from statecharts.core.availability import available_events
    from statecharts.models import Chart

    setup_test_environment()
    call_command("migrate", verbosity=0, interactive=False)
    client = APIClient()
    client.force_login(User.objects.create_superuser("bench", password="x"))
    warm = stepper.start(Chart.objects.load(guarded(3).replace("{name}", "warm-up")))
    for url in (f"/api/executions/{warm.pk}/", f"/admin/statecharts/execution/{warm.pk}/change/"):
        client.get(url)  # (the first request of a process sets things up)
    available_events(
        load_chart(guarded(3)), Interpreter(load_chart(guarded(3))).initialize("w").state
    )

    print(f"{'shape':<18}{'events':>8}{'core s':>10}", end="")
    doors = f"{'detail s':>10}{'list s':>10}{'admin s':>10}{'truncated':>10}{'unguarded':>10}"
    print(doors if args.doors else "")
    for item in args.shapes.split(","):
        shape, size = item.split(":")
        n = int(size)
        source = SHAPES[shape](n).replace("{name}", f"{shape}-{n}")
        chart = load_chart(source)
        state = Interpreter(chart).initialize("bench").state
        events: list[object] = []
        core = timed(lambda c=chart, s=state, e=events: e.extend(available_events(c, s)))
        print(f"{shape + ' ' + size:<18}{len(events):>8}{core:>10.3f}", end="", flush=True)
        if not args.doors:
            print()
            continue
        stored = Chart.objects.load(source)
        execution = stepper.start(stored)
        pk = execution.pk
        detail = timed(partial(client.get, f"/api/executions/{pk}/"))
        query = {"fields": "available_events", "chart": stored.pk, "page_size": 1}
        listed = timed(partial(client.get, "/api/executions/", query))
        page = timed(partial(client.get, f"/admin/statecharts/execution/{pk}/change/"))
        rows = client.get("/api/executions/", query).json()["results"]  # (what was listed)
        assert [row["id"] for row in rows] == [pk] and "available_events" in rows[0]
        shown = client.get(f"/api/executions/{pk}/").json()["available_events"]
        cut = sum(event["truncated"] for event in shown)
        unevaluated = sum(
            "ms in all" in option["reason"] for event in shown for option in event["transitions"]
        )
        print(f"{detail:>10.3f}{listed:>10.3f}{page:>10.3f}{cut:>10}{unevaluated:>10}", flush=True)


if __name__ == "__main__":
    main()
