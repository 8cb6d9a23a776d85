"""Event I/O processor addresses are capabilities: no view and no export shows them.

A host adds entries to an execution's ``_ioprocessors`` (type -> location; the routes app's
Basic HTTP address is one): whoever holds such an address can post events into the
execution. The position keeps them (every step must see the same ``_ioprocessors``, and
replay too), and a chart may copy them into its own data (W3C tests copy ``_ioprocessors``
whole). So wherever an execution is shown or exported, its current addresses are hidden by
value: every string that contains one has it replaced by :data:`HIDDEN_ADDRESS`, and so does
the address's last path segment on its own when it is long enough to be a token
(:data:`TOKEN_MIN_LENGTH`). Only the current addresses are known here: an address the host
replaced (``Input.readdress``: rotated, re-minted at import) no longer opens anything.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

HIDDEN_ADDRESS = "(hidden: an Event I/O processor address is a capability)"
# A last path segment at least this long is treated as a token and hidden on its own too
# (Basic HTTP's signed token is about 100 characters; ordinary path names are short).
TOKEN_MIN_LENGTH = 32


def secrets_of(io_processors: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The strings to hide for these ``_ioprocessors`` entries: each location, and its last
    path segment when it is token-long; longest first (a token inside its address is
    replaced as part of the address)."""
    found: set[str] = set()
    for where in (io_processors or {}).values():
        if not isinstance(where, str) or not where:
            continue
        found.add(where)
        segment = where.rstrip("/").rsplit("/", 1)[-1]
        if len(segment) >= TOKEN_MIN_LENGTH:
            found.add(segment)
    return tuple(sorted(found, key=lambda text: (-len(text), text)))


def hide(value: Any, secrets: Iterable[str]) -> Any:
    """``value`` (JSON-like) with every occurrence of each secret, in any string (keys too),
    replaced by :data:`HIDDEN_ADDRESS`. Returns ``value`` itself when there is nothing to
    hide."""
    secrets = tuple(secrets)
    if not secrets:
        return value
    return _hide(value, secrets)


def _hide_text(text: str, secrets: tuple[str, ...]) -> str:
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, HIDDEN_ADDRESS)
    return text


def _hide(value: Any, secrets: tuple[str, ...]) -> Any:
    """(Iterative: a datamodel may nest as deep as its engine lets it, deeper than Python's
    recursion limit.)"""
    if isinstance(value, str):
        return _hide_text(value, secrets)
    if not isinstance(value, dict | list | tuple):
        return value
    root: list[Any] = [None]
    # (a container to copy, the copy it goes into, and where in that copy)
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]
    while stack:
        source, parent, slot = stack.pop()
        if isinstance(source, dict):
            copy: Any = {}
            for key, item in source.items():
                shown_key = _hide_text(key, secrets) if isinstance(key, str) else key
                copy[shown_key] = None
                _push(stack, item, copy, shown_key, secrets)
        else:
            copy = [None] * len(source)
            for index, item in enumerate(source):
                _push(stack, item, copy, index, secrets)
        parent[slot] = copy
    return root[0]  # (a tuple comes back as a list, as JSON has it)


def _push(stack: list[Any], item: Any, copy: Any, slot: Any, secrets: tuple[str, ...]) -> None:
    if isinstance(item, str):
        copy[slot] = _hide_text(item, secrets)
    elif isinstance(item, dict | list | tuple):
        stack.append((item, copy, slot))
    else:
        copy[slot] = item


def shown_input(raw: Any) -> Any:
    """A history entry's input as views show it: its ``io_processors`` (a start's, a
    readdress's) hidden, and the addresses inside a recorded ``position`` (a migration's, an
    import's) hidden by value."""
    if not isinstance(raw, dict):
        return raw
    shown = raw
    if isinstance(raw.get("io_processors"), dict):
        shown = {**shown, "io_processors": dict.fromkeys(raw["io_processors"], HIDDEN_ADDRESS)}
    position = raw.get("position")
    if isinstance(position, str) and "io_processors" in position:
        try:
            state = json.loads(position).get("state") or {}
            secrets = secrets_of(state.get("io_processors"))
        except (ValueError, AttributeError, RecursionError):
            secrets = ()
        if secrets:
            shown = {**shown, "position": _hide_text(position, secrets)}
    return shown
