"""The example order chart, run durably: every event is a transaction on the database.

One event is sent from a separate process (``manage.py statechart send``), to show that the
execution's position lives in its row, not in the process that started it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import django

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "order.scxml"


def database_url() -> str:
    """The URL of the database this process uses, for the child process."""
    from django.db import connection

    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{Path(settings['NAME']).resolve()}"
    user = settings.get("USER") or ""
    password = f":{settings['PASSWORD']}" if settings.get("PASSWORD") else ""
    at = "@" if user else ""
    port = f":{settings['PORT']}" if settings.get("PORT") else ""
    return f"postgres://{user}{password}{at}{settings.get('HOST') or ''}{port}/{settings['NAME']}"


def main(chart_path: str | None = None) -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return run(Path(chart_path) if chart_path else EXAMPLE)


def run(path: Path) -> int:
    from django.db import connection

    from statecharts.core import ChartError
    from statecharts.models import Chart, Execution
    from statecharts.replay import replay

    try:
        chart = Chart.objects.load(path.read_bytes(), name=path.stem)
    except ChartError as exc:
        print(exc, file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"cannot read {path}: {exc.strerror}", file=sys.stderr)
        return 1
    print(f"database {connection.vendor} ({connection.settings_dict['NAME']})")
    print(f"chart #{chart.pk} {chart} sha256:{chart.content_hash[:12]}")
    number = Execution.objects.filter(chart=chart).count() + 1
    execution = Execution.objects.start(chart, business_key=f"demo-{number}")
    show(execution, "started")
    if path != EXAMPLE:
        return 0

    # Another process steps the same execution: all it needs is the row.
    command = [
        sys.executable,
        str(ROOT / "manage.py"),
        "statechart",
        "send",
        str(execution.pk),
        "payment.received",
        "--data",
        json.dumps({"amount": 99.5}),
    ]
    env = {**os.environ, "DATABASE_URL": database_url()}
    child = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True)
    if child.returncode != 0:
        print(child.stderr, file=sys.stderr)
        return 1
    execution.refresh_from_db()
    show(execution, "payment.received {amount: 99.5}, sent by another process")
    execution.send("packed")
    show(execution, "packed")
    execution.send("invoice.sent")
    show(execution, "invoice.sent")

    print("\nhistory (one row per input, each one transaction):")
    for entry in execution.history.all():
        event = (entry.input.get("event") or {}).get("name", "")
        kinds = sorted({e["kind"] for e in entry.effects if e["kind"] != "datamodel_change"})
        print(
            f"  #{entry.seq} {entry.input['kind']:<6} {event:<17} -> {entry.status_after:<9} "
            f"{', '.join(entry.configuration_after) or '-':<22} effects: {', '.join(kinds) or '-'}"
        )
    unhandled = sum(1 for e in execution.history.all() for x in e.effects if x.get("unhandled"))
    if unhandled:
        print(
            f"  ({unhandled} delayed send(s)/cancel(s) recorded as unhandled: durable timers "
            "are the next issue)"
        )
    print(f"\nreplay: {replay(execution)}")
    print(f"finished: {execution.status}, donedata: {json.dumps(execution.donedata)}")
    return 0


def show(execution: object, title: str) -> None:
    from statecharts.models import Execution

    assert isinstance(execution, Execution)
    print(
        f"\n== {title}\n   execution #{execution.pk} {execution.business_key}: "
        f"{execution.status}, in {', '.join(execution.configuration) or '-'} "
        f"(position {len(bytes(execution.position))} bytes, {execution.steps} step(s))"
    )
