"""The timers app's rows that the payload codec writes, registered for ``statechart
reencrypt`` (``statecharts.operations.reencryption``): timer events and delayed route sends."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from statecharts.operations import reencryption
from statecharts.policies import codecs
from timers.models import RouteTimer, Timer


def _timer(values: dict[str, Any], convert: Callable[[Any], Any]) -> dict[str, Any]:
    return {"event": codecs.map_event(values["event"], convert)}


def _route_timer(values: dict[str, Any], convert: Callable[[Any], Any]) -> dict[str, Any]:
    message = values["message"]
    if not isinstance(message, dict) or message.get("data") is None:
        return {"message": message}
    return {"message": {**message, "data": convert(message["data"])}}


def register() -> None:
    reencryption.register(
        reencryption.EncodedRows(
            app="timers",
            name="timers",
            description="timer events (every status)",
            model=Timer,
            owner="execution_id",
            fields=("event",),
            convert=_timer,
        )
    )
    reencryption.register(
        reencryption.EncodedRows(
            app="timers",
            name="route_timers",
            description="delayed route sends waiting",
            model=RouteTimer,
            owner="execution_id",
            fields=("message",),
            convert=_route_timer,
        )
    )
