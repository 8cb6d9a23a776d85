"""``statechart reencrypt [--only KIND] [--batch N] [--dry-run]``: rewrite stored event data
with the payload codec and key that write now (``statecharts.operations.reencryption``:
after a key rotation, or turning encryption on); rows it cannot read are reported and left."""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import CommandError

from statecharts.management.statechart.common import Console, Subcommand, positive_int
from statecharts.management.statechart.progress import Progress
from statecharts.operations import reencryption


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--only",
        action="append",
        metavar="KIND",
        help="only this kind of row (repeatable): history, outbox, and the apps' "
        "(timers, route_timers, invocations, ...)",
    )
    parser.add_argument(
        "--batch", type=positive_int, help="rows per transaction (default PRUNE_BATCH)"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="count what would change; write nothing"
    )


def handle(console: Console, options: dict[str, Any]) -> None:
    known = reencryption.kind_names()
    unknown = [name for name in options["only"] or [] if name not in known]
    if unknown:
        raise CommandError(
            f"no encoded row kind named {', '.join(map(repr, unknown))} "
            f"(kinds: {', '.join(known)})"
        )
    display = Progress(console.stdout, plain=options.get("verbosity", 1) >= 2)

    def progress(kind: reencryption.KindReport) -> None:
        display.update(
            kind.examined,
            f"{kind.name}: {kind.changed:,} re-encoded, up to id {kind.last}",
        )

    try:
        report = reencryption.reencrypt(
            only=options["only"],
            batch=options["batch"],
            dry_run=options["dry_run"],
            progress=progress,
        )
    except reencryption.ReencryptRefused as exc:
        raise CommandError(str(exc)) from exc
    display.close()
    say_report(console, report)
    skipped = report.skipped
    for row in skipped[:20]:
        console.say(f"  skipped {row}")
    if skipped:
        more = " (the first 20 above)" if len(skipped) > 20 else ""
        raise CommandError(
            f"{len(skipped):,} row(s) could not be read here and were left as they are"
            f"{more}: keep their codec and key deployed, or deal with them first"
        )


def say_report(console: Console, report: reencryption.ReencryptReport) -> None:
    for kind in report.kinds:
        if report.dry_run:
            console.say(
                f"{kind.name}: {kind.examined:,} row(s) examined, {kind.changed:,} would "
                f"be re-encoded, {kind.current:,} already current"
                + (f", {len(kind.skipped):,} cannot be read here" if kind.skipped else "")
            )
        else:
            console.say(str(kind))
    rate = report.rate()
    speed = f" ({rate:,.0f} rows/s)" if rate is not None else ""
    verb = "would be re-encoded" if report.dry_run else "re-encoded"
    console.say(
        f"{report.changed:,} row(s) {verb} with {report.codec!r} of {report.examined:,} "
        f"examined in {report.seconds:.1f} s{speed}"
    )
    if report.dry_run:
        console.say("dry run: nothing was written")


SUBCOMMAND = Subcommand(
    "reencrypt",
    "rewrite stored event data with the payload codec and key that write now",
    add_arguments,
    handle,
)
