"""Delays: CSS2 time values (``500ms``, ``2s``, ``1.5s``) plus ``m``, ``h`` and ``d``.

The SCXML spec allows only the CSS2 units ``s`` and ``ms``; durable charts routinely wait
minutes, hours or days (``delay="3d"``), so those units are accepted as an extension.

A delay may be at most :data:`MAX_DELAY_MS` (100 years of 365 days): a durable host turns a
delay into a due date, and a date thousands of years ahead is past what dates can hold (and
never what the chart meant). A static ``delay`` beyond it refuses the chart at load; a
``delayexpr`` beyond it raises ``error.execution`` when the ``<send>`` runs.

A CSS2 time has no spaces (``" 1s"``, ``"1 s"``, ``"1s "`` are not times): a ``delayexpr``
value with one raises ``error.execution``; a static ``delay`` with one is refused at load
(:func:`delay_syntax_problem`), and still read as before (:func:`parse_delay`) when a chart
stored before that check is compiled again.
"""

from __future__ import annotations

import math
import re

_DELAY = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|min|h|d)\s*$")
_STRICT = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s|m|min|h|d)")
_FACTORS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}

MAX_DELAY_DAYS = 36_500
MAX_DELAY_MS = MAX_DELAY_DAYS * _FACTORS["d"]
# A delay text longer than this is refused without parsing its number (a delay within the
# maximum never needs more: "3153600000000ms" is 15 characters).
_MAX_DELAY_TEXT = 64


def _milliseconds(text: str) -> int | str:
    """The delay in milliseconds, or why ``text`` is not a delay this core accepts."""
    if len(text) > _MAX_DELAY_TEXT:
        return f"delay {text[:20]!r}... is too long to be a delay"
    match = _DELAY.match(text)
    if not match:
        return f"malformed delay {text!r} (use e.g. 500ms, 2s, 1.5s, 5m, 3h, 3d)"
    value, unit = match.groups()
    milliseconds = float(value) * _FACTORS[unit]
    if not math.isfinite(milliseconds) or milliseconds > MAX_DELAY_MS:
        return (
            f"delay {text.strip()!r} is longer than the maximum of {MAX_DELAY_DAYS}d "
            f"(100 years)"
        )
    return round(milliseconds)


def parse_delay(text: str) -> int | None:
    """Milliseconds for a delay string (rounded to the ms), or None when it is malformed or
    longer than :data:`MAX_DELAY_MS` (:func:`delay_problem` says which)."""
    result = _milliseconds(text)
    return result if isinstance(result, int) else None


def delay_problem(text: str) -> str | None:
    """Why ``text`` is not an acceptable delay (malformed, or beyond the maximum), or None."""
    result = _milliseconds(text)
    return result if isinstance(result, str) else None


def delay_syntax_problem(text: str) -> str | None:
    """Why ``text``, a delay :func:`parse_delay` reads, is still not a CSS2 time (it has
    spaces), or None."""
    if len(text) > _MAX_DELAY_TEXT or _STRICT.fullmatch(text):
        return None
    return f"delay {text!r} is not a time: a time has no spaces (write {text.replace(' ', '')!r})"


def parse_time(text: str) -> int | None:
    """:func:`parse_delay` for a value computed at run time (``delayexpr``): a CSS2 time
    exactly, no spaces; None when it is not one (:func:`time_problem` says why)."""
    return None if delay_syntax_problem(text) is not None else parse_delay(text)


def time_problem(text: str) -> str | None:
    """Why ``text`` is not a time :func:`parse_time` accepts, or None."""
    return delay_problem(text) or delay_syntax_problem(text)
