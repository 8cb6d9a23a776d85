"""``statechart deliver [--limit N]``: deliver the outbox messages left pending
(``statecharts.stepper.deliver_pending``).

``statechart deliver --retry [MESSAGE ...] --reason R [--caller-context JSON] [--limit N]``:
deliver undeliverable messages
again (``statecharts.stepper.retry_message``), the admin's "Retry delivering the selected
undeliverable messages" and ``POST /api/outbox/{id}/retry/`` from a shell: those named, or
every undeliverable one (at most ``--limit``), each on its own, with progress on a terminal
and a count per outcome. A named message that is not undeliverable is refused (the refusal
table's one line; the others go on)."""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from typing import Any

from django.core.management.base import CommandError

from statecharts import stepper
from statecharts.exceptions import InvalidInput, StepRefused
from statecharts.management.statechart.common import (
    Console,
    Subcommand,
    act_on_rows,
    caller_options,
    positive_int,
)
from statecharts.models import OutboxMessage
from statecharts.models.outbox import OutboxStatus


class NotUndeliverable(StepRefused):
    """Only an undeliverable message is retried."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=positive_int, help="at most this many (default: a batch)")
    parser.add_argument(
        "--retry",
        nargs="*",
        type=positive_int,
        metavar="MESSAGE",
        help="deliver undeliverable messages again: these (ids), or every undeliverable one",
    )
    parser.add_argument("--reason", help="with --retry: why (recorded in each sender's history)")
    parser.add_argument(
        "--caller-context",
        metavar="JSON",
        help="with --retry: a JSON object recorded with each retry (e.g. a ticket id)",
    )


def handle(console: Console, options: dict[str, Any]) -> None:
    if options.get("retry") is not None:
        reason = options.get("reason")
        if reason is None:
            raise CommandError("--retry needs --reason R (recorded in each sender's history)")
        try:
            stepper.admit(
                stepper.OperatorRequest(
                    reason=reason.strip(), max_length=stepper.OUTBOX_RETRY_REASON_MAX_LENGTH
                )
            )
        except InvalidInput as exc:
            raise CommandError(f"--reason {exc.problems[0].message}") from None
        context = caller_options(options)["caller_context"]
        act = functools.partial(retry_one, reason=reason, caller_context=context)
        retry(console, options["retry"], options["limit"], int(options.get("verbosity", 1)), act)
        return
    if options.get("reason") is not None:
        raise CommandError("--reason goes with --retry")
    delivered = stepper.deliver_pending(limit=options["limit"])
    console.say(f"delivered {delivered} message(s)")


def retry(
    console: Console,
    named: list[int],
    limit: int | None,
    verbosity: int,
    act: Callable[[int], str],
) -> None:
    if named:
        ids = list(dict.fromkeys(named))[:limit]
        found = set(OutboxMessage.objects.filter(pk__in=ids).values_list("pk", flat=True))
        missing = [pk for pk in ids if pk not in found]
        if missing:
            raise CommandError(f"no outbox message {', '.join(map(str, missing[:10]))}")
    else:
        undeliverable = OutboxMessage.objects.undeliverable().order_by("pk")
        ids = list(undeliverable.values_list("pk", flat=True)[:limit])
    if not ids:
        console.say("retry: no undeliverable message")
        return
    stderr = getattr(console, "stderr", console.stdout)
    act_on_rows(
        console.stdout, stderr, ids, act, label="retry", nothing="nothing retried",
        verbosity=verbosity,
    )  # fmt: skip


def retry_one(pk: int, *, reason: str, caller_context: dict[str, Any] | None) -> str:
    """Deliver message ``pk`` again, recorded in its sender's history with ``reason`` and
    ``caller_context``; its status afterwards (``delivered``: the target took it);
    :class:`NotUndeliverable` for a message in another status."""
    status = OutboxMessage.objects.values_list("status", flat=True).get(pk=pk)
    if status != OutboxStatus.UNDELIVERABLE:
        raise NotUndeliverable(f"message {pk} is {status}: only undeliverable messages are retried")
    stepper.retry_message(pk, reason=reason, caller_context=caller_context)
    now: str = OutboxMessage.objects.values_list("status", flat=True).get(pk=pk)
    return now


SUBCOMMAND = Subcommand(
    "deliver",
    "deliver pending outbox messages (or --retry undeliverable ones)",
    add_arguments,
    handle,
)
