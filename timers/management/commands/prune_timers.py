"""``manage.py prune_timers``: delete old settled timers of finished executions."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from timers.pruning import prune


class Command(BaseCommand):
    help = (
        "Delete fired/cancelled/discarded/failed timers settled more than --days ago, of "
        "executions that have finished. Rows of live executions are always kept."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--days", type=float, default=None, help="retention (default 30)")

    def handle(self, *args: Any, **options: Any) -> None:
        days = options["days"]
        if days is not None and days < 0:
            raise CommandError("--days must not be negative")
        retention = timedelta(days=days) if days is not None else None
        self.stdout.write(f"deleted {prune(retention=retention)} timer row(s)")
