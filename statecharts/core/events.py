"""SCXML events (spec 5.10.1, the ``_event`` variable) as plain, immutable data."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from statecharts.core.state import positional_constructor

PLATFORM = "platform"
INTERNAL = "internal"
EXTERNAL = "external"

SCXML_PROCESSOR = "http://www.w3.org/TR/scxml/#SCXMLEventProcessor"
SCXML_PROCESSOR_SHORT = "scxml"


@dataclass(frozen=True, slots=True)
class Event:
    name: str
    type: str = EXTERNAL
    data: Any = None
    sendid: str | None = None
    origin: str | None = None
    origintype: str | None = None
    invokeid: str | None = None
    # The event as it arrived from outside, for I/O processors that have one (Basic HTTP:
    # the request body, read by charts as ``_event.raw``); None for every other event.
    raw: str | None = None
    # Parts of ``name`` split on ".", computed once for descriptor matching.
    parts: tuple[str, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.parts:
            object.__setattr__(self, "parts", tuple(self.name.split(".")))

    def to_dict(self) -> dict[str, Any]:
        raw = {
            "name": self.name,
            "type": self.type,
            "data": self.data,
            "sendid": self.sendid,
            "origin": self.origin,
            "origintype": self.origintype,
            "invokeid": self.invokeid,
        }
        if self.raw is not None:  # (absent otherwise: stored events keep their shape)
            raw["raw"] = self.raw
        return raw

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Event:
        return cls(
            name=raw["name"],
            type=raw.get("type", EXTERNAL),
            data=raw.get("data"),
            sendid=raw.get("sendid"),
            origin=raw.get("origin"),
            origintype=raw.get("origintype"),
            invokeid=raw.get("invokeid"),
            raw=raw.get("raw"),
        )


_new_event = positional_constructor(Event)


_EXTERNAL_BY_NAME: dict[str, Event] = {}  # events are immutable: one per name is enough
_EXTERNAL_BY_NAME_SIZE = 1024  # (names come from outside: bounded)


def external_event(name: str, data: Any = None) -> Event:
    """``Event(name, EXTERNAL, data)``, built at about half the cost (a driver's per-event
    path); without data, the same (immutable, equal) event comes back for the same name."""
    if data is None:
        event = _EXTERNAL_BY_NAME.get(name)
        if event is not None:
            return event
    event = _new_event(name, EXTERNAL, data, None, None, None, None, None, tuple(name.split(".")))
    if data is None and type(name) is str:
        if len(_EXTERNAL_BY_NAME) >= _EXTERNAL_BY_NAME_SIZE:
            _EXTERNAL_BY_NAME.clear()
        _EXTERNAL_BY_NAME[name] = event
    return event


def error_data(
    message: str, *, tagname: str, line: int = 0, column: int = 0, reason: str | None = None
) -> dict[str, Any]:
    """The data of an ``error.execution`` / ``error.communication`` the platform raises:
    ``message`` (what it always held), and where: the failing element's ``tagname``, its
    ``line`` and ``column`` (0 when the host cannot tell: a delivery that failed after the
    step that sent it), and the ``reason`` (the message without the where)."""
    return {
        "message": message,
        "tagname": tagname,
        "line": line,
        "column": column,
        "reason": message if reason is None else reason,
    }


def descriptor_matches(descriptor: tuple[str, ...], event_parts: tuple[str, ...]) -> bool:
    """Spec 3.12.1: a descriptor matches if it is a prefix of the event name, token by token.

    ``descriptor`` is pre-split with a trailing ``*`` token removed; ``("*",)`` was turned
    into ``()`` which matches every event.
    """
    n = len(descriptor)
    return n <= len(event_parts) and event_parts[:n] == descriptor


def split_descriptor(text: str) -> tuple[str, ...]:
    """``"a.b.*"``, ``"a.b."`` and ``"a.b"`` become ``("a", "b")``; ``"*"`` becomes ``()``."""
    if text in ("*", ".*"):
        return ()
    parts = [p for p in text.split(".")]
    while parts and parts[-1] in ("*", ""):
        parts.pop()
    return tuple(parts)
