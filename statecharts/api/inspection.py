"""Reading an execution for display: its datamodel and its active states. Never writes."""

from __future__ import annotations

from typing import Any

from statecharts.core.datamodel import plain
from statecharts.core.errors import StatechartError
from statecharts.core.position import PositionError, decode
from statecharts.models import Execution


def datamodel_of(execution: Execution) -> dict[str, Any] | None:
    """The datamodel of the last committed step as plain values (a lossy, read-only view: see
    docs/embedding.md, "Reading from Python"), or None when the position cannot be read."""
    try:
        state = decode(bytes(execution.position)).state
    except PositionError:
        return None
    values: dict[str, Any] = plain(state.datamodel)
    return values


def active_states_of(execution: Execution) -> list[str]:
    """Every active state id, compound and parallel ancestors included, in document order.

    ``execution.configuration`` keeps the atomic states; a legal configuration is exactly
    those and their ancestors. When the chart cannot be compiled any more (its source was
    edited in place), the atomic states are all there is to show.
    """
    atomic = list(execution.configuration or [])
    try:
        compiled = execution.chart.compiled()
    except (StatechartError, ValueError):
        return atomic
    indexes: set[int] = set()
    for state_id in atomic:
        index = compiled.ids.get(state_id)
        if index is None:
            continue
        indexes.add(index)
        indexes.update(i for i in compiled.states[index].ancestors if i != 0)
    return [compiled.states[i].id for i in sorted(indexes)]
