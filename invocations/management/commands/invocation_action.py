"""``manage.py invocation_action retry-now|cancel [ID ...] --reason R``: an operator's actions
on invoke handlers' invocations (``invocations.operating``), by id or by a filter
(``--parent``, ``--type``, ``--waiting``), each recorded in the parent's history."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Q

from invocations import operating
from invocations.models import Invocation, InvocationStatus
from statecharts.management.statechart.common import (
    act_on_rows,
    caller_options,
    operator,
    positive_int,
)

ACTIONS = {"retry-now": "retry_now", "cancel": "cancel"}


class Command(BaseCommand):
    help = (
        "Retry waiting handler starts now, or cancel open handler invocations (the parent "
        "told error.communication.invoke.<id>); recorded with --reason in the parent's history."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=sorted(ACTIONS))
        parser.add_argument("ids", nargs="*", type=positive_int, help="invocation ids")
        parser.add_argument("--reason", required=True, help="why (recorded in the history)")
        parser.add_argument("--parent", type=positive_int, help="filter: this execution's")
        parser.add_argument("--type", help="filter: this <invoke type>")
        parser.add_argument(
            "--waiting", action="store_true", help="filter: starts waiting (for a retry)"
        )
        parser.add_argument("--limit", type=positive_int, default=1000, help="at most (1000)")
        parser.add_argument("--as-user", help="act as this user: their permission is checked")
        parser.add_argument("--caller-context", metavar="JSON", help="recorded with it")

    def handle(self, *args: Any, **options: Any) -> None:
        action = ACTIONS[options["action"]]
        user = operator(options, operating.PERMISSIONS[action])
        context = caller_options(options, user=user)["caller_context"]
        ids = list(options["ids"]) or self._select(options)
        act = operating.retry_now if action == "retry_now" else operating.cancel
        act_on_rows(
            self.stdout,
            self.stderr,
            ids,
            lambda pk: act(pk, reason=options["reason"], caller_context=context),
            label=options["action"],
            nothing="no invocations selected",
            verbosity=options["verbosity"],
        )

    def _select(self, options: dict[str, Any]) -> list[int]:
        if not (options["parent"] or options["type"] or options["waiting"]):
            raise CommandError("name the invocations by id, or select them with a filter")
        rows = Invocation.objects.open().exclude(type="scxml")
        if options["parent"]:
            rows = rows.filter(parent_id=options["parent"])
        if options["type"]:
            rows = rows.filter(type=options["type"])
        if options["waiting"]:
            rows = rows.filter(
                Q(status=InvocationStatus.STARTING) | Q(next_attempt_at__isnull=False)
            )
        return list(rows.order_by("id").values_list("pk", flat=True)[: options["limit"]])
