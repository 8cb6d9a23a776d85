"""What the core may know of its host during one step: the registered types and one question.

Both are passed in per step (never set on a cached interpreter), and both are inputs the core
cannot compute itself, so a durable host records them with each step and replay hands the
recorded ones back:

- :class:`RegisteredTypes`: a snapshot of the ``<send type>`` values the host routes (type ->
  route name), the ``<invoke type>`` values it can start, and whether it keeps delayed sends
  (a timer queue). The core checks sends and invokes against it *while it executes them*
  (spec 4.9 / 6.2.4 / 6.4): an unsupported type is ``error.execution``; a delayed send with no
  timer queue is ``error.communication``; both skip the rest of the block as the spec says.
- ``is_reachable(session_id)``: can ``#_scxml_<id>`` be reached? Answered from the host's
  own records.
- ``check_route(route, type, target)``: may this route take a send to ``target``? A route
  says so while the ``<send>`` executes (spec 6.2.4): :class:`RouteAnswer` ``ok``, ``invalid``
  (an unsupported or malformed target: ``error.execution``) or ``unreachable`` (it cannot be
  dispatched, e.g. Basic HTTP with no target: ``error.communication``). A durable host records
  each answer with the step, so replay gets the same.
- ``output_bytes_spent``: the bytes the effects of the step's earlier calls carried, for the
  step's ``output_bytes`` budget (0 for a step of one call).
- ``clock``: a monotonic clock in seconds, for the step's wall-clock budget
  (``statecharts.core.budget``); without one, the step has no time budget. It never reaches
  the chart: a step cut short by it is rolled back, so nothing of it is recorded but the cut.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from statecharts.core.events import SCXML_PROCESSOR, SCXML_PROCESSOR_SHORT

# <invoke type> values that mean "an SCXML child session" (spec 6.4.1).
SCXML_INVOKE_TYPES = frozenset(
    {"scxml", "http://www.w3.org/TR/scxml/", "http://www.w3.org/TR/scxml"}
)
# <send type> values the core itself handles (the SCXML Event I/O Processor, spec C.1).
SCXML_SEND_TYPES = frozenset({SCXML_PROCESSOR, SCXML_PROCESSOR_SHORT})


def _frozen(mapping: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(sorted(mapping.items())))


@dataclass(frozen=True, slots=True)
class RegisteredTypes:
    """The host's registered send and invoke types, as one immutable, comparable value."""

    send: Mapping[str, str] = field(default_factory=lambda: _frozen({}))  # type -> route
    invoke: frozenset[str] = frozenset()
    timers: bool = True  # the host keeps delayed sends
    route_timers: bool = False  # ... and delayed sends on routes (a route timer queue)

    @classmethod
    def of(
        cls,
        *,
        send: Mapping[str, str] | None = None,
        invoke: Iterable[str] = (),
        timers: bool = True,
        route_timers: bool = False,
    ) -> RegisteredTypes:
        return cls(_frozen(send or {}), frozenset(invoke), timers, route_timers)

    def route_for(self, send_type: str) -> str | None:
        return self.send.get(send_type)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, RegisteredTypes)
            and dict(self.send) == dict(other.send)
            and self.invoke == other.invoke
            and self.timers == other.timers
            and self.route_timers == other.route_timers
        )

    def __hash__(self) -> int:
        return hash((tuple(self.send.items()), self.invoke, self.timers, self.route_timers))

    def to_dict(self) -> dict[str, Any]:
        raw: dict[str, Any] = {
            "send": dict(self.send),
            "invoke": sorted(self.invoke),
            "timers": self.timers,
        }
        if self.route_timers:  # (absent when false: records written before keep their shape)
            raw["route_timers"] = True
        return raw

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> RegisteredTypes:
        return cls.of(
            send=dict(raw.get("send") or {}),
            invoke=raw.get("invoke") or (),
            timers=bool(raw.get("timers", True)),
            route_timers=bool(raw.get("route_timers", False)),
        )


# What an embedder gets unless it says otherwise: SCXML children and delayed sends, no routes
# (the in-memory driver performs both).
IN_MEMORY_TYPES = RegisteredTypes.of(invoke=SCXML_INVOKE_TYPES, timers=True)


def _unreachable(_session_id: str) -> bool:
    return False


class RouteVerdict(StrEnum):
    OK = "ok"
    INVALID = "invalid"  # error.execution: the target is malformed or not supported
    UNREACHABLE = "unreachable"  # error.communication: it cannot be dispatched


@dataclass(frozen=True, slots=True)
class RouteAnswer:
    verdict: RouteVerdict
    reason: str = ""

    def to_text(self) -> str:
        return self.verdict.value if not self.reason else f"{self.verdict.value}: {self.reason}"

    @classmethod
    def from_text(cls, text: str) -> RouteAnswer:
        verdict, _, reason = text.partition(": ")
        return cls(RouteVerdict(verdict), reason)


ROUTE_OK = RouteAnswer(RouteVerdict.OK)


def _any_target(route: str, send_type: str, target: str | None) -> RouteAnswer:
    return ROUTE_OK


@dataclass(frozen=True, slots=True)
class Host:
    """Everything the host tells the core for one step (see the module docstring)."""

    types: RegisteredTypes = IN_MEMORY_TYPES
    is_reachable: Callable[[str], bool] = _unreachable
    clock: Callable[[], float] | None = None
    # When the host's step began, read on ``clock``: the time budget then counts from here in
    # every call of the step (a durable step drains its self-sends with one call each, and
    # the budget bounds them all together). None: each call starts its own budget.
    started: float | None = None
    # What the earlier calls of the host's step carried (bytes of UTF-8 JSON, the
    # ``output_bytes`` budget): the budget then bounds every call of the step together.
    output_bytes_spent: int = 0
    check_route: Callable[[str, str, str | None], RouteAnswer] = _any_target
    # ``_x.chart``, read-only to chart code: the chart row's ``version`` and, for a migrated
    # execution, ``migratedFrom`` (the version it came from) and ``migratedAt`` (ISO 8601),
    # from its ``migrated`` history entry; None: all three null (no chart row). Called only
    # when code of the chart names ``_x`` and its datamodel is built (a host may read rows).
    # Never in the position: given again whenever it is built, so replay gives the same
    # positions.
    chart: Callable[[], Mapping[str, Any]] | None = None


DEFAULT_HOST = Host()
