"""The OpenAPI 3 document's settings (drf-spectacular), given to the schema view.

Kept here rather than in the project's ``SPECTACULAR_SETTINGS`` so the API describes itself
wherever it is mounted. The command line takes the same dict::

    python manage.py spectacular --custom-settings statecharts.api.schema.SCHEMA_SETTINGS
"""

from __future__ import annotations

from typing import Any

SCHEMA_SETTINGS: dict[str, Any] = {
    "TITLE": "Statecharts API",
    "DESCRIPTION": (
        "Durable W3C SCXML statecharts: load charts, start executions, send them events, "
        "read their history and timers. Every input is one database transaction."
    ),
    "VERSION": "1",
    # Three fields are called "status" with different choices: name each set.
    "ENUM_NAME_OVERRIDES": {
        "ExecutionStatusEnum": "statecharts.models.executions.ExecutionStatus",
        "TimerStatusEnum": "timers.models.TimerStatus",
        "DispositionEnum": "statecharts.models.history.Disposition",
    },
}
