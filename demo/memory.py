"""Run a chart through the core with the in-memory driver and print its trace.

    python -m demo --memory [path/to/chart.scxml]

A virtual clock, so "1 day later" happens instantly; no database.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from statecharts.core import ChartError, Effect
from statecharts.drivers.memory import MemoryDriver, MemorySession

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "examples" / "order.scxml"
DAY_MS = 86_400_000


def describe(effect: Effect) -> str | None:
    data = effect.data
    kind = effect.kind
    if kind == "trace.event_dequeued":
        event = data["event"]
        payload = f" {json.dumps(event['data'])}" if event["data"] is not None else ""
        return f"event    {event['name']}{payload}"
    if kind == "trace.transitions_selected":
        parts = [
            f"{t['source']} -> {', '.join(t['targets']) or '(stays)'}" for t in data["transitions"]
        ]
        return "take     " + "; ".join(parts)
    if kind == "trace.exit_set" and data["states"]:
        return "exit     " + ", ".join(data["states"])
    if kind == "trace.entry_set" and data["states"]:
        return "enter    " + ", ".join(data["states"])
    if kind == "send_delayed":
        return (
            f"schedule {data['event']['name']} in {data['delay_ms'] / DAY_MS:g} day(s) "
            f"(send id {data['send_id']})"
        )
    if kind == "cancel":
        return f"cancel   {data['send_id']}"
    if kind == "log":
        return f"log      {data['label']}: {data['value']}"
    if kind == "done":
        return f"done     final={data['final']} donedata={json.dumps(data['donedata'])}"
    return None


def show(title: str, session: MemorySession, since: int) -> int:
    print(f"\n== {title}")
    for effect in session.effects[since:]:
        line = describe(effect)
        if line:
            print(f"   {line}")
    print(f"   active: {', '.join(sorted(session.atomic_configuration)) or '(none)'}")
    return len(session.effects)


def run(chart_path: str) -> int:
    driver = MemoryDriver(tracing=True)
    try:
        chart = driver.load_file(chart_path)
    except ChartError as exc:
        print(exc, file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"cannot read {chart_path}: {exc.strerror}", file=sys.stderr)
        return 1
    print(
        f"chart {chart.name or Path(chart_path).name} ({len(chart.states) - 1} states, "
        f"datamodel {chart.datamodel}, identity sha256:{chart.source_hash[:12]})"
    )
    session = driver.start(chart)
    seen = show("start", session, 0)
    if chart_path == str(EXAMPLE):
        driver.advance(DAY_MS)
        seen = show("one day later (virtual clock)", session, seen)
        session.send("payment.received", {"amount": 99.5})
        seen = show("payment.received {amount: 99.5}", session, seen)
        session.send("packed")
        seen = show("packed", session, seen)
        session.send("invoice.sent")
        seen = show("invoice.sent", session, seen)
        print(
            f"\nfinished: {session.done}, donedata: {json.dumps(session.donedata)}, "
            f"pending timers: {len(driver.pending_timers())}"
        )
    return 0
