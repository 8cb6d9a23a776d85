"""``manage.py rotate_address EXECUTION [EXECUTION ...] --reason R [--as-user USERNAME]``:
give executions a new Basic HTTP address; every earlier one answers 403 from then on
(``routes.addresses.rotate``, docs/basichttp.md).

EXECUTION is an execution id or a session id. Each is rotated in its own transaction and
recorded in its history with the reason (and the user, with ``--as-user``: who must have
``routes.rotate_address``; without it the operator at the shell is trusted). The new address
is not printed: the chart reads it in ``_ioprocessors``, and host code that hands it out
calls ``routes.addresses.location_of``. Exit 1 when any could not be rotated.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from routes import addresses
from statecharts import stepper
from statecharts.exceptions import InvalidInput
from statecharts.management.statechart.common import find_execution, user_named
from statecharts.policies import attribution


class Command(BaseCommand):
    help = (
        "Give executions a new Basic HTTP address (every earlier one answers 403 from then "
        "on); recorded in their history with --reason."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "executions", nargs="+", metavar="EXECUTION", help="an execution id or session id"
        )
        parser.add_argument("--reason", required=True, help="why (recorded in the history)")
        parser.add_argument("--as-user", help="act as this user (needs routes.rotate_address)")
        parser.add_argument("--caller-context", help="JSON object recorded with the input")

    def handle(self, *args: Any, **options: Any) -> None:
        user = user_named(options["as_user"]) if options.get("as_user") else None
        try:
            reason = stepper.OperatorRequest(
                reason=options["reason"], max_length=addresses.REASON_MAX_LENGTH
            )
            stepper.admit(reason)
        except InvalidInput as exc:
            raise CommandError(f"--{exc}") from None  # ("--reason: ...", the option's name)
        try:
            given = options.get("caller_context")
            asked = stepper.CallerContextRequest(
                door=attribution.Door.COMMAND, given=given, user=user
            )
            context = stepper.admit(asked)
        except InvalidInput as exc:
            raise CommandError(str(exc)) from None
        if user is not None and not addresses.may_rotate(user):
            raise CommandError(
                f"--as-user: {user.get_username()!r} lacks the permission {addresses.PERMISSION}"
            )
        executions = [find_execution(ref) for ref in options["executions"]]
        failed = 0
        for execution in executions:
            try:
                result = addresses.rotate(
                    execution, reason=options["reason"], user=user, caller_context=context
                )
            except addresses.NoAddress as exc:
                failed += 1
                self.stderr.write(f"execution {execution.pk}: not rotated: {exc}")
                continue
            self.stdout.write(
                f"execution {execution.pk}: rotated (step {result.entry.seq}: "
                f"{result.disposition}); every earlier address answers 403"
            )
        if failed:
            raise CommandError(f"{failed} of {len(executions)} not rotated")
