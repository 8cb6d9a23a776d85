"""One JSON column type that stores every JSON value the same way on SQLite and PostgreSQL.

PostgreSQL's ``jsonb`` cannot store the character U+0000 (``"\\u0000"`` in a string or a key
is a ``DataError``), nor a lone UTF-16 surrogate (``"\\ud800"``); SQLite stores both. A NUL
reaches a JSON column easily (event data from a client, a string a chart built), and a lone
surrogate can leave the ECMAScript engine. So every project JSON column is a
:class:`PortableJSONField`, which writes such strings in a reversible escape and reads them
back as they were, on both databases:

- ``ESCAPE`` is U+FDD0, a Unicode *noncharacter* (reserved for a program's internal use,
  never interchanged as text). In a stored string, ``ESCAPE`` starts a sequence:
  ``ESCAPE "0"`` is U+0000, ``ESCAPE "e"`` is ``ESCAPE`` itself, and ``ESCAPE "u" XXXX`` (four
  lowercase hex digits) is the lone surrogate U+XXXX.
- A string with none of these characters (nearly all of them) is stored as it is: queries,
  indexes and the stored text are unchanged. Keys are escaped like values.
- Writing checks the JSON text for the three characters before walking the value, and
  reading checks for ``ESCAPE`` before walking it, so a value that needs no escape costs one
  substring search on each side.

Text columns that are lookup keys (a session id, a send id) are plain ``CharField`` columns: nothing
the platform writes there holds a NUL. Chart code can still compute a key holding one (a
``<cancel sendidexpr>`` or a ``<send targetexpr>`` fed by event data), and PostgreSQL refuses
such a query outright. :func:`nul_matches_nothing` registers ``exact`` and ``in`` lookups on
those fields that answer "no row" for a NUL key without asking the database, which is what
the query means: no stored key holds a NUL.

A stored value that cannot be read back at all (nested deeper than the JSON decoder can go,
from a row written before input was bounded) is given back as its JSON text, the way Django
gives back text that is not JSON, so that no read of the row fails.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from django.core.exceptions import EmptyResultSet
from django.db import models
from django.db.models.lookups import Exact, In

ESCAPE = "\ufdd0"
_NUL_SEQUENCE = ESCAPE + "0"
_ESCAPE_SEQUENCE = ESCAPE + "e"
_NEEDS_ESCAPE = re.compile("[\x00\ufdd0\ud800-\udfff]")
_ESCAPED = re.compile("\ufdd0(?:(0)|(e)|u([0-9a-f]{4}))")
# In JSON text written with ensure_ascii (Django's default), these are how NUL, ESCAPE and any
# surrogate (lone, or half of an astral character's pair) are spelled.
_MARKERS_IN_ASCII_JSON = ("\\u0000", "\\ufdd0", "\\ud")


def escape_text(text: str) -> str:
    """``text`` as stored: NUL, ``ESCAPE`` and lone surrogates written as escape sequences."""
    if not _NEEDS_ESCAPE.search(text):
        return text
    return _NEEDS_ESCAPE.sub(_escape_one, text)


def _escape_one(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\x00":
        return _NUL_SEQUENCE
    if char == ESCAPE:
        return _ESCAPE_SEQUENCE
    return f"{ESCAPE}u{ord(char):04x}"


def unescape_text(text: str) -> str:
    """The string :func:`escape_text` stored. An ``ESCAPE`` not followed by a sequence is
    kept as it is (a row written before this encoding)."""
    if ESCAPE not in text:
        return text
    return _ESCAPED.sub(_unescape_one, text)


def _unescape_one(match: re.Match[str]) -> str:
    nul, escape, code = match.groups()
    if nul:
        return "\x00"
    if escape:
        return ESCAPE
    return chr(int(code, 16))


def _map_strings(value: Any, convert: Any) -> Any:
    """``value`` with ``convert`` applied to every string and key, without recursion."""
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]
    while stack:
        item, parent, slot = stack.pop()
        if isinstance(item, str):
            parent[slot] = convert(item)
        elif isinstance(item, dict):
            copy: dict[Any, Any] = {}
            parent[slot] = copy
            for key, child in item.items():
                new_key = convert(key) if isinstance(key, str) else key
                copy[new_key] = None
                stack.append((child, copy, new_key))
        elif isinstance(item, list | tuple):
            items: list[Any] = [None] * len(item)
            parent[slot] = items
            stack.extend((child, items, index) for index, child in enumerate(item))
        else:
            parent[slot] = item
    return root[0]


class PortableJSONEncoder(json.JSONEncoder):
    """Writes NUL, ``ESCAPE`` and lone surrogates as escape sequences (module docstring)."""

    def encode(self, o: Any) -> str:
        text = super().encode(o)
        if self.ensure_ascii:
            needs = any(marker in text for marker in _MARKERS_IN_ASCII_JSON)
        else:
            needs = bool(_NEEDS_ESCAPE.search(text)) or "\\u0000" in text
        if not needs:
            return text
        return super().encode(_map_strings(o, escape_text))


class PortableJSONDecoder(json.JSONDecoder):
    """Reads what :class:`PortableJSONEncoder` wrote. Nesting too deep for the decoder is a
    ``JSONDecodeError`` (Django's ``JSONField`` then returns the text as it is stored)."""

    def decode(self, s: str, *args: Any, **kwargs: Any) -> Any:
        try:
            value = super().decode(s, *args, **kwargs)
        except RecursionError:
            raise json.JSONDecodeError("nested too deeply to read", s, 0) from None
        if ESCAPE in s or "\\ufdd0" in s:
            value = _map_strings(value, unescape_text)
        return value


class PortableJSONField(models.JSONField):
    """A ``JSONField`` that stores NUL characters and lone surrogates on every database
    (see the module docstring). Any ``encoder`` or ``decoder`` given is replaced."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["encoder"] = PortableJSONEncoder
        kwargs["decoder"] = PortableJSONDecoder
        super().__init__(*args, **kwargs)

    def deconstruct(self) -> Any:
        name, path, args, kwargs = super().deconstruct()
        kwargs.pop("encoder", None)
        kwargs.pop("decoder", None)
        return name, path, args, kwargs


class PortableTextField(models.TextField):
    """A ``TextField`` for text a chart can put words into (an error's message, a reason),
    which may hold a NUL character or a lone surrogate that PostgreSQL's text cannot store:
    written with the same escape as :class:`PortableJSONField`, read back as it was. Text
    without those characters is stored as it is."""

    def get_prep_value(self, value: Any) -> Any:
        value = super().get_prep_value(value)
        return escape_text(value) if isinstance(value, str) else value

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        return unescape_text(value) if isinstance(value, str) else value


def _holds_nul(value: Any) -> bool:
    return isinstance(value, str) and "\x00" in value


class NulFreeExact(Exact):
    """``field = key`` on a column no row of which holds a NUL: a key holding one matches
    nothing (an empty result, as Django does for an integer out of a column's range)."""

    def process_rhs(self, compiler: Any, connection: Any) -> Any:
        if self.rhs_is_direct_value() and _holds_nul(self.rhs):
            raise EmptyResultSet
        return super().process_rhs(compiler, connection)


class NulFreeIn(In):
    """``field IN (...)`` on such a column: keys holding a NUL are left out (none left:
    nothing matches)."""

    def process_rhs(self, compiler: Any, connection: Any) -> Any:
        if self.rhs_is_direct_value() and isinstance(self.rhs, Iterable):
            self.rhs = [value for value in self.rhs if not _holds_nul(value)]
        return super().process_rhs(compiler, connection)


def nul_matches_nothing(*fields: models.Field) -> None:  # type: ignore[type-arg]
    """Make an ``exact`` or ``in`` lookup of a NUL-holding key on each of ``fields`` (text
    columns the platform never writes a NUL into) find no row, on every database, instead
    of PostgreSQL's ``DataError``. Registered on the field instances (no migration)."""
    for field in fields:
        field.register_lookup(NulFreeExact)
        field.register_lookup(NulFreeIn)
