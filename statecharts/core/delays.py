"""Delays: CSS2 time values (``500ms``, ``2s``, ``1.5s``) plus ``m``, ``h`` and ``d``.

The SCXML spec allows only the CSS2 units ``s`` and ``ms``; durable charts routinely wait
minutes, hours or days (``delay="3d"``), so those units are accepted as an extension.
"""

from __future__ import annotations

import re

_DELAY = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|min|h|d)\s*$")
_FACTORS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_delay(text: str) -> int | None:
    """Milliseconds for a delay string, or None when it is malformed. Rounded to the ms."""
    match = _DELAY.match(text)
    if not match:
        return None
    value, unit = match.groups()
    return round(float(value) * _FACTORS[unit])
