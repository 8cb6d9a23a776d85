"""``manage.py prune_timers``: deprecated alias of ``manage.py statechart prune --only timers``.

It deletes what it always did (settled timers of finished executions, older than ``--days``,
default ``TIMER_RETENTION_DAYS``), through the same batches as ``statechart prune``, and says
that it is deprecated. ``statechart prune`` prunes every app's rows (docs/operations.md).
"""

from __future__ import annotations

from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = (
        "Deprecated: use 'statechart prune --only timers' (or 'statechart prune' for every "
        "app's rows). Deletes fired/cancelled/discarded/failed timers settled more than --days "
        "ago, of executions that have finished. Rows of live executions are always kept."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--days", type=float, default=None, help="retention (default 30)")

    def handle(self, *args: Any, **options: Any) -> None:
        days = options["days"]
        if days is not None and days < 0:
            raise CommandError("--days must not be negative")
        self.stderr.write(
            "prune_timers is deprecated: use 'manage.py statechart prune --only timers' "
            "(or 'statechart prune' for every app's rows; docs/operations.md)"
        )
        extra = [] if days is None else ["--days", f"timers={days:g}"]
        call_command(
            "statechart",
            "prune",
            "--only",
            "timers",
            *extra,
            stdout=self.stdout,
            stderr=self.stderr,
            verbosity=options.get("verbosity", 1),
        )
