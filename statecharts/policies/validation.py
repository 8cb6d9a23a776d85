"""The one validator for data that comes from outside the platform.

Its only caller is the stepper's gate (``statecharts.stepper.gate``): every door (the REST
API, the admin, ``manage.py statechart``, the Basic HTTP inbound view, an invoke handler's
answer, an import, the Python API) builds a request (``statecharts.stepper.requests``) and the
gate checks it against these rules before anything is written. Rows the platform encoded
itself (history entries replayed, outbox messages, timers firing, what ``stepper.feed`` is
given) are trusted and keep their tags; everything else is checked here. A new rule about
outside data goes here; a new field to check goes in the gate.

The rules (docs/durable-executions.md, "Data from outside"):

- **Values given to a chart** (start data, event data) are JSON in the datamodel's tagged
  encoding, restricted to the tags that describe data: ``undefined``, ``number`` (``NaN``,
  ``Infinity``, ``-Infinity``), ``bigint``, ``date`` and ``object`` (an object that really has
  a ``"$sc"`` key). Tags that carry code or references (``function``, ``regexp``, ``xml``,
  ``ref``, ``map``, ``set``) are refused: they would let a caller put code into an execution.
- **Any JSON from outside** (those values, execution metadata, a caller context): nested at
  most ``INPUT_MAX_DEPTH`` levels of arrays and objects as JSON text counts them (an
  ``object`` tag's ``"v"`` is one of them), at most ``INPUT_MAX_BYTES`` bytes as
  UTF-8 JSON text, object keys are strings, numbers are finite (a non-finite number is only
  accepted in its tagged form, and only where tags are read), no lone UTF-16 surrogate in a
  string or a key (neither database can store one, nor can the ECMAScript engine take one).
  NUL characters are allowed: every JSON column stores them (``statecharts.models.fields``).
- **Text that goes into a column** (a business key, a session id, a chart name, an event
  name) fits its column and holds no NUL character and no lone surrogate.
- **Event names** are one token (no whitespace or control characters), at most
  :data:`EVENT_NAME_MAX_LENGTH` characters, and never one the platform reserves for its own
  events (``RESERVED_EVENT_PREFIXES``: ``error`` and ``done`` by default, each with every name
  under it: ``error.execution``, ``done.state.s``).

A refusal is a :class:`statecharts.exceptions.InvalidInput` (importable from here too): a
``ValueError`` (and a ``StatechartError``) whose ``problems`` name each bad path
(``data.items[2]``) and why. Nothing has been written then.
"""

from __future__ import annotations

import json
import math
import re
import sys
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.core.checks import CheckMessage, Error

from statecharts.conf import default, statecharts_settings
from statecharts.exceptions import InputProblem, InvalidInput

TAG = "$sc"
# The tags a value from outside may carry (each describes data; none carries code).
ACCEPTED_TAGS = ("undefined", "number", "bigint", "date", "object")
# Event names are stored inside JSON (history input, outbox rows, timers): the bound is ours.
EVENT_NAME_MAX_LENGTH = 200
# The optional fields of an event given from Python (sendid, origin, ...): JSON-stored too.
EVENT_FIELD_MAX_LENGTH = 2048
# What one refusal lists at most: a million bad items need not be a million lines.
MAX_PROBLEMS = 20


_BIGINT = re.compile(r"-?[0-9]+")
_NUMBERS = frozenset({"NaN", "Infinity", "-Infinity"})
_SURROGATE = re.compile("[\ud800-\udfff]")

# A session id given to ``stepper.start(session_id=...)``: what the platform mints itself
# (uuid4 hex; an invoked child's uuid5 hex) is in it. Letters, digits, "_" and "-" only, so
# an id is safe in a URL path segment, a file name, a log line or a cache key ("../../x" and
# "a/b" are not); 1 to 64 characters (the column).
SESSION_ID_ALPHABET = "A-Z a-z 0-9 _ -"
SESSION_ID_MAX_LENGTH = 64
_SESSION_ID = re.compile(r"[A-Za-z0-9_-]+")
_IDENTIFIER = re.compile(r"[A-Za-z_$][\w$]*", re.ASCII)
# The largest integer a JavaScript number (a double) holds without becoming Infinity.
_LARGEST_NUMBER = int(sys.float_info.max)


# ---- errors ----------------------------------------------------------------------------------


# ``InvalidInput`` and ``InputProblem`` live in ``statecharts.exceptions`` (beside the
# ``StepRefused`` family, the one refusal table's rows); imported here, their old path.


# ---- settings --------------------------------------------------------------------------------


def check_settings(configured: Mapping[str, Any]) -> list[CheckMessage]:
    prefixes = configured.get("RESERVED_EVENT_PREFIXES", default("RESERVED_EVENT_PREFIXES"))
    if isinstance(prefixes, str) or not isinstance(prefixes, list | tuple):
        return [_prefixes_error()]
    if not all(isinstance(p, str) and _reserved_root(p) for p in prefixes):
        return [_prefixes_error()]
    return []


def _prefixes_error() -> CheckMessage:
    return Error(
        "STATECHARTS['RESERVED_EVENT_PREFIXES'] must be a list of event names "
        "(e.g. ['error', 'done']; an empty list reserves nothing).",
        id="statecharts.E020",
    )


@dataclass(frozen=True, slots=True)
class Limits:
    """The bounds in force (read from ``STATECHARTS`` at each use, so tests can override)."""

    max_depth: int
    max_bytes: int

    @classmethod
    def current(cls) -> Limits:
        return cls(
            max_depth=int(statecharts_settings.INPUT_MAX_DEPTH),
            max_bytes=int(statecharts_settings.INPUT_MAX_BYTES),
        )


def _reserved_root(entry: str) -> str:
    """``"error.*"``, ``"error."`` and ``"error"`` all reserve ``error`` and what is under it."""
    return entry.strip().removesuffix("*").removesuffix(".")


def reserved_event_prefixes() -> tuple[str, ...]:
    """The event names outsiders may not send (each with every name under it)."""
    configured = statecharts_settings.RESERVED_EVENT_PREFIXES or ()
    return tuple(root for root in map(_reserved_root, configured) if root)


# ---- JSON text -------------------------------------------------------------------------------


def _refuse_constant(name: str) -> Any:
    number = {"NaN": "NaN", "Infinity": "Infinity", "-Infinity": "-Infinity"}[name]
    raise ValueError(
        f'{name} is not JSON; send the number as {{"{TAG}": "number", "v": "{number}"}}'
    )


def parse_json(text: str | bytes, where: str) -> Any:
    """The JSON value ``text`` holds, read strictly (no ``NaN`` or ``Infinity``), or an
    :class:`InvalidInput` naming ``where``: never a ``RecursionError`` for deep nesting.
    The value still has to pass :func:`chart_value` or :func:`json_value`."""
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise InvalidInput.at(where, "nested too deeply to read") from None
    except UnicodeDecodeError as exc:
        raise InvalidInput.at(where, f"not UTF-8 text: {exc}") from None
    except ValueError as exc:
        raise InvalidInput.at(where, f"not valid JSON: {exc}") from None


# ---- values ----------------------------------------------------------------------------------


def chart_value(value: Any, where: str = "data", *, limits: Limits | None = None) -> Any:
    """Check a value given to a chart (event data, one start data value): JSON in the tagged
    encoding with the data tags only (:data:`ACCEPTED_TAGS`). Returns it unchanged."""
    _Walk(limits or Limits.current(), tags=True).run(value, where)
    return value


def json_value(value: Any, where: str, *, limits: Limits | None = None) -> Any:
    """Check opaque JSON from outside (metadata, a caller context): bounded, finite numbers,
    string keys, no lone surrogates. ``"$sc"`` keys mean nothing here. Returns it unchanged."""
    _Walk(limits or Limits.current(), tags=False).run(value, where)
    return value


def json_object(
    value: Any, where: str, *, optional: bool = True, limits: Limits | None = None
) -> dict[str, Any] | None:
    """:func:`json_value`, and it must be an object (or None when ``optional``)."""
    if value is None and optional:
        return None
    if not isinstance(value, dict):
        raise InvalidInput.at(where, "must be a JSON object")
    json_value(value, where, limits=limits)
    return value


def start_data(
    data: Any, where: str = "data", *, limits: Limits | None = None
) -> dict[str, Any] | None:
    """Start data: None, or an object of top-level ``<data>`` ids to chart values."""
    if data is None:
        return None
    if not isinstance(data, dict):
        raise InvalidInput.at(where, "must be a JSON object of data ids to initial values")
    chart_value(data, where, limits=limits)
    return data


def undeclared_data_ids(data: Mapping[str, Any] | None, declared: Iterable[str]) -> list[str]:
    """The keys of start ``data`` that are not top-level ``<data>`` ids of the chart."""
    return sorted(set(data or ()) - set(declared))


# ---- text ------------------------------------------------------------------------------------


def text(
    value: Any, where: str, *, max_length: int, optional: bool = False, blank: bool = True
) -> str | None:
    """Text for a column: a string of at most ``max_length`` characters, without a NUL
    character (PostgreSQL text cannot hold one) or a lone surrogate."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InvalidInput.at(where, f"must be text, not {type(value).__name__}")
    if not blank and not value.strip():
        raise InvalidInput.at(where, "must not be blank")
    if len(value) > max_length:
        raise InvalidInput.at(
            where, f"is {len(value)} characters long; the most its column holds is {max_length}"
        )
    if "\x00" in value:
        raise InvalidInput.at(where, "must not contain a NUL character")
    if not value.isascii() and _SURROGATE.search(value):
        raise InvalidInput.at(where, "must not contain a lone UTF-16 surrogate")
    return value


def session_id(value: Any, where: str = "session_id") -> str:
    """A session id chosen by a caller: 1 to :data:`SESSION_ID_MAX_LENGTH` characters of
    :data:`SESSION_ID_ALPHABET` (letters, digits, ``_``, ``-``)."""
    checked = text(value, where, max_length=SESSION_ID_MAX_LENGTH, blank=False)
    assert checked is not None
    if not _SESSION_ID.fullmatch(checked):
        raise InvalidInput.at(
            where,
            f"{checked!r} is not a session id: use only letters, digits, '_' and '-' "
            f"(at most {SESSION_ID_MAX_LENGTH} characters)",
        )
    return checked


# ---- who asked: a caller context, a request id, an idempotency key ---------------------------


def caller_context(value: Any, where: str) -> dict[str, Any] | None:
    """A caller context given from outside (already parsed; ``statecharts.policies.attribution``):
    None, or a JSON object within the tighter caller-context bounds
    (``CALLER_CONTEXT_MAX_DEPTH``, ``CALLER_CONTEXT_MAX_BYTES``: it is copied onto every row a
    step writes)."""
    limits = Limits(
        max_depth=int(statecharts_settings.CALLER_CONTEXT_MAX_DEPTH),
        max_bytes=int(statecharts_settings.CALLER_CONTEXT_MAX_BYTES),
    )
    return json_object(value, where, limits=limits)


def caller_context_text(text: str | None, where: str) -> dict[str, Any] | None:
    """:func:`caller_context` of JSON text (a header's, an option's); None for no text."""
    if text is None or not text.strip():
        return None
    limit = int(statecharts_settings.CALLER_CONTEXT_MAX_BYTES)
    if len(text.encode("utf-8", "surrogatepass")) > limit:
        raise InvalidInput.at(where, f"is longer than {limit} bytes")
    return caller_context(parse_json(text, where), where)


def request_id(value: str, where: str, *, max_length: int) -> str:
    """A request id from a header: text of at most ``max_length`` characters, without
    control characters (it is shown in the admin and logs)."""
    text(value, where, max_length=max_length)
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise InvalidInput.at(where, "must not contain control characters")
    return value


def idempotency_key(key: Any, where: str = "idempotency_key", *, max_length: int) -> str | None:
    """An idempotency key from outside (``statecharts.policies.idempotency``): None, or text
    of at most ``max_length`` characters (its column), not blank, without control
    characters (it is shown in the admin and logs)."""
    if key is None:
        return None
    text(key, where, max_length=max_length, blank=False)
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in key):
        raise InvalidInput.at(where, "must not contain control characters")
    return key


def event_name(name: Any, where: str = "name", *, reserved: bool = False) -> str:
    """An event name from outside: one token of visible characters, at most
    :data:`EVENT_NAME_MAX_LENGTH` characters, and (unless ``reserved`` is allowed, for the
    platform's own paths) not under a reserved prefix (``RESERVED_EVENT_PREFIXES``)."""
    checked = text(name, where, max_length=EVENT_NAME_MAX_LENGTH)
    assert checked is not None
    if not checked or any(c.isspace() or unicodedata.category(c) == "Cc" for c in checked):
        raise InvalidInput.at(
            where,
            "an event name must not be empty or contain whitespace or control characters "
            "(e.g. 'order.paid')",
        )
    if not reserved:
        for root in reserved_event_prefixes():
            if checked == root or checked.startswith(root + "."):
                raise InvalidInput.at(
                    where,
                    f"{checked!r} is reserved for the platform's own events ({root}.*): "
                    f"it cannot be sent from outside (STATECHARTS['RESERVED_EVENT_PREFIXES'])",
                )
    return checked


_EVENT_FIELDS = frozenset({"sendid", "origin", "origintype", "invokeid"})


def event_fields(fields: Mapping[str, Any]) -> None:
    """The optional fields of an external event given from Python (``stepper.send``)."""
    for key, value in fields.items():
        if key not in _EVENT_FIELDS:
            raise InvalidInput.at(
                key, f"not an event field (fields: {', '.join(sorted(_EVENT_FIELDS))})"
            )
        text(value, key, max_length=EVENT_FIELD_MAX_LENGTH, optional=True)


# ---- the walk --------------------------------------------------------------------------------


# Where a value is, built as (parent, key or index) while walking and spelled only for a
# problem ("data.items[2]"): most values have none, and their paths are never written out.
Path = str | tuple[Any, str | int]


def _spelled(path: Path) -> str:
    steps: list[str] = []
    while isinstance(path, tuple):
        path, step = path
        if isinstance(step, int):
            steps.append(f"[{step}]")
        elif _IDENTIFIER.fullmatch(step):
            steps.append(f".{step}")
        else:
            steps.append(f"[{json.dumps(step[:40] + ('...' if len(step) > 40 else ''))}]")
    return path + "".join(reversed(steps))


class _Walk:
    """One pass over a value, without recursion (a value a million levels deep costs as
    much as one ``max_depth`` deep), collecting problems."""

    def __init__(self, limits: Limits, *, tags: bool) -> None:
        self.limits = limits
        self.tags = tags
        self.problems: list[InputProblem] = []
        self.size = 0  # a lower bound of the JSON text's length while walking

    def problem(self, path: Path, message: str) -> None:
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(InputProblem(_spelled(path), message))

    def run(self, value: Any, where: str) -> None:
        self.walk(value, where)
        if not self.problems and self.size <= self.limits.max_bytes:
            # Exact size, now that the value is known to be shallow and JSON-clean.
            text = json.dumps(value, ensure_ascii=False)
            self.size = len(text.encode("utf-8", "surrogatepass"))
        if not self.problems and self.size > self.limits.max_bytes:
            self.problem(
                where,
                f"is larger than {self.limits.max_bytes} bytes of JSON "
                f"(STATECHARTS['INPUT_MAX_BYTES'])",
            )
        if self.problems:
            raise InvalidInput(self.problems)

    def walk(self, root: Any, where: str) -> None:
        max_depth, max_bytes = self.limits.max_depth, self.limits.max_bytes
        stack: list[tuple[Any, Path, int]] = [(root, where, 0)]
        while stack:
            if len(self.problems) >= MAX_PROBLEMS or self.size > max_bytes:
                return
            value, path, depth = stack.pop()
            if value is None or isinstance(value, bool):
                self.size += 4
            elif isinstance(value, int):
                if abs(value) > _LARGEST_NUMBER:
                    self.problem(
                        path,
                        "a whole number this large is not a number a chart can hold; send "
                        f'{{"{TAG}": "bigint", "v": "<digits>"}}',
                    )
                self.size += 8
            elif isinstance(value, float):
                if not math.isfinite(value):
                    self.problem(path, _non_finite(value, tags=self.tags))
                self.size += 8
            elif isinstance(value, str):
                self.string(value, path)
            elif isinstance(value, list | tuple):
                if depth >= max_depth:
                    self.too_deep(path)
                    continue
                self.size += 2 + len(value)  # a comma or a bracket per item, at least
                if self.size > max_bytes:
                    continue
                stack.extend(
                    (item, (path, index), depth + 1)
                    for index, item in reversed(list(enumerate(value)))
                )
            elif isinstance(value, dict):
                if depth >= max_depth:
                    self.too_deep(path)
                    continue
                self.size += 2 + 4 * len(value)  # quotes, colon and comma per member
                if self.size > max_bytes:
                    continue
                members: list[tuple[Any, Any, int]] = []
                if self.tags and TAG in value:
                    # Whatever the object holds beside its tag, as plain JSON; an "object"
                    # tag's payload members one JSON level further down (inside "v").
                    extra = [(k, v, depth + 1) for k, v in value.items() if k not in (TAG, "v")]
                    payload = self.tagged(value, path)
                    if payload and depth + 1 >= max_depth:
                        self.too_deep(path)
                        continue
                    members = [*extra, *((k, v, depth + 2) for k, v in payload.items())]
                else:
                    members = [(k, v, depth + 1) for k, v in value.items()]
                items = []
                for key, item, level in members:
                    if not isinstance(key, str):
                        self.problem(path, f"the key {key!r} is not a string")
                        continue
                    self.string(key, path, key=True)
                    items.append((item, (path, key), level))
                stack.extend(reversed(items))
            else:
                self.problem(path, f"a {type(value).__name__} is not a JSON value")

    def string(self, value: str, path: Path, *, key: bool = False) -> None:
        self.size += len(value) + 2
        if not value.isascii() and _SURROGATE.search(value):
            what = "a key" if key else "a string"
            self.problem(path, f"{what} with a lone UTF-16 surrogate is not text")

    def too_deep(self, path: Path) -> None:
        self.problem(
            path,
            f"nested more than {self.limits.max_depth} levels deep "
            f"(STATECHARTS['INPUT_MAX_DEPTH'])",
        )

    def tagged(self, value: dict[str, Any], where: Path) -> dict[str, Any]:
        """Check a ``{"$sc": ...}`` object; return what is to be walked inside it."""
        tag = value[TAG]
        payload = value.get("v")
        if tag == "undefined":
            return {}
        if tag == "number":
            if not isinstance(payload, str) or payload not in _NUMBERS:
                self.problem(where, 'a "number" tag needs "v": "NaN", "Infinity" or "-Infinity".')
        elif tag == "bigint":
            if not isinstance(payload, str) or not _BIGINT.fullmatch(payload):
                self.problem(where, 'a "bigint" tag needs "v": a decimal integer string.')
            elif len(payload) > 10_000:
                self.problem(where, 'a "bigint" tag holds at most 10000 digits.')
        elif tag == "date":
            if payload is not None and (
                isinstance(payload, bool)
                or not isinstance(payload, int | float)
                or not math.isfinite(payload)
                or abs(payload) > 8.64e15  # the range of a JavaScript Date
            ):
                self.problem(where, 'a "date" tag needs "v": milliseconds since the epoch.')
        elif tag == "object":
            if not isinstance(payload, dict):
                self.problem(where, 'an "object" tag needs "v": an object.')
                return {}
            return payload
        else:
            shown = repr(tag)[:60]
            self.problem(
                where,
                f"the tag {shown} is not accepted here (accepted: "
                f"{', '.join(ACCEPTED_TAGS)}; to send an object with a {TAG!r} key, wrap it: "
                f'{{"{TAG}": "object", "v": {{...}}}}).',
            )
        return {}


def _non_finite(value: float, *, tags: bool) -> str:
    spelled = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if tags:
        return (
            f'{value} is not a finite number; send {{"{TAG}": "number", "v": "{spelled}"}}.'
        )
    return f"{value} is not a finite number, and JSON has no {spelled}."


__all__ = [
    "ACCEPTED_TAGS",
    "EVENT_NAME_MAX_LENGTH",
    "InputProblem",
    "InvalidInput",
    "Limits",
    "caller_context",
    "caller_context_text",
    "chart_value",
    "event_fields",
    "event_name",
    "idempotency_key",
    "json_object",
    "json_value",
    "parse_json",
    "request_id",
    "reserved_event_prefixes",
    "start_data",
    "text",
    "undeclared_data_ids",
]
