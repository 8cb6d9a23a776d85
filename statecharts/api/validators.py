"""Input rules the API enforces before anything reaches the stepper: the project's one
validator (``statecharts.validation``), its refusals turned into DRF's 400 answers.

Values given to a chart (start data, event data) are JSON in the datamodel's *tagged
encoding* (docs/embedding.md, "Values coming from Python"): plain JSON, plus objects with a
``"$sc"`` key for what JSON cannot hold. The API accepts the tags that describe data, each
checked so that a malformed one is a 400 here instead of an error inside the chart:

- ``{"$sc": "undefined"}``
- ``{"$sc": "number", "v": "NaN" | "Infinity" | "-Infinity"}``
- ``{"$sc": "bigint", "v": "<decimal integer>"}``
- ``{"$sc": "date", "v": <milliseconds since the epoch> | null}``
- ``{"$sc": "object", "v": {...}}`` (an object that really has a ``"$sc"`` key)

Tags that carry code or references (``function``, ``regexp``, ``xml``, ``ref``, ``map``,
``set``) are refused: over HTTP they would let a caller put code into an execution. Depth,
size, keys, numbers, surrogates and reserved event names: see ``statecharts.validation``.
"""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ValidationError

from statecharts import validation
from statecharts.validation import ACCEPTED_TAGS, TAG, InvalidInput

__all__ = [
    "ACCEPTED_TAGS",
    "TAG",
    "refusal",
    "validate_chart_value",
    "validate_event_name",
]


def refusal(error: InvalidInput, *, field: str | None = None) -> ValidationError:
    """A 400 listing ``error``'s problems: under ``field``, or by the field each names."""
    if field is not None:
        return ValidationError([str(problem) for problem in error.problems])
    return ValidationError(error.by_field())


def validate_event_name(value: str) -> str:
    """An event name from outside: one token of visible characters, not a reserved one.
    (Its length is the serializer field's ``max_length``: one message for one problem.)"""
    if len(value) > validation.EVENT_NAME_MAX_LENGTH:
        return value
    try:
        return validation.event_name(value)
    except InvalidInput as exc:
        raise ValidationError([problem.message for problem in exc.problems]) from None


def validate_chart_value(value: Any, where: str = "data") -> Any:
    """Refuse what the datamodel must not take: malformed or code-carrying tags, numbers that
    are not finite (``1e999``: send ``{"$sc": "number", "v": "Infinity"}``), deep nesting."""
    try:
        return validation.chart_value(value, where)
    except InvalidInput as exc:
        raise refusal(exc, field=where) from None
