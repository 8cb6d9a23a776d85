"""Chart versions: the one rule for ordering them, naming the next one, and choosing "latest".

A chart loaded with a name (``<scxml name>`` or an explicit one) always has a version, unique
with its name: the first is ``"1"`` unless one is given. Loading a *different* source under a
name that is already taken is refused unless the caller asks for a new version explicitly
(``Chart.objects.load(..., new_version=True)``; the admin and the API require the permission
``statecharts.add_chart_version`` for it; ``statechart load --new-version``), so nobody takes
over another chart's "latest" by reusing its name. A new version without a version label gets
the next whole number after the latest (``"1.4"`` -> ``"2"``).

**Latest** is the highest version of a name, versions compared as dotted numbers (``"1.10"``
is after ``"1.9"``; a non-numeric part sorts after the numbers). Every door uses it
(``statecharts.policies.lookups.find_chart``: ``statechart start NAME``, the API's start, the
admin's
"other versions" list, the ``migrate`` command's default target).

This module imports no models: the model layer and the lookups both use it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Protocol, TypeVar

VersionKey = tuple[tuple[int, int, str], ...]

FIRST_VERSION = "1"


class Versioned(Protocol):
    @property
    def version(self) -> str: ...


V = TypeVar("V", bound=Versioned)


def version_key(version: str) -> VersionKey:
    """Order versions as dotted numbers: "1.10" is after "1.9"."""
    return tuple(
        (0, int(part), "") if part.isdigit() else (1, 0, part)
        for part in re.findall(r"\d+|\D+", version)
    )


def by_version(charts: Iterable[V]) -> list[V]:
    """``charts`` latest first."""
    return sorted(charts, key=lambda chart: version_key(chart.version), reverse=True)


def next_version(latest: str) -> str | None:
    """The version a new version gets when none is given: the next whole number after the
    leading number of ``latest`` (None when ``latest`` does not start with a number: the
    caller must then say which version it is)."""
    match = re.match(r"\d+", latest)
    if match is None:
        return None
    return str(int(match.group()) + 1)


class VersionError(ValueError):
    """A chart could not be stored under the name and version asked for; nothing was written."""


class NameTaken(VersionError):
    """The name belongs to another chart: loading a different source under it is making a new
    version, which must be asked for (``new_version=True``)."""


class VersionTaken(VersionError):
    """The name already has that version (with another source)."""


class NoNextVersion(VersionError):
    """A new version was asked for without a version label, and the latest one's label does
    not start with a number to count on from."""
