"""``statechart show EXECUTION [--json]``: the read model (``statecharts.operations.
inspection``, as the admin and the API show it): status, states, datamodel, what it can do
now, timers (and other apps' sections), history."""

from __future__ import annotations

import argparse
import json
from typing import Any

from statecharts.management.statechart.common import (
    Console,
    Subcommand,
    find_execution,
    states_text,
)
from statecharts.models import Execution
from statecharts.operations.inspection import ExecutionView, Unreadable, inspect, json_text
from statecharts.policies import subjects
from statecharts.policies.availability import Unavailable, as_json, available_events


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("execution", help="an execution id or session id")
    parser.add_argument(
        "--json", dest="as_json", action="store_true", help="print one JSON document"
    )


def show(console: Console, options: dict[str, Any]) -> None:
    execution = find_execution(options["execution"])
    view = inspect(execution)  # the read model the admin and the API show
    if options["as_json"]:
        say_document(console, execution, view)
    else:
        say_view(console, execution, view)


def say_document(console: Console, execution: Execution, view: ExecutionView) -> None:
    document = view.document()
    document["subject"] = subjects.describe(execution)
    try:
        document["available_events"] = [
            as_json(event) for event in available_events(execution)
        ]
    except Unavailable:
        document["available_events"] = []  # ("unreadable" says why)
    console.say(json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False))


def say_view(console: Console, execution: Execution, view: ExecutionView) -> None:
    chart = execution.chart
    console.say(f"execution: {execution.pk}")
    console.say(f"title: {view.title}")
    console.say(f"session: {execution.session_id}")
    console.say(f"chart: {chart.pk} ({chart}) sha256 {chart.content_hash}")
    console.say(f"status: {view.status}")
    if view.outcome:
        console.say(f"outcome: {view.outcome}")
    if view.failure_reason:
        console.say(f"reason: {view.failure_reason}")
    if execution.business_key is not None:
        console.say(f"business key: {execution.business_key}")
    console.say(f"configuration: {states_text(view.atomic_states)}")
    console.say(f"active states: {states_text(view.active_states)}")
    console.say(f"donedata: {json_text(view.donedata)}")
    if isinstance(view.datamodel, Unreadable):
        console.say(f"datamodel: ({view.datamodel})")
    else:
        console.say(f"datamodel: {json_text(view.datamodel)}")
    console.say(f"steps: {execution.steps}")
    subject = subjects.describe(execution)
    if subject is not None:
        console.say(f"about: {subject['type']} {subject['id']} ({subject['title'] or 'deleted'})")
    console.say(f"can do now: {can_do(execution)}")
    for part, reason in view.unreadable.items():
        console.say(f"unreadable {part}: {reason}")
    for line in view.section_lines():
        console.say(line)
    say_history(console, view)


def say_history(console: Console, view: ExecutionView) -> None:
    console.say("history:")
    for row in view.history():
        line = (
            f"  #{row.seq} {row.input}: {row.disposition} -> "
            f"{row.status_after} [{states_text(row.configuration_after)}]"
        )
        if row.caller:
            line += f"; {row.caller}"
        if row.cause is not None:
            line += f" (caused by {row.cause.text})"
        console.say(line)
        for effect in row.effects:  # what went wrong inside the chart, and where
            if effect.text.startswith("error."):
                console.say(f"      {effect.text}")


def can_do(execution: Execution) -> str:
    """The available events, as ``statechart show`` prints them."""
    try:
        events = available_events(execution)
    except Unavailable as exc:
        return f"(unreadable: {exc})"
    shown = [
        event.name if event.enabled else f"{event.name} ({event.availability.value})"
        for event in events
    ]
    return ", ".join(shown) or "nothing"


SUBCOMMAND = Subcommand("show", "an execution's state and history", add_arguments, show)
