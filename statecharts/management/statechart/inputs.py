"""``statechart start``, ``send`` and ``cancel``: each builds a request and hands it to
``statecharts.stepper.submit`` (the gate checks it, the user's permission with
``--as-user``); a refusal is answered from the refusal table (``common.step_refused``).

All three take ``--caller-context JSON`` (recorded with the input:
``statecharts.policies.attribution``) and ``--idempotency-key KEY`` (run it again with the
same key after a lost answer and nothing is applied twice:
``statecharts.policies.idempotency``).
"""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import CommandError

from statecharts import stepper
from statecharts.exceptions import InvalidInput
from statecharts.management.statechart.common import (
    Console,
    Subcommand,
    add_caller_options,
    caller_options,
    data_text,
    find_chart,
    find_execution,
    states_text,
    step_refused,
    user_named,
)
from statecharts.models import Execution, ExecutionStatus
from statecharts.operations.inspection import json_text
from statecharts.policies import subjects


def event_name(value: str) -> str:
    """EVENT as given (control characters, reserved names: the stepper's gate refuses)."""
    if not value or any(ch.isspace() for ch in value):
        raise CommandError(f"{value!r} is not an event name (it must be non-empty, no spaces)")
    return value


def say_result(console: Console, result: stepper.StepResult) -> None:
    execution = result.execution
    if result.repeated:
        console.say(
            f"note: this idempotency key was used by step {result.entry.seq}; "
            "nothing was applied again"
        )
    console.say(f"execution: {execution.pk}")
    console.say(f"disposition: {result.disposition}")
    if result.applied and not result.handled:  # (consumed: no transition took it)
        console.say("note: no transition took the event (consumed; --strict refuses it)")
    say_state(console, execution)
    if not result.applied:
        console.say(f"note: the input was not applied: the execution is {execution.status}")


def say_state(console: Console, execution: Execution) -> None:
    console.say(f"status: {execution.status}")
    console.say(f"configuration: {states_text(execution.configuration)}")
    if execution.status == ExecutionStatus.COMPLETED:
        console.say(f"donedata: {json_text(execution.donedata)}")
    if execution.failure_reason:
        console.say(f"reason: {execution.failure_reason}")


# ---- start -----------------------------------------------------------------------------------


def add_start_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "chart", help="a chart id, a chart name (its latest version) or NAME@VERSION"
    )
    parser.add_argument("--data", help="a JSON object: values for top-level <data> ids")
    parser.add_argument("--key", help="a business key, unique per chart")
    parser.add_argument(
        "--subject",
        metavar="APP_LABEL.MODEL:ID",
        help="the object it is about (a model of STATECHARTS['SUBJECT_MODELS'])",
    )
    parser.add_argument(
        "--as-user",
        metavar="USERNAME",
        help="start as this user: statecharts.add_execution and "
        "STATECHARTS['START_PERMISSIONS'] are checked and the user is recorded (without "
        "it the command is trusted and nothing is checked)",
    )
    add_caller_options(parser)


def start(console: Console, options: dict[str, Any]) -> None:
    data = data_text(options["data"])
    caller = caller_options(options)
    chart = find_chart(options["chart"])
    subject = None
    if options.get("subject"):
        try:
            subject = subjects.resolve(*subjects.parse_reference(options["subject"]))
        except InvalidInput as exc:
            raise CommandError(f"--subject: {exc}") from None
    user = user_named(options["as_user"]) if options.get("as_user") else None
    request = stepper.StartRequest(
        chart=chart,
        data=data,
        business_key=options["key"],
        subject=subject,
        user=user,
        **caller,
    )
    try:
        result = stepper.submit(request)
    except Exception as exc:  # the refusal table says what each refusal answers
        raise step_refused(exc) from None
    execution = result.execution
    if result.repeated:
        console.say("note: this idempotency key started it before; nothing was started")
    console.say(f"execution: {execution.pk}")
    console.say(f"session: {execution.session_id}")
    console.say(f"chart: {chart.pk} ({chart})")
    say_state(console, execution)


# ---- send ------------------------------------------------------------------------------------


def add_send_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("execution", help="an execution id or session id")
    parser.add_argument("event", help="the event name")
    parser.add_argument("--data", help="the event data, as JSON")
    parser.add_argument(
        "--as-user",
        metavar="USERNAME",
        help="send as this user: STATECHARTS['EVENT_PERMISSIONS'] are checked and the "
        "user is recorded (without it the command is trusted and nothing is checked)",
    )
    parser.add_argument(
        "--strict",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="refuse the event (exit status 1, nothing applied, the refusal recorded) when no "
        "transition takes it; --no-strict consumes it; default: STATECHARTS['STRICT_EVENTS']",
    )
    add_caller_options(parser)


def send(console: Console, options: dict[str, Any]) -> None:
    name = event_name(options["event"])
    data = data_text(options["data"])
    caller = caller_options(options)
    execution = find_execution(options["execution"])
    user = user_named(options["as_user"]) if options.get("as_user") else None
    request = stepper.EventRequest(
        execution=execution, name=name, data=data, user=user, strict=options["strict"], **caller
    )
    try:
        result = stepper.submit(request)
    except Exception as exc:  # the refusal table (NeedsMigration: recorded in the history)
        raise step_refused(exc) from None
    say_result(console, result)


# ---- cancel ----------------------------------------------------------------------------------


def add_cancel_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("execution", help="an execution id or session id")
    parser.add_argument(
        "--as-user",
        metavar="USERNAME",
        help="cancel as this user: statecharts.change_execution and "
        "STATECHARTS['CANCEL_PERMISSIONS'] are checked and the user is recorded (without "
        "it the command is trusted and nothing is checked)",
    )
    add_caller_options(parser)


def cancel(console: Console, options: dict[str, Any]) -> None:
    caller = caller_options(options)
    execution = find_execution(options["execution"])
    user = user_named(options["as_user"]) if options.get("as_user") else None
    request = stepper.CancelRequest(execution=execution, user=user, **caller)
    try:
        result = stepper.submit(request)
    except Exception as exc:  # the refusal table says what each refusal answers
        raise step_refused(exc) from None
    say_result(console, result)


START = Subcommand("start", "start an execution of a chart", add_start_arguments, start)
SEND = Subcommand("send", "feed one external event to an execution", add_send_arguments, send)
CANCEL = Subcommand("cancel", "cancel an execution", add_cancel_arguments, cancel)
