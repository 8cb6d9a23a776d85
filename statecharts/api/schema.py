"""The OpenAPI 3 document's settings (drf-spectacular), given to the schema view.

Kept here rather than in the project's ``SPECTACULAR_SETTINGS`` so the API describes itself
wherever it is mounted. The command line takes the same dict::

    python manage.py spectacular --custom-settings statecharts.api.schema.SCHEMA_SETTINGS
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from statecharts import extensions

# Three fields are called "status" with different choices: name each set. Apps that
# contribute endpoints name theirs (statecharts.extensions.Endpoint.enum_names).
OWN_ENUM_NAMES = {
    "ExecutionStatusEnum": "statecharts.models.executions.ExecutionStatus",
    "DispositionEnum": "statecharts.models.history.Disposition",
}


class EnumNames(Mapping[str, str]):
    """``ENUM_NAME_OVERRIDES``: ours, then those of the installed apps' endpoints, read each
    time the schema is generated (so an app that is not installed names nothing)."""

    def _merged(self) -> dict[str, str]:
        merged = dict(OWN_ENUM_NAMES)
        for endpoint in extensions.endpoints:
            merged.update(endpoint.enum_names)
        return merged

    def __getitem__(self, key: str) -> str:
        return self._merged()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._merged())

    def __len__(self) -> int:
        return len(self._merged())


SCHEMA_SETTINGS: dict[str, Any] = {
    "TITLE": "Statecharts API",
    "DESCRIPTION": (
        "Durable W3C SCXML statecharts: load charts, start executions, send them events, "
        "read their history (and what installed apps add, such as timers). Every input is "
        "one database transaction."
    ),
    "VERSION": "1",
    "ENUM_NAME_OVERRIDES": EnumNames(),
}
