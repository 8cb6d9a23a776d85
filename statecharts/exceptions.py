"""Errors the Django layer raises on purpose (the core's are in statecharts.core.errors).

The refusals a door can meet: :class:`InvalidInput` (data from outside refused before anything
is written) and the :class:`StepRefused` family (the execution's state refuses the input).
``statecharts.policies.refusals`` maps each to every door's error format (HTTP status and body, a
form error, a one-line ``CommandError``, a handler's recorded answer).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from statecharts.core.errors import StatechartError


class StepRefused(StatechartError):
    """The stepper would not apply an input; nothing about the execution changed except the
    history row recording the refusal (and, for a chart mismatch, the status)."""


class NeedsMigration(StepRefused):
    """The execution's position does not belong to its chart's current source: a person has
    to migrate it. Its status is ``needs_migration`` and inputs are refused until then."""


class Halted(StepRefused):
    """The execution is halted: a step went over a budget and was rolled back. Inputs are
    refused until it is cancelled (or migrated); ``failure_reason`` says which budget."""


class EventUnhandled(StepRefused):
    """Strict mode (``EventRequest.strict``, the ``STRICT_EVENTS`` setting): no transition
    was selected for the event, so the whole step was rolled back and the input recorded as
    refused (docs/durable-executions.md, "Events no transition takes")."""


class NeedsRepair(StepRefused):
    """The execution's stored data cannot be stepped (a position or datamodel that cannot be
    read back). Inputs are refused until someone repairs it or cancels it."""


class StartRefused(StepRefused):
    """A start that could not produce a first configuration within the step budgets: nothing
    was written."""


class BusinessKeyInUse(StepRefused):
    """Another execution of this chart already has this business key."""


class IdempotencyConflict(StepRefused):
    """An input arrived again with the idempotency key of an earlier one, but with different
    content: nothing was applied (a client bug, or a key reused for another request)."""


_UNPRINTABLE = re.compile("[\ud800-\udfff\x00]")


def printable(text: str) -> str:
    """``text`` with what no door can render (a lone UTF-16 surrogate, NUL) spelled as an
    escape (``\\ud800``): an error message quoting input never fails to be sent."""
    if text.isascii() and "\x00" not in text:
        return text
    return _UNPRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


@dataclass(frozen=True, slots=True)
class InputProblem:
    """One thing wrong with a value from outside: where (``data.items[2]``) and why."""

    path: str
    message: str

    def __post_init__(self) -> None:
        # A message may quote the input (a key, a name): it is made printable here, once, so
        # that no door can fail rendering it (a lone surrogate cannot be encoded as UTF-8).
        object.__setattr__(self, "path", printable(self.path))
        object.__setattr__(self, "message", printable(self.message))

    @property
    def field(self) -> str:
        """The top-level name the path starts with (``data`` for ``data.items[2]``)."""
        return re.split(r"[.\[]", self.path, maxsplit=1)[0]

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class InvalidInput(StatechartError, ValueError):
    """Data from outside was refused before anything was written.

    A ``ValueError`` (what Python callers expect of a bad argument) and a ``StatechartError``
    (what the doors already turn into a clear message). ``problems`` lists every problem found
    (at most :data:`MAX_PROBLEMS`), each naming its path.
    """

    def __init__(self, problems: Sequence[InputProblem]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(str(problem) for problem in self.problems))

    @classmethod
    def at(cls, path: str, message: str) -> InvalidInput:
        return cls([InputProblem(path, message)])

    def by_field(self) -> dict[str, list[str]]:
        """The problems grouped by top-level field, as a form or an API answer lists them."""
        fields: dict[str, list[str]] = {}
        for problem in self.problems:
            fields.setdefault(problem.field, []).append(str(problem))
        return fields


__all__ = [
    "BusinessKeyInUse",
    "Halted",
    "IdempotencyConflict",
    "InputProblem",
    "InvalidInput",
    "NeedsMigration",
    "NeedsRepair",
    "StartRefused",
    "StepRefused",
    "printable",
]
