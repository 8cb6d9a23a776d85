"""``statechart deliver [--limit N]``: deliver the outbox messages left pending
(``statecharts.stepper.deliver_pending``)."""

from __future__ import annotations

import argparse
from typing import Any

from statecharts import stepper
from statecharts.management.statechart.common import Console, Subcommand, positive_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=positive_int, help="at most this many (default: a batch)")


def handle(console: Console, options: dict[str, Any]) -> None:
    delivered = stepper.deliver_pending(limit=options["limit"])
    console.say(f"delivered {delivered} message(s)")


SUBCOMMAND = Subcommand("deliver", "deliver pending outbox messages", add_arguments, handle)
