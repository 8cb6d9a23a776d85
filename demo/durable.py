"""The example order chart, run durably: every event is a transaction on the database.

One event is sent from a separate process (``manage.py statechart send``), to show that the
execution's position lives in its row, not in the process that started it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import django

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "examples" / "order.scxml"


def database_url() -> str:
    """The URL of the database this process uses, for the child processes."""
    from django.db import connection

    from demo.database import url_for

    return url_for(connection.settings_dict)


def main(chart_path: str | None = None) -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "demo.settings.site")
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return run(Path(chart_path) if chart_path else EXAMPLE)


def run(path: Path, *, remind_after: str = "2s") -> int:
    from django.db import connection

    from statecharts.core import ChartError
    from statecharts.models import Chart, Execution
    from statecharts.operations.replay import replay

    try:
        # The demo's own example: an edited file is its next version.
        chart = Chart.objects.load(path.read_bytes(), name=path.stem, new_version=True)
    except ChartError as exc:
        print(exc, file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"cannot read {path}: {exc.strerror}", file=sys.stderr)
        return 1
    print(f"database {connection.vendor} ({connection.settings_dict['NAME']})")
    print(f"chart #{chart.pk} {chart} sha256:{chart.content_hash[:12]}")
    number = Execution.objects.filter(chart=chart).count() + 1
    if path != EXAMPLE:
        execution = Execution.objects.start(chart, business_key=f"demo-{number}")
        show(execution, "started")
        return 0

    # The example reminds after 1 day; the demo cannot wait that long, so it starts the
    # order with a reminder after a few seconds (the delays are <data>, set at start).
    data = {"remind_after": remind_after, "give_up_after": "1h"}
    execution = Execution.objects.start(chart, business_key=f"demo-{number}", data=data)
    show(execution, f"started with {json.dumps(data)}")
    show_timers(execution)

    env = {**os.environ, "DATABASE_URL": database_url()}
    worker = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "fire_timers", "--loop", "--interval", "0.1"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        print(f"\n== a timer worker (manage.py fire_timers --loop, pid {worker.pid}) is running")
        began = time.monotonic()
        if not wait_for(lambda: reminded(execution), seconds=30):
            print("the worker did not fire the reminder within 30 s", file=sys.stderr)
            return 1
        execution.refresh_from_db()
        show(
            execution,
            f"payment.reminder fired by the worker after {time.monotonic() - began:.1f} s",
        )

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
        child = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True)
        if child.returncode != 0:
            print(child.stderr, file=sys.stderr)
            return 1
        execution.refresh_from_db()
        show(execution, "payment.received {amount: 99.5}, sent by another process")
        show_timers(execution)
        execution.send("packed")
        show(execution, "packed")
        execution.send("invoice.sent")
        show(execution, "invoice.sent")
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=10)
        except subprocess.TimeoutExpired:
            worker.kill()

    print("\nhistory (one row per input, each one transaction):")
    for entry in execution.history.all():
        event = (entry.input.get("event") or {}).get("name", "")
        kinds = sorted({e["kind"] for e in entry.effects if e["kind"] != "datamodel_change"})
        print(
            f"  #{entry.seq} {entry.input['kind']:<6} {event:<17} -> {entry.status_after:<9} "
            f"{', '.join(entry.configuration_after) or '-':<22} effects: {', '.join(kinds) or '-'}"
        )
    print(f"\nreplay: {replay(execution)}")
    print(f"finished: {execution.status}, donedata: {json.dumps(execution.donedata)}")
    return 0


def reminded(execution: object) -> bool:
    from statecharts.models import Execution

    assert isinstance(execution, Execution)
    return execution.history.filter(input__event__name="payment.reminder").exists()


def wait_for(condition: Callable[[], bool], *, seconds: float) -> bool:
    """Wait for another process to do something (here: the timer worker), bounded."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def show_timers(execution: object) -> None:
    from timers.models import Timer

    print("   timers:")
    for timer in Timer.objects.for_execution(execution).order_by("ordinal"):
        print(
            f"     {timer.send_id:<9} {timer.event['name']:<17} due {timer.due:%H:%M:%S} "
            f"{timer.status} {timer.reason}".rstrip()
        )


def show(execution: object, title: str) -> None:
    from statecharts.models import Execution

    assert isinstance(execution, Execution)
    print(
        f"\n== {title}\n   execution #{execution.pk} {execution.business_key}: "
        f"{execution.status}, in {', '.join(execution.configuration) or '-'} "
        f"(position {len(bytes(execution.position))} bytes, {execution.steps} step(s))"
    )
