"""The position blob: a versioned, self-describing encoding of where an execution is.

A durable host stores one blob per execution and hands it back on the next step. The blob is
compact UTF-8 JSON (never pickle: decoding runs no code) of this shape::

    {"format": "scxml-position", "version": 3,
     "chart": {"sha256": "...", "name": "order", "version": "3"},
     "state": {...}}                       # State.to_dict(), see below

Version 3 writes the state's fields as version 2 did (``State.to_dict``), but leaves out those
that hold their default (an empty internal queue, which a blob always has; no history, no
invocations, no parent, no outcome) and puts the fields a step changes last, in the order
they change least to most: ``datamodel``, ``configuration``, ``counters`` (one advances at
every step). A database that logs an updated row as what changed after the bytes it shares
with the old one (PostgreSQL's WAL for an update that stays on its page) logs only that
tail. Blobs of versions 1 and 2 still decode; :func:`encode` can still write version 2
(``version=2``), which replay uses to check history recorded before version 3.

Decoding refuses, with a typed error for each case, anything it cannot resume safely: bytes
that are not a position blob, a format version it does not know, a blob written for another
chart, a state caught between two microsteps (internal queue not empty) and, when asked to
advance it, a state that is no longer running.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from statecharts.core.datamodel.base import MAX_VALUE_DEPTH
from statecharts.core.errors import StatechartError
from statecharts.core.model import Chart
from statecharts.core.state import State

FORMAT = "scxml-position"
VERSION = 3
# The versions encode can write (replay re-encodes a recorded step as it was written).
WRITABLE_VERSIONS = (2, 3)


class PositionError(StatechartError):
    """A position blob was refused. Subclasses say why; none of them changes anything."""


class NotAPositionError(PositionError):
    """The bytes are not a position blob (not JSON, wrong marker, or a malformed state)."""


class UnsupportedVersionError(PositionError):
    """The blob was written in a format version this code does not read (a newer release)."""

    def __init__(self, version: object) -> None:
        self.version = version
        super().__init__(
            f"position format version {version!r} is not supported "
            f"(this release reads versions 1..{VERSION})"
        )


class ChartMismatchError(PositionError):
    """The blob belongs to another chart (or to an earlier source of this one)."""

    def __init__(self, expected: str, found: str) -> None:
        self.expected = expected
        self.found = found
        super().__init__(
            f"position was written for chart sha256 {found[:12]}..., "
            f"but the chart given has sha256 {expected[:12]}..."
        )


class NotQuiescentError(PositionError):
    """The state has internal events pending: it was captured mid-macrostep."""


class NotRunningPositionError(PositionError):
    """The state has stopped (final state reached, cancelled or failed): it cannot advance."""


class DamagedDatamodelError(PositionError):
    """The datamodel snapshot a state carries cannot be restored (a value the datamodel
    cannot read back, nesting past the bound): the state cannot be resumed, so the step is
    refused before anything ran. Raised by the interpreter's entry points (when they rebuild
    the datamodel from the state), not by :func:`decode`, which does not run the datamodel.
    A host turns it into a visible "needs repair" status, as any other PositionError."""


@dataclass(frozen=True, slots=True)
class ChartIdentity:
    sha256: str
    name: str | None = None
    version: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"sha256": self.sha256, "name": self.name, "version": self.version}


@dataclass(frozen=True, slots=True)
class Position:
    chart: ChartIdentity
    state: State


def _upgrade_from_1(payload: dict[str, Any]) -> dict[str, Any]:
    """Version 2 added the invocation counter (a 7th counter) and each invocation's ordinal (a
    5th field). A version-1 state had neither: both start at zero, which keeps every existing
    counter (and so every timer dedup key and recorded history) exactly as it was."""
    state = payload.get("state")
    if isinstance(state, dict):
        state = dict(state)
        counters = state.get("counters")
        if isinstance(counters, list) and len(counters) == 6:
            state["counters"] = [*counters, 0]
        invocations = state.get("invocations")
        if isinstance(invocations, list):
            state["invocations"] = [
                [*i, 0] if isinstance(i, list) and len(i) == 4 else i for i in invocations
            ]
        payload = {**payload, "state": state}
    return payload


def _upgrade_from_2(payload: dict[str, Any]) -> dict[str, Any]:
    """Version 3 only writes less (defaults left out, fields reordered): a version-2 state,
    which has every field, is a version-3 state as it is."""
    return payload


# What a version-3 state leaves out when it holds it (State's defaults), filled back in on
# read before anything checks the state. The internal queue is always empty in a blob
# (encode refuses a state with events pending).
_STATE_DEFAULTS: dict[str, Any] = {
    "name": None,
    "internal_queue": [],
    "history": {},
    "invocations": [],
    "parent_session_id": None,
    "invokeid": None,
    "outcome": None,
}


def _with_defaults(payload: dict[str, Any]) -> dict[str, Any]:
    state = payload.get("state")
    if isinstance(state, dict) and any(key not in state for key in _STATE_DEFAULTS):
        payload = {**payload, "state": {**_STATE_DEFAULTS, **state}}
    return payload


# Readers of older format versions upgrade their payload to the current shape, one version at
# a time: a blob written by any earlier release decodes as if written today.
_UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {
    1: _upgrade_from_1,
    2: _upgrade_from_2,
}


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_optional_str(value: object) -> bool:
    return value is None or isinstance(value, str)


_EVENT_TYPES = frozenset({"platform", "internal", "external"})
_EVENT_FIELDS = ("sendid", "origin", "origintype", "invokeid")


def _is_event(raw: object) -> bool:
    """Whether ``raw`` is an event dict ``Event.from_dict`` reads as it was written."""
    return (
        isinstance(raw, dict)
        and isinstance(raw.get("name"), str)
        and raw.get("type", "external") in _EVENT_TYPES
        and all(_is_optional_str(raw.get(key)) for key in _EVENT_FIELDS)
    )


def _state_problem(raw: object) -> str | None:
    """Why ``raw`` is not a state ``State.from_dict`` can trust, or None."""
    if not isinstance(raw, dict):
        return "the state is not an object"
    checks: list[tuple[str, bool]] = [
        ("session_id", isinstance(raw.get("session_id"), str)),
        ("name", _is_optional_str(raw.get("name"))),
        (
            "configuration",
            isinstance(raw.get("configuration"), list)
            and all(_is_int(i) for i in raw["configuration"]),
        ),
        (
            "internal_queue",
            isinstance(raw.get("internal_queue"), list)
            and all(_is_event(e) for e in raw["internal_queue"]),
        ),
        (
            "history",
            isinstance(raw.get("history"), dict)
            and all(
                k.isascii() and k.isdigit() and isinstance(v, list) and all(_is_int(i) for i in v)
                for k, v in raw["history"].items()
            ),
        ),
        ("datamodel", isinstance(raw.get("datamodel"), dict)),
        (
            "invocations",
            isinstance(raw.get("invocations"), list)
            and all(
                isinstance(i, list)
                and len(i) == 5
                and isinstance(i[0], str)
                and _is_int(i[1])
                and _is_int(i[2])
                and isinstance(i[3], bool)
                and _is_int(i[4])
                for i in raw["invocations"]
            ),
        ),
        ("running", isinstance(raw.get("running"), bool)),
        ("bound", isinstance(raw.get("bound"), list) and all(_is_int(i) for i in raw["bound"])),
        (
            "counters",
            isinstance(raw.get("counters"), list)
            and len(raw["counters"]) == 7
            and all(_is_int(i) for i in raw["counters"]),
        ),
        (
            "io_processors",
            raw.get("io_processors") is None
            or (
                isinstance(raw["io_processors"], dict)
                and all(
                    isinstance(k, str) and isinstance(v, str)
                    for k, v in raw["io_processors"].items()
                )
            ),
        ),
        ("parent_session_id", _is_optional_str(raw.get("parent_session_id"))),
        ("invokeid", _is_optional_str(raw.get("invokeid"))),
        ("outcome", _is_optional_str(raw.get("outcome"))),
    ]
    wrong = [name for name, ok in checks if not ok]
    return f"wrong or missing {', '.join(wrong)}" if wrong else None


def _chart_problem(state: State, chart: Chart) -> str | None:
    """Why ``state`` cannot be a state of ``chart`` (an index the interpreter would look up
    that is not there), or None."""
    states = chart.states
    size = len(states)
    if any(i >= size for i in (*state.configuration, *state.bound)):
        return "a state index is out of range"
    for h, remembered in state.history.items():
        if h >= size or not states[h].is_history:
            return f"history key {h} is not a history state"
        if any(i >= size for i in remembered):
            return f"the history of state {h} remembers a state index out of range"
    for invocation in state.invocations:
        if invocation.invoke >= len(chart.invokes):
            return f"invocation {invocation.invokeid!r} names an <invoke> out of range"
        if chart.invokes[invocation.invoke].state != invocation.state:
            return f"invocation {invocation.invokeid!r} is not in the state of its <invoke>"
    return None


# Bounds on what decode reads. No blob this code writes comes near them: a datamodel value
# nests at most MAX_VALUE_DEPTH levels (the ECMAScript snapshot refuses deeper ones), and
# the blob wraps it in a few more (payload, state, datamodel or queue, event, data).
MAX_POSITION_DEPTH = MAX_VALUE_DEPTH + 8
# Four times the datamodel's default memory cap: the snapshot is a string in that heap,
# and UTF-8 takes at most four bytes per character it holds.
MAX_POSITION_BYTES = 256 * 1024 * 1024

_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_TO_BRACES = bytes.maketrans(b"[]", b"{}")


def _nests_deeper_than(blob: bytes, limit: int) -> bool:
    """Whether the JSON text ``blob`` nests arrays and objects more than ``limit`` deep,
    found without recursion (a recursive parser is what a deep blob would break): strip the
    strings, keep only the brackets (as braces), and remove the innermost pairs one level
    per pass; each pass is one C-level replace."""
    brackets = _JSON_STRING.sub(b"", blob).translate(_TO_BRACES, _NOT_BRACKETS)
    for _ in range(limit):
        if not brackets:
            return False
        shorter = brackets.replace(b"{}", b"")
        if len(shorter) == len(brackets):
            return False  # unbalanced: not JSON, which json.loads reports
        brackets = shorter
    return bool(brackets)


def encode(state: State, chart: ChartIdentity | Chart, *, version: int = VERSION) -> bytes:
    """The blob for ``state``. Refuses a state that is not quiescent: it could not be resumed.

    ``version``: the format to write, :data:`VERSION` unless told (2: the bytes a release
    before version 3 wrote for the same state, for checking what it recorded)."""
    if not state.quiescent:
        raise NotQuiescentError(
            f"session {state.session_id}: {len(state.internal_queue)} internal event(s) pending"
        )
    if version not in WRITABLE_VERSIONS:
        raise UnsupportedVersionError(version)
    identity = chart if isinstance(chart, ChartIdentity) else ChartIdentity(chart.source_hash)
    payload = {
        "format": FORMAT,
        "version": version,
        "chart": identity.to_dict(),
        "state": _compact_state(state) if version == 3 else state.to_dict(),
    }
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


def _compact_state(state: State) -> dict[str, Any]:
    """``state.to_dict()`` as version 3 writes it: defaults left out, what a step changes
    last (see the module docstring). The internal queue is empty (encode checked)."""
    raw: dict[str, Any] = {"session_id": state.session_id}
    if state.name is not None:
        raw["name"] = state.name
    raw["bound"] = list(state.bound)
    raw["running"] = state.running
    if state.parent_session_id is not None:
        raw["parent_session_id"] = state.parent_session_id
    if state.invokeid is not None:
        raw["invokeid"] = state.invokeid
    if state.io_processors is not None:
        raw["io_processors"] = dict(state.io_processors)
    if state.outcome is not None:
        raw["outcome"] = state.outcome
    if state.history:
        raw["history"] = {str(k): list(v) for k, v in sorted(state.history.items())}
    if state.invocations:
        raw["invocations"] = [
            [i.invokeid, i.state, i.invoke, i.autoforward, i.ordinal] for i in state.invocations
        ]
    c = state.counters
    raw["datamodel"] = state.datamodel
    raw["configuration"] = list(state.configuration)
    raw["counters"] = [
        c.send, c.invoke, c.ordinal, c.macrostep, c.microstep, c.round, c.invocation
    ]
    return raw


def decode(
    blob: bytes | str | memoryview,
    *,
    chart: Chart | str | None = None,
    require_running: bool = False,
) -> Position:
    """Read a blob back. ``chart`` (a Chart or its sha256) is checked against the identity."""
    if isinstance(blob, memoryview):
        blob = blob.tobytes()
    if isinstance(blob, str):
        try:
            blob = blob.encode()
        except UnicodeEncodeError as exc:
            raise NotAPositionError(f"not a position blob: {exc}") from None
    if len(blob) > MAX_POSITION_BYTES:
        raise NotAPositionError(
            f"not a position blob: {len(blob)} bytes, more than the {MAX_POSITION_BYTES} "
            f"a position can have"
        )
    if _nests_deeper_than(blob, MAX_POSITION_DEPTH):
        raise NotAPositionError(
            f"not a position blob: nested more than {MAX_POSITION_DEPTH} levels deep"
        )
    try:
        payload = json.loads(blob)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise NotAPositionError(f"not a position blob: {exc}") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise NotAPositionError(f"not a position blob (no {FORMAT!r} marker)")
    version = payload.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise UnsupportedVersionError(version)
    if version > VERSION or version < 1:
        raise UnsupportedVersionError(version)
    if version >= 3:
        payload = _with_defaults(payload)
    while version < VERSION:
        payload = _UPGRADES[version](payload)
        version += 1
    try:
        raw_chart = payload["chart"]
        identity = ChartIdentity(
            str(raw_chart["sha256"]), raw_chart.get("name"), raw_chart.get("version")
        )
        problem = _state_problem(payload["state"])
        if problem is not None:
            raise NotAPositionError(f"malformed position blob: {problem}")
        state = State.from_dict(payload["state"])
    except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as exc:
        raise NotAPositionError(f"malformed position blob: {exc!r}") from None
    if chart is not None:
        expected = chart if isinstance(chart, str) else chart.source_hash
        if identity.sha256 != expected:
            raise ChartMismatchError(expected, identity.sha256)
        if not isinstance(chart, str):
            problem = _chart_problem(state, chart)
            if problem is not None:
                raise NotAPositionError(f"malformed position blob: {problem}")
    if not state.quiescent:
        raise NotQuiescentError(
            f"session {state.session_id}: {len(state.internal_queue)} internal event(s) pending"
        )
    if require_running and not state.running:
        raise NotRunningPositionError(
            f"session {state.session_id} has stopped ({state.outcome or 'not running'})"
        )
    return Position(identity, state)
