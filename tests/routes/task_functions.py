"""Functions the task route tests register in STATECHARTS["TASKS"] (by name)."""

from __future__ import annotations

from typing import Any

CALLS: list[dict[str, Any]] = []


def remember(**data: Any) -> None:
    CALLS.append(data)
