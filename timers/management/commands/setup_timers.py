"""``manage.py setup_timers``: create the django-q2 schedule that keeps a sweeper running."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from timers.dispatch import SCHEDULE_NAME, ensure_schedule, wake


class Command(BaseCommand):
    help = "Create the one django-q2 schedule that fires timers, and start a sweeper now."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--no-wake", action="store_true", help="do not start a sweeper now")

    def handle(self, *args: Any, **options: Any) -> None:
        ensure_schedule()
        self.stdout.write(f"schedule {SCHEDULE_NAME!r} is in place")
        if not options["no_wake"]:
            wake()
            self.stdout.write("a sweeper task was queued")
