"""Input rules the API enforces before anything reaches the stepper.

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
``set``) are refused: over HTTP they would let a caller put code into an execution.
"""

from __future__ import annotations

import math
import re
from typing import Any

from rest_framework.exceptions import ValidationError

TAG = "$sc"
MAX_DEPTH = 64
_EVENT_NAME = re.compile(r"\S+")
_BIGINT = re.compile(r"-?[0-9]+")
_NUMBERS = frozenset({"NaN", "Infinity", "-Infinity"})
ACCEPTED_TAGS = ("undefined", "number", "bigint", "date", "object")


def validate_event_name(value: str) -> str:
    """An event name is one token of visible characters: non-empty, no whitespace."""
    if not _EVENT_NAME.fullmatch(value):
        raise ValidationError(
            "An event name must not be empty or contain whitespace (e.g. 'order.paid')."
        )
    return value


def validate_chart_value(value: Any) -> Any:
    """Refuse what the datamodel cannot take: malformed or code-carrying tags, numbers that
    are not finite (``1e999``: send ``{"$sc": "number", "v": "Infinity"}``), deep nesting."""
    problems: list[str] = []
    _check(value, "data", 0, problems)
    if problems:
        raise ValidationError(problems)
    return value


def _check(value: Any, where: str, depth: int, problems: list[str]) -> None:
    if depth > MAX_DEPTH:
        problems.append(f"{where}: nested more than {MAX_DEPTH} levels deep.")
        return
    if isinstance(value, float) and not math.isfinite(value):
        problems.append(
            f'{where}: {value} is not a finite number; send {{"$sc": "number", "v": '
            f'"{"NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")}"}}.'
        )
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check(item, f"{where}[{index}]", depth + 1, problems)
    elif isinstance(value, dict):
        if TAG in value:
            _check_tag(value, where, depth, problems)
            return
        for key, item in value.items():
            _check(item, f"{where}.{key}", depth + 1, problems)


def _check_tag(value: dict[str, Any], where: str, depth: int, problems: list[str]) -> None:
    tag = value[TAG]
    payload = value.get("v")
    if tag == "undefined":
        return
    if tag == "number":
        if payload not in _NUMBERS:
            problems.append(f'{where}: a "number" tag needs "v": "NaN", "Infinity" or "-Infinity".')
    elif tag == "bigint":
        if not isinstance(payload, str) or not _BIGINT.fullmatch(payload):
            problems.append(f'{where}: a "bigint" tag needs "v": a decimal integer string.')
    elif tag == "date":
        if payload is not None and (
            isinstance(payload, bool)
            or not isinstance(payload, int | float)
            or not math.isfinite(payload)
        ):
            problems.append(f'{where}: a "date" tag needs "v": milliseconds since the epoch.')
    elif tag == "object":
        if not isinstance(payload, dict):
            problems.append(f'{where}: an "object" tag needs "v": an object.')
        else:
            for key, item in payload.items():
                _check(item, f"{where}.{key}", depth + 1, problems)
    else:
        problems.append(
            f"{where}: the tag {tag!r} is not accepted here (accepted: "
            f"{', '.join(ACCEPTED_TAGS)}; to send an object with a {TAG!r} key, wrap it: "
            f'{{"$sc": "object", "v": {{...}}}}).'
        )
