"""What the ``statechart`` subcommands share: the subcommand record, lookups answered as a
``CommandError``, ``--as-user``, the JSON options (``--data``, ``--caller-context``) and the
one answer to a refusal (``statecharts.policies.refusals``: one line naming the option).

Plain functions: the tests and other apps' commands (``rotate_address``) call them too.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from django.core.management.base import CommandError, OutputWrapper

from statecharts import stepper
from statecharts.exceptions import InvalidInput
from statecharts.management.statechart.progress import Progress
from statecharts.models import Chart, Execution
from statecharts.operations.inspection import Unreadable
from statecharts.policies import attribution, lookups, refusals


class Console(Protocol):
    """Where a subcommand prints: the command's ``stdout`` (``write``, ``flush``,
    ``isatty``) and ``say`` (one line)."""

    stdout: OutputWrapper

    def say(self, line: str = "") -> None: ...


@dataclass(frozen=True)
class Subcommand:
    """One ``statechart`` subcommand: its name and help line, the function adding its
    arguments to its parser, and its handler (the parsed options in, output and
    ``CommandError`` out)."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    handle: Callable[[Console, dict[str, Any]], None]


# ---- lookups and conversions -----------------------------------------------------------------


def find_execution(ref: str) -> Execution:
    """The execution whose id or session id is ``ref`` (``statecharts.policies.lookups``)."""
    try:
        return lookups.find_execution(ref)
    except lookups.LookupProblem as exc:
        raise CommandError(str(exc)) from None


def find_chart(ref: str) -> Chart:
    """The chart whose id is ``ref``, or the highest version of the charts named ``ref``
    (``statecharts.policies.lookups``: the API's start uses the same rule)."""
    try:
        return lookups.find_chart(ref)
    except lookups.LookupProblem as exc:
        raise CommandError(str(exc)) from None


def user_named(username: str) -> Any:
    """``--as-user``: the active user with that username (``USERNAME_FIELD``)."""
    from django.contrib.auth import get_user_model

    model = get_user_model()
    try:
        user = model._default_manager.get_by_natural_key(username)
    except model.DoesNotExist:
        raise CommandError(f"--as-user: there is no user {username!r}") from None
    if not user.is_active:
        raise CommandError(f"--as-user: user {username!r} is inactive")
    return user


def positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {value!r}")
    return number


def states_text(configuration: Sequence[str] | Unreadable) -> str:
    """A configuration as the subcommands print it."""
    if isinstance(configuration, Unreadable):
        return f"({configuration})"
    return " ".join(configuration) if configuration else "(none)"


# ---- JSON options and refusals ---------------------------------------------------------------


def data_text(text: str | None) -> Any:
    """``--data`` as the stepper's gate takes it (None when the option was not given): it
    reads the text strictly and checks the value; a refusal is one line naming the option
    (:func:`refused`)."""
    return None if text is None else stepper.JSONText(text)


# The options a request's fields come from, as a refusal names them.
OPTIONS = {
    "data": "--data",
    "name": "EVENT",
    "business_key": "--key",
    "caller_context": "--caller-context",
    "idempotency_key": "--idempotency-key",
    "subject": "--subject",
    "metadata": "--metadata",
}


def caller_options(options: dict[str, Any], *, user: Any = None) -> dict[str, Any]:
    """``--caller-context`` and ``--idempotency-key`` as the stepper takes them (a
    ``CommandError`` naming the option when one is refused)."""
    try:
        given = options.get("caller_context")
        asked = stepper.CallerContextRequest(door=attribution.Door.COMMAND, given=given, user=user)
        context = stepper.admit(asked)
    except InvalidInput as exc:
        raise refused("--caller-context", exc) from None
    return {"caller_context": context, "idempotency_key": options.get("idempotency_key")}


def add_caller_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--caller-context",
        metavar="JSON",
        help="a JSON object recorded with the input (e.g. a ticket or trace id)",
    )
    parser.add_argument(
        "--idempotency-key",
        metavar="KEY",
        help="run again with the same key after a lost answer: applied once",
    )


def refused(option: str, error: InvalidInput) -> CommandError:
    """One line: the option and every problem, each with its path."""
    return CommandError(f"{option} is refused: {'; '.join(map(str, error.problems))}")


def step_refused(error: BaseException) -> CommandError:
    """A refusal as a command answers it (``statecharts.policies.refusals``): one line; input
    refused
    names the option each problem came from (``OPTIONS``). Re-raises what no row names."""
    refusal = refusals.refusal(error)
    if refusal is None:
        raise error
    if refusal.problems:
        first = refusal.problems[0]
        option = OPTIONS.get(first.field, first.field)
        if first.message.startswith("not valid JSON: "):
            return CommandError(f"{option} is not valid JSON: {first.message[16:]}")
        shown = "; ".join(str(problem) for problem in refusal.problems)
        return CommandError(f"{option} is refused: {shown}")
    if refusal.reason is refusals.Reason.NOT_PERMITTED:
        return CommandError(f"not permitted: {refusal.detail}")
    return CommandError(refusal.detail)


def operator(options: dict[str, Any], permission: str) -> Any:
    """The user named by ``--as-user`` (None: the operator at the shell is trusted), refused
    when they lack ``permission``."""
    user = user_named(options["as_user"]) if options["as_user"] else None
    if user is not None and not user.has_perm(permission):
        raise CommandError(f"not permitted: {permission} is needed")
    return user


def act_on_rows(
    stdout: OutputWrapper,
    stderr: OutputWrapper,
    ids: Sequence[int],
    act: Callable[[int], str],
    *,
    label: str,
    nothing: str,
    verbosity: int,
) -> None:
    """An operator's action on each row, each its own step (``act(pk)`` returns its outcome),
    with progress on a terminal and a count per outcome at the end. A refused row is reported
    on stderr and the others go on; when one row was named, its refusal is the command's
    error (the refusal table's one line)."""
    outcomes: dict[str, int] = {}
    progress = Progress(stdout, total=len(ids), plain=verbosity >= 2)
    for done, pk in enumerate(ids, 1):
        try:
            outcome = act(pk)
        except Exception as exc:  # the refusal table's one line for each refusal
            answer = step_refused(exc)
            if len(ids) == 1:
                raise answer from None
            outcome = "refused"
            stderr.write(f"{pk}: {answer}")
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        progress.update(done, f"{label} {pk}: {outcome}")
    progress.close()
    said = ", ".join(f"{n} {outcome}" for outcome, n in sorted(outcomes.items()))
    stdout.write(f"{label}: {said or nothing}")
