"""``manage.py route_delivery mark-delivered|mark-failed [ID ...] --reason R``: record the fate
of route deliveries in doubt after checking their destination (``routes.operating``): nothing
is delivered again. By id, or ``--in-doubt`` (every delivery in doubt, optionally of one
``--route`` or ``--execution``, at most ``--limit``); each in its own transaction, recorded
in its execution's history with the reason (and the user, with ``--as-user``, whose
permission is checked; without it the operator at the shell is trusted)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from routes import operating
from routes.conf import route_settings
from routes.models import RouteDelivery
from statecharts.management.statechart.common import (
    act_on_rows,
    caller_options,
    operator,
    positive_int,
)

ACTIONS = {"mark-delivered": "mark_delivered", "mark-failed": "mark_failed"}


class Command(BaseCommand):
    help = (
        "Record the fate of route deliveries in doubt (delivered or failed) after checking "
        "the destination; nothing is delivered again. Recorded with --reason in the history."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=sorted(ACTIONS))
        parser.add_argument("ids", nargs="*", type=positive_int, help="route delivery ids")
        parser.add_argument("--reason", required=True, help="what you found (recorded)")
        parser.add_argument("--in-doubt", action="store_true", help="every delivery in doubt")
        parser.add_argument("--route", help="with --in-doubt: this route's only")
        parser.add_argument("--execution", type=positive_int, help="with --in-doubt: its only")
        parser.add_argument("--limit", type=positive_int, default=1000, help="at most (1000)")
        parser.add_argument("--as-user", help="act as this user: their permission is checked")
        parser.add_argument("--caller-context", metavar="JSON", help="recorded with it")

    def handle(self, *args: Any, **options: Any) -> None:
        action = ACTIONS[options["action"]]
        user = operator(options, operating.PERMISSIONS[action])
        context = caller_options(options, user=user)["caller_context"]
        ids = list(options["ids"])
        if not ids:
            if not options["in_doubt"]:
                raise CommandError("name the deliveries by id, or select them with --in-doubt")
            rows = RouteDelivery.objects.in_doubt(
                route_settings.now(), route_settings.ROUTE_IN_DOUBT_SECONDS
            )
            if options["route"]:
                rows = rows.filter(route=options["route"])
            if options["execution"]:
                rows = rows.filter(execution_id=options["execution"])
            ids = list(rows.order_by("id").values_list("pk", flat=True)[: options["limit"]])
        act_on_rows(
            self.stdout,
            self.stderr,
            ids,
            lambda pk: operating.mark(
                pk, action, reason=options["reason"], caller_context=context
            ),
            label=options["action"],
            nothing="no deliveries selected",
            verbosity=options["verbosity"],
        )
