"""``manage.py fire_timers``: fire due timers without django-q2 (cron, tests, debugging)."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from timers import leases
from timers.firing import fire_all_due


class Command(BaseCommand):
    help = (
        "Fire due timers without django-q2 (cron, tests, debugging). With no flag, or --once, "
        "it fires everything due now and exits; --loop keeps polling until interrupted."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        mode = parser.add_mutually_exclusive_group()
        mode.add_argument(
            "--once", action="store_true", help="fire what is due, then exit (the default)"
        )
        mode.add_argument("--loop", action="store_true", help="keep firing until interrupted")
        parser.add_argument(
            "--batch",
            type=int,
            default=None,
            help="timers claimed at a time (default: STATECHARTS['TIMER_BATCH'], 100)",
        )
        parser.add_argument(
            "--interval",
            type=float,
            default=0.2,
            help="seconds between polls with --loop (default: %(default)s)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        batch = options["batch"]
        if batch is not None and batch < 1:
            raise CommandError("--batch must be at least 1")
        if options["interval"] <= 0:
            raise CommandError("--interval must be positive")
        # The heartbeat renews the leases of what this process has claimed while it fires.
        with leases.running():
            if not options["loop"]:
                self.stdout.write(str(fire_all_due(batch=batch)))
                return
            try:
                while True:
                    report = fire_all_due(batch=batch, paced=True)  # (timers.pacing)
                    if report.outcomes:
                        self.stdout.write(str(report))
                    time.sleep(options["interval"])
            except KeyboardInterrupt:
                return
