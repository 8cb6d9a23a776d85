"""``statechart deliver [--limit N]``: deliver the outbox messages left pending
(``statecharts.stepper.deliver_pending``).

``statechart deliver --retry [MESSAGE ...] [--limit N]``: deliver undeliverable messages
again (``statecharts.stepper.retry_message``), the admin's "Retry delivering the selected
undeliverable messages" and ``POST /api/outbox/{id}/retry/`` from a shell: those named, or
every undeliverable one (at most ``--limit``), each on its own, with progress on a terminal
and a count per outcome. A named message that is not undeliverable is refused (the refusal
table's one line; the others go on)."""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import CommandError

from statecharts import stepper
from statecharts.exceptions import StepRefused
from statecharts.management.statechart.common import (
    Console,
    Subcommand,
    act_on_rows,
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


def handle(console: Console, options: dict[str, Any]) -> None:
    if options.get("retry") is not None:
        retry(console, options["retry"], options["limit"], int(options.get("verbosity", 1)))
        return
    delivered = stepper.deliver_pending(limit=options["limit"])
    console.say(f"delivered {delivered} message(s)")


def retry(console: Console, named: list[int], limit: int | None, verbosity: int) -> None:
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
        console.stdout, stderr, ids, retry_one, label="retry", nothing="nothing retried",
        verbosity=verbosity,
    )  # fmt: skip


def retry_one(pk: int) -> str:
    """Deliver message ``pk`` again; its status afterwards (``delivered``: the target took
    it); :class:`NotUndeliverable` for a message in another status."""
    status = OutboxMessage.objects.values_list("status", flat=True).get(pk=pk)
    if status != OutboxStatus.UNDELIVERABLE:
        raise NotUndeliverable(f"message {pk} is {status}: only undeliverable messages are retried")
    stepper.retry_message(pk)
    now: str = OutboxMessage.objects.values_list("status", flat=True).get(pk=pk)
    return now


SUBCOMMAND = Subcommand(
    "deliver",
    "deliver pending outbox messages (or --retry undeliverable ones)",
    add_arguments,
    handle,
)
