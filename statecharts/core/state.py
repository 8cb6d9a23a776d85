"""The interpreter state: one plain value holding everything needed to resume a chart.

It is JSON-compatible through :meth:`State.to_dict` / :meth:`State.from_dict` (the position
blob of the durable layer wraps this), and never mutated once returned by the interpreter.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any


def positional_constructor(cls: type) -> Callable[..., Any]:
    """A constructor for the frozen slots dataclass ``cls`` taking every field, in order,
    that sets the slots through their descriptors: the same object as ``cls(*values)`` at
    about half the cost of the generated ``__init__`` (which goes through
    ``object.__setattr__`` per field). It runs no ``__post_init__`` and fills no defaults,
    so it is only for hot paths that pass every field already computed."""
    names = [f.name for f in fields(cls)]
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    lines = ["    o = _new(_cls)"]
    for i, name in enumerate(names):
        namespace[f"_set{i}"] = getattr(cls, name).__set__
        lines.append(f"    _set{i}(o, {name})")
    source = f"def make({', '.join(names)}):\n" + "\n".join(lines) + "\n    return o\n"
    exec(source, namespace)  # (fixed text, built from the class's own field names)
    make: Callable[..., Any] = namespace["make"]
    make.__qualname__ = f"positional_constructor({cls.__name__})"
    return make


@dataclass(frozen=True, slots=True)
class Counters:
    # Advances on every <send> that is executed (its expressions evaluated), immediate or
    # delayed, whatever its target: it is the send's ordinal (effects carry it as
    # "send_ordinal"; routes compose their idempotency key from it), and generated send ids
    # are "send_<n>".
    send: int = 0
    invoke: int = 0  # generated invoke ids are "<state id>.<n>" (only those advance it)
    ordinal: int = 0  # advances on every delayed send and every cancel (timer dedup key)
    macrostep: int = 0
    microstep: int = 0
    round: int = 0
    # Advances on every invocation started: its ordinal ("invoke_ordinal"), which, unlike an
    # invoke id (ids can repeat), identifies it within the session.
    invocation: int = 0


@dataclass(frozen=True, slots=True)
class Invocation:
    invokeid: str
    state: int  # index of the invoking state
    invoke: int  # index of the <invoke> in Chart.invokes
    autoforward: bool
    ordinal: int = 0  # Counters.invocation when it was started


@dataclass(frozen=True, slots=True)
class State:
    session_id: str
    name: str | None
    configuration: tuple[int, ...]  # state indexes, document order
    internal_queue: tuple[dict[str, Any], ...]
    history: dict[int, tuple[int, ...]]  # history state index -> remembered states
    datamodel_json: str  # tagged JSON text of the datamodel
    invocations: tuple[Invocation, ...]
    running: bool
    bound: tuple[int, ...]  # late binding: states whose <data> have been bound
    counters: Counters = field(default_factory=Counters)
    parent_session_id: str | None = None  # set when this session was invoked
    invokeid: str | None = None  # the id our parent knows us by
    outcome: str | None = None  # why it stopped: "final", "cancelled", "budget_exhausted"
    # Event I/O processors the host added to _ioprocessors at start (type -> location), e.g.
    # a Basic HTTP URL: an input of the start, kept so every later step sees the same.
    io_processors: dict[str, str] | None = None

    @property
    def datamodel(self) -> dict[str, Any]:
        """The datamodel as a dict (tagged encoding; see docs/embedding.md)."""
        result: dict[str, Any] = json.loads(self.datamodel_json)
        return result

    @property
    def quiescent(self) -> bool:
        return not self.internal_queue

    def to_dict(self) -> dict[str, Any]:
        c = self.counters
        raw: dict[str, Any] = {
            "session_id": self.session_id,
            "name": self.name,
            "configuration": list(self.configuration),
            "internal_queue": list(self.internal_queue),
            "history": {str(k): list(v) for k, v in sorted(self.history.items())},
            "datamodel": self.datamodel,
            "invocations": [
                [i.invokeid, i.state, i.invoke, i.autoforward, i.ordinal]
                for i in self.invocations
            ],
            "running": self.running,
            "bound": list(self.bound),
            "counters": [
                c.send, c.invoke, c.ordinal, c.macrostep, c.microstep, c.round, c.invocation
            ],
            "parent_session_id": self.parent_session_id,
            "invokeid": self.invokeid,
            "outcome": self.outcome,
        }
        if self.io_processors is not None:
            raw["io_processors"] = dict(self.io_processors)
        return raw

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> State:
        return cls(
            session_id=raw["session_id"],
            name=raw.get("name"),
            configuration=tuple(raw["configuration"]),
            internal_queue=tuple(raw["internal_queue"]),
            history={int(k): tuple(v) for k, v in raw["history"].items()},
            datamodel_json=json.dumps(raw["datamodel"], separators=(",", ":"), ensure_ascii=False),
            invocations=tuple(Invocation(*i) for i in raw["invocations"]),
            running=raw["running"],
            bound=tuple(raw["bound"]),
            counters=Counters(*raw["counters"]),
            parent_session_id=raw.get("parent_session_id"),
            invokeid=raw.get("invokeid"),
            outcome=raw.get("outcome"),
            io_processors=dict(raw["io_processors"]) if raw.get("io_processors") else None,
        )

    def evolve(self, **changes: Any) -> State:
        return replace(self, **changes)


new_counters = positional_constructor(Counters)
new_state = positional_constructor(State)
