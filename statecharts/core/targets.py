"""Where a ``<send>`` goes, decided by the core while the ``<send>`` executes (spec 6.2.4).

A :class:`Target` is typed data: the kind of destination and the ids it needs. The core
resolves it once; the planner (``statecharts.core.plan``) maps it to an instruction, and no
other code branches on a target kind. Stored forms (timer rows, history) use ``to_dict()``,
which keeps exactly the keys a target of that kind has, so rows written before targets were
typed read back unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class TargetKind(StrEnum):
    SELF = "self"  # no target, or #_scxml_<own session id>: this session's external queue
    INTERNAL = "internal"  # #_internal (only delayed ones become effects)
    SESSION = "session"  # #_scxml_<id> of another reachable session
    PARENT = "parent"  # #_parent, or the parent's #_scxml_<id>
    INVOKE = "invoke"  # #_<invokeid> of an active invocation
    ROUTE = "route"  # a <send type> the host registered (a route), with its own target


# The keys a stored target of each kind carries besides "kind".
_FIELDS: dict[TargetKind, tuple[str, ...]] = {
    TargetKind.SELF: ("session_id",),
    TargetKind.INTERNAL: ("session_id",),
    TargetKind.SESSION: ("session_id",),
    TargetKind.PARENT: ("session_id",),
    TargetKind.INVOKE: ("invokeid",),
    TargetKind.ROUTE: ("route", "type", "address"),
}


class TargetError(ValueError):
    """A stored target that cannot be read back (a damaged or foreign row)."""


@dataclass(frozen=True, slots=True)
class Target:
    kind: TargetKind
    session_id: str | None = None  # self, internal, session, parent
    invokeid: str | None = None  # invoke
    route: str | None = None  # route: the name the host registered it under
    type: str | None = None  # route: the <send type> as the chart gave it
    address: str | None = None  # route: the <send target> as the chart gave it, if any

    def to_dict(self) -> dict[str, Any]:
        raw: dict[str, Any] = {"kind": self.kind.value}
        for name in _FIELDS[self.kind]:
            raw[name] = getattr(self, name)
        return raw

    @classmethod
    def from_dict(cls, raw: object) -> Target:
        """The inverse of ``to_dict``; ``TargetError`` says what is wrong with ``raw``."""
        if isinstance(raw, Target):
            return raw
        if not isinstance(raw, dict):
            raise TargetError(f"a target must be an object, not {type(raw).__name__}")
        try:
            kind = TargetKind(raw.get("kind"))
        except ValueError:
            raise TargetError(f"unknown target kind {raw.get('kind')!r}") from None
        values: dict[str, Any] = {}
        for name in _FIELDS[kind]:
            value = raw.get(name)
            if value is not None and not isinstance(value, str):
                raise TargetError(f"target {name} must be a string")
            values[name] = value
        required = {"route": "route", "invoke": "invokeid"}.get(kind.value, "session_id")
        if not values.get(required):
            raise TargetError(f"a {kind.value} target needs a {required}")
        return cls(kind, **values)
