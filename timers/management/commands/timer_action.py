"""``manage.py timer_action``: an operator's fire now, cancel or reschedule of pending timers
or waiting route timers (``timers.operating``), by id or by a filter, each row in its own
transaction under its execution's lock, with a reason recorded in each execution's history.

The ``statechart`` command cannot carry it: ``statecharts`` never imports the timers app
(docs/architecture.md), so the timers app has a command of its own, as for ``fire_timers``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.dateparse import parse_datetime

from statecharts.management.statechart.common import (
    act_on_rows,
    caller_options,
    operator,
    positive_int,
)
from timers import operating
from timers.models import RouteTimer, Timer, TimerStatus

ACTIONS = {"fire-now": operating.Action.FIRE_NOW, "cancel": operating.Action.CANCEL,
           "reschedule": operating.Action.RESCHEDULE}  # fmt: skip


class Command(BaseCommand):
    help = (
        "Fire now, cancel or reschedule pending timers (or, with --route, waiting route "
        "timers): the rows named by id, or those a filter selects. Each is one transaction "
        "under its execution's lock, recorded with --reason in the execution's history."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=sorted(ACTIONS))
        parser.add_argument("ids", nargs="*", type=positive_int, help="timer ids")
        parser.add_argument("--reason", required=True, help="why (recorded in the history)")
        parser.add_argument("--due", help="reschedule: the new due time, ISO 8601 with a zone")
        parser.add_argument("--route", action="store_true", help="route timers, not timers")
        parser.add_argument("--execution", type=positive_int, help="filter: this execution's")
        parser.add_argument("--send-id", help="filter: rows of this <send> id")
        parser.add_argument("--due-before", help="filter: due before this ISO 8601 time")
        parser.add_argument(
            "--limit", type=positive_int, default=1000, help="at most this many rows (1000)"
        )
        parser.add_argument("--as-user", help="act as this user: their permission is checked")
        parser.add_argument(
            "--caller-context", metavar="JSON", help="a JSON object recorded with the action"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        action = ACTIONS[options["action"]]
        due = _when(options["due"], "--due") if options["due"] else None
        if action is operating.Action.RESCHEDULE and due is None:
            raise CommandError("reschedule needs --due")
        permissions = operating.ROUTE_PERMISSIONS if options["route"] else operating.PERMISSIONS
        user = operator(options, permissions[action])
        context = caller_options(options, user=user)["caller_context"]
        ids = self._select(options)
        run = _operation(action, route=options["route"])

        def act(pk: int) -> str:
            try:
                return run(pk, due, options["reason"], context)
            except operating.FireFailed as exc:  # rolled back, the timer unchanged
                self.stderr.write(str(exc))
                return "failed"

        act_on_rows(
            self.stdout,
            self.stderr,
            ids,
            act,
            label=options["action"],
            nothing="no rows selected",
            verbosity=options["verbosity"],
        )

    def _select(self, options: dict[str, Any]) -> list[int]:
        """The ids named, or those the filters select (pending timers; waiting route timers)."""
        if options["ids"]:
            return list(options["ids"])
        filters = [options[name] for name in ("execution", "send_id", "due_before")]
        if not any(filters):
            raise CommandError("name the rows by id, or select them with a filter")
        rows = (
            RouteTimer.objects.all()
            if options["route"]
            else Timer.objects.filter(status=TimerStatus.PENDING)
        )
        if options["execution"]:
            rows = rows.filter(execution_id=options["execution"])
        if options["send_id"]:
            rows = rows.filter(send_id=options["send_id"])
        if options["due_before"]:
            rows = rows.filter(due__lt=_when(options["due_before"], "--due-before"))
        return list(rows.order_by("due", "id").values_list("pk", flat=True)[: options["limit"]])


def _when(text: str, option: str) -> datetime:
    try:
        when = parse_datetime(text)
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        raise CommandError(f"{option}: expected an ISO 8601 time with a zone, got {text!r}")
    return when


def _operation(action: operating.Action, *, route: bool) -> Any:
    """(pk, due, reason, context) -> outcome, for the action on timers or route timers."""
    fire, cancel, reschedule = (
        (operating.fire_route_now, operating.cancel_route, operating.reschedule_route)
        if route
        else (operating.fire_now, operating.cancel, operating.reschedule)
    )
    if action is operating.Action.FIRE_NOW:
        return lambda pk, due, reason, context: fire(pk, reason=reason, caller_context=context)
    if action is operating.Action.CANCEL:
        return lambda pk, due, reason, context: cancel(pk, reason=reason, caller_context=context)
    return lambda pk, due, reason, context: reschedule(
        pk, due, reason=reason, caller_context=context
    )
