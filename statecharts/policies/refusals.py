"""The one refusal table: every refusal a door can meet, and what each door answers for it.

A door (the REST API, the Basic HTTP inbound view, the admin's forms, ``manage.py
statechart``, an invoke handler's answer) builds a request (``statecharts.stepper.requests``)
and hands it to the stepper; what comes back refused is one of the exceptions below. Each row
says, for one refusal:

- ``reason``: one word, the same at every door (``invalid_input``, ``halted``, ...): the API
  and the inbound view put it in their body (``"reason"``), the other doors in their message;
- ``api``: the REST API's HTTP status;
- ``inbound``: the Basic HTTP inbound view's HTTP status (it names no user: ``409`` for every
  refusal of the execution's state, the key reused included; docs/basichttp.md);
- the admin answers with a form error (an error message on the page it returns to), a
  command with a one-line ``CommandError``, a handler's answer with the invocation failed and
  the message recorded as its reason.

=============================  ====================  ===  =======
refusal                        reason                API  inbound
=============================  ====================  ===  =======
``InvalidInput``               invalid_input         400  400
``NotPermitted``               not_permitted         403  403
``BusinessKeyInUse``           business_key_in_use   409  409
``IdempotencyConflict``        idempotency_conflict  422  409
``NeedsMigration``             needs_migration       409  409
``NeedsRepair``                needs_repair          409  409
``Halted``                     halted                409  409
``EventUnhandled``             unhandled             409  409
``StartRefused``               start_refused         409  409
``StepRefused`` (any other)    refused               409  409
(input discarded: finished)    finished              409  409
any other ``StatechartError``  unusable              409  409
``Execution.DoesNotExist``     not_found             404  404
=============================  ====================  ===  =======

A door that meets an exception no row names lets it through (a bug: a 500 with a traceback
in the logs). Every message is made printable (``statecharts.exceptions.printable``) before a
door sends it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from django.core.exceptions import ObjectDoesNotExist

from statecharts.core.errors import StatechartError
from statecharts.exceptions import (
    BusinessKeyInUse,
    EventUnhandled,
    Halted,
    IdempotencyConflict,
    InputProblem,
    InvalidInput,
    NeedsMigration,
    NeedsRepair,
    StartRefused,
    StepRefused,
    printable,
)
from statecharts.policies.authorization import NotPermitted


class Reason(StrEnum):
    """The one word a refusal is known by at every door (a ``str``: bodies carry it as is)."""

    INVALID_INPUT = "invalid_input"
    NOT_PERMITTED = "not_permitted"
    BUSINESS_KEY_IN_USE = "business_key_in_use"
    IDEMPOTENCY_CONFLICT = "idempotency_conflict"
    NEEDS_MIGRATION = "needs_migration"
    NEEDS_REPAIR = "needs_repair"
    HALTED = "halted"
    UNHANDLED = "unhandled"
    START_REFUSED = "start_refused"
    REFUSED = "refused"
    FINISHED = "finished"
    UNUSABLE = "unusable"
    NOT_FOUND = "not_found"


@dataclass(frozen=True, slots=True)
class Row:
    """One refusal and its answer at each door (module doc)."""

    error: type[BaseException] | None  # None: not an exception (an input discarded)
    reason: Reason
    api: int
    inbound: int
    meaning: str


# Subclasses before the classes they extend: the first row an exception is an instance of wins.
TABLE: tuple[Row, ...] = (
    Row(InvalidInput, Reason.INVALID_INPUT, 400, 400, "data from outside was refused"),
    Row(NotPermitted, Reason.NOT_PERMITTED, 403, 403, "the caller may not do this"),
    Row(BusinessKeyInUse, Reason.BUSINESS_KEY_IN_USE, 409, 409, "the business key is in use"),
    Row(IdempotencyConflict, Reason.IDEMPOTENCY_CONFLICT, 422, 409,
        "the idempotency key was used for another request"),
    Row(NeedsMigration, Reason.NEEDS_MIGRATION, 409, 409, "the execution needs migration"),
    Row(NeedsRepair, Reason.NEEDS_REPAIR, 409, 409, "the execution needs repair"),
    Row(Halted, Reason.HALTED, 409, 409, "the execution is halted"),
    Row(EventUnhandled, Reason.UNHANDLED, 409, 409,
        "strict: no transition takes the event (nothing kept)"),
    Row(StartRefused, Reason.START_REFUSED, 409, 409, "the chart could not start"),
    Row(StepRefused, Reason.REFUSED, 409, 409, "the execution refused the input"),
    Row(None, Reason.FINISHED, 409, 409, "the execution has finished: the input was discarded"),
    Row(StatechartError, Reason.UNUSABLE, 409, 409, "the chart or the execution cannot be used"),
    Row(ObjectDoesNotExist, Reason.NOT_FOUND, 404, 404, "the execution no longer exists"),
)  # fmt: skip
BY_REASON = {row.reason: row for row in TABLE}
REASONS = tuple(BY_REASON)


@dataclass(frozen=True, slots=True)
class Refusal:
    """One refusal as every door words it: its row, a printable one-line ``detail``, the
    input problems (``InvalidInput``) or permission reasons, and the execution's status when
    the door knows it."""

    row: Row
    detail: str
    problems: tuple[InputProblem, ...] = ()
    reasons: tuple[str, ...] = ()
    status: str = ""
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def reason(self) -> Reason:
        return self.row.reason

    def by_field(self) -> dict[str, list[str]]:
        """The input problems grouped by top-level field (the API's and forms' 400 body)."""
        fields: dict[str, list[str]] = {}
        for problem in self.problems:
            fields.setdefault(problem.field, []).append(str(problem))
        return fields

    def lines(self) -> list[str]:
        """Each problem or reason on its own (the inbound view's ``reasons``)."""
        if self.problems:
            return [str(problem) for problem in self.problems]
        return list(self.reasons)

    def message(self, doing: str | None = None) -> str:
        """One printable line: ``"Not sent: ..."`` with ``doing="Not sent"``."""
        return f"{doing}: {self.detail}" if doing else self.detail

    def body(self) -> dict[str, object]:
        """The HTTP body of a refusal that is not a 400 (``detail``, ``reason``, ...)."""
        body: dict[str, object] = {"detail": self.detail, "reason": self.reason}
        if self.reasons:
            body["reasons"] = list(self.reasons)
        if self.status:
            body["status"] = self.status
        return {**body, **self.extra}


def row_of(error: BaseException) -> Row | None:
    """The row an exception is refused by, or None (not a refusal: let it through)."""
    for row in TABLE:
        if row.error is not None and isinstance(error, row.error):
            return row
    return None


def refusal(error: BaseException, *, status: str = "") -> Refusal | None:
    """``error`` as a :class:`Refusal`, or None when no row names it."""
    row = row_of(error)
    if row is None:
        return None
    problems: Sequence[InputProblem] = ()
    reasons: Sequence[str] = ()
    if isinstance(error, InvalidInput):
        problems = error.problems
    elif isinstance(error, NotPermitted):
        reasons = tuple(printable(reason) for reason in error.decision.reasons)
    if isinstance(error, ObjectDoesNotExist):
        detail = row.meaning
    else:
        detail = printable(str(error)) or row.meaning
    return Refusal(row, detail, tuple(problems), tuple(reasons), status)


def discarded(detail: str, status: str) -> Refusal:
    """An input a finished execution discarded (recorded in its history; not an exception)."""
    return Refusal(BY_REASON[Reason.FINISHED], printable(detail), status=status)


__all__ = [
    "BY_REASON",
    "REASONS",
    "TABLE",
    "Reason",
    "Refusal",
    "Row",
    "discarded",
    "refusal",
    "row_of",
]
