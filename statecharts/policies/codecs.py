"""Payload codecs: how event data is written at rest in timer, route timer, outbox, history
and invocation rows (the apps that own those rows call the functions below).

Event data (an event's ``data`` and ``raw``, a start's ``data``) is what a client sent and a
chart computed: often personal. A codec turns it into what the row stores and back. Which
codec writes is a setting (``STATECHARTS["PAYLOAD_CODEC"]``, a name), and every row that
holds event data records the name of the codec that wrote it (its ``codec`` column), looked
up in ``STATECHARTS["PAYLOAD_CODECS"]`` (name -> dotted path of a class) when it is read: a
row never holds a path, so nothing a row says is ever imported. Changing the setting changes
what new rows are written with; old rows stay readable as long as their codec (and key) is
deployed.

Two codecs ship:

- ``json`` (:class:`JSONCodec`, the default): the value as it is, in clear.
- :class:`EncryptingCodec` (register it, e.g. as ``"encrypted"``; needs the ``encryption``
  extra, the ``cryptography`` package): authenticated encryption (Fernet: AES-128-CBC with an
  HMAC-SHA256 over it) under keys from ``STATECHARTS["PAYLOAD_KEYS"]``, a list of
  ``{"id": ..., "key": ...}``; the **first** (newest) writes, all of them read. The stored
  value names its key id, so a row written under a key this node does not have yet (a
  rolling deploy of a new key) is told apart from a corrupt one.

What stays in clear, always: event names, types, targets, send ids, a start's session id,
the caller context, and the execution's position (its datamodel, which the stepper must read
on every step under the execution's lock and which replay compares byte for byte); see
docs/payload-codecs.md.

Two kinds of failure, told apart on purpose (docs/timers.md):

- :class:`CodecUnavailable`: the row's codec is not registered here, cannot be loaded, or the
  key it names is not deployed here. A fact about this deployment: a timer is snoozed
  without spending an attempt, an outbox message stays pending.
- :class:`CorruptPayload`: the codec is here and says the stored value can never be read (a
  failed authentication tag, a value of the wrong shape). A fact about the row: a timer is
  discarded as undecodable.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

from django.core.checks import CheckMessage, Error, Warning

from statecharts.conf import NamedClasses, default, statecharts_settings

JSON = "json"  # the default codec's name: rows written before codecs existed name it too

# The event fields a codec encodes (the rest of an event stays in clear).
EVENT_PAYLOAD_FIELDS = ("data", "raw")


class CodecUnavailable(LookupError):
    """The codec (or its key) this row needs is not deployed here now: try again later."""


class CorruptPayload(ValueError):
    """The stored value can never be decoded by its codec: no retry makes it readable."""


class Codec(Protocol):
    """A payload codec: instantiated once per process (no arguments) per registered name.

    ``encode`` returns a JSON-compatible value; ``decode(encode(v)) == v`` for every JSON
    value ``v``. ``decode`` raises :class:`CorruptPayload` for a value it can never read and
    :class:`CodecUnavailable` for one it cannot read *here* (a key not deployed). Optional:
    ``current(stored) -> bool``, whether ``encode`` would write ``stored`` as it is now (see
    :func:`is_current`; ``statechart reencrypt`` leaves such rows alone)."""

    def encode(self, value: Any) -> Any: ...

    def decode(self, stored: Any) -> Any: ...


def is_current(codec: Codec, stored: Any) -> bool:
    """Whether ``codec`` would write ``stored`` as it is now (an optional codec method,
    ``current(stored)``: the encrypting codec answers whether the newest key wrote it). A
    codec without it is taken at its name: a row it wrote is current."""
    current = getattr(codec, "current", None)
    return True if current is None else bool(current(stored))


class JSONCodec:
    """The value as it is (the column is JSON already): no copy, no cost."""

    def encode(self, value: Any) -> Any:
        return value

    def decode(self, stored: Any) -> Any:
        return stored

    def current(self, stored: Any) -> bool:
        return True


class EncryptingCodec:
    """Fernet (authenticated encryption) under a key named by id, with rotation.

    ``STATECHARTS["PAYLOAD_KEYS"]``: ``[{"id": "2026-12", "key": "<Fernet key>"}, ...]``,
    newest first (``cryptography.fernet.Fernet.generate_key()`` makes a key). The first key
    writes; every listed key reads. The stored value is ``{"key": <id>, "token": <Fernet
    token>}``: JSON, and it says which key it needs. Rotation: put the new key first on every
    node, run ``statechart reencrypt`` (``statecharts.operations.reencryption``), then drop the old
    one.
    Keys are read from the settings on every call, so ``override_settings`` and a reloaded
    configuration take effect at once.
    """

    def __init__(self) -> None:
        try:
            from cryptography.fernet import Fernet, InvalidToken
        except ImportError as exc:  # the `encryption` extra is not installed here
            raise CodecUnavailable(
                "the encrypting codec needs the `cryptography` package "
                "(pip install django-statecharts[encryption])"
            ) from exc
        self._fernet_class = Fernet
        self._invalid = InvalidToken
        self._cache: dict[tuple[str, str], Any] = {}

    def _keys(self) -> list[tuple[str, str]]:
        keys = statecharts_settings.PAYLOAD_KEYS
        found: list[tuple[str, str]] = []
        for entry in keys if isinstance(keys, list | tuple) else ():
            if isinstance(entry, Mapping) and isinstance(entry.get("id"), str):
                found.append((entry["id"], entry.get("key")))
        return found

    def _fernet(self, key_id: str, key: Any) -> Any:
        cached = self._cache.get((key_id, key))
        if cached is None:
            try:
                cached = self._fernet_class(key)
            except (ValueError, TypeError) as exc:
                raise CodecUnavailable(f"payload key {key_id!r} is not a Fernet key") from exc
            self._cache[(key_id, key)] = cached
        return cached

    def encode(self, value: Any) -> Any:
        keys = self._keys()
        if not keys:
            raise CodecUnavailable("STATECHARTS['PAYLOAD_KEYS'] has no key to encrypt with")
        key_id, key = keys[0]
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        token = self._fernet(key_id, key).encrypt(text.encode("utf-8", "surrogatepass"))
        return {"key": key_id, "token": token.decode("ascii")}

    def decode(self, stored: Any) -> Any:
        if not (
            isinstance(stored, dict)
            and isinstance(stored.get("key"), str)
            and isinstance(stored.get("token"), str)
        ):
            raise CorruptPayload("not an encrypted payload ({'key', 'token'})")
        key_id = stored["key"]
        key = dict(self._keys()).get(key_id)
        if key is None:
            raise CodecUnavailable(f"payload key {key_id!r} is not deployed here")
        try:
            text = self._fernet(key_id, key).decrypt(stored["token"].encode("ascii"))
        except (self._invalid, UnicodeEncodeError) as exc:
            raise CorruptPayload(f"the payload does not authenticate under key {key_id!r}") from exc
        try:
            return json.loads(text.decode("utf-8", "surrogatepass"))
        except ValueError as exc:
            raise CorruptPayload(f"the decrypted payload is not JSON: {exc}") from exc

    def current(self, stored: Any) -> bool:
        """Whether ``stored`` is written under the key that writes now (the first): what
        ``statechart reencrypt`` leaves alone."""
        keys = self._keys()
        return bool(keys) and isinstance(stored, dict) and stored.get("key") == keys[0][0]


# ---- the registry (by name, from the settings) -------------------------------------------------

_JSON_CODEC = JSONCodec()
_named: NamedClasses[Codec] = NamedClasses(
    "PAYLOAD_CODECS", what="payload codec", method="decode", unavailable=CodecUnavailable
)


def resolve(name: str) -> Codec:
    """The codec registered under ``name`` (loaded once per name and path); raises
    :class:`CodecUnavailable` when this deployment has no such name or cannot load it."""
    return _named.resolve(name)


def writing() -> tuple[str, Codec]:
    """The codec new rows are written with (``PAYLOAD_CODEC``), and its name."""
    name = statecharts_settings.PAYLOAD_CODEC
    if name == JSON and statecharts_settings.PAYLOAD_CODECS.get(JSON) == _DEFAULT_PATH:
        return JSON, _JSON_CODEC  # the hot path: no lookup beyond the two settings
    return name, resolve(name)


def encode_event(event: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """An event dict as stored (its payload fields encoded) and the writing codec's name."""
    name, codec = writing()
    if isinstance(codec, JSONCodec):
        return event, name
    return _map_event(event, codec.encode), name


def decode_event(event: Any, codec_name: str) -> Any:
    """The event dict a row stored, its payload fields decoded with the row's codec."""
    if codec_name == JSON or not isinstance(event, dict):
        return event
    return _map_event(event, resolve(codec_name).decode)


def encode_input(raw: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """A history input (``Input.to_dict()``) as stored, and the writing codec's name: its
    event's payload fields and a start's ``data`` encoded; kind, names, ids stay in clear."""
    name, codec = writing()
    if isinstance(codec, JSONCodec):
        return raw, name
    return _map_input(raw, codec.encode), name


def decode_input(raw: Any, codec_name: str) -> Any:
    """The input a history row stored, decoded with the row's codec."""
    if codec_name == JSON or not isinstance(raw, dict):
        return raw
    return _map_input(raw, resolve(codec_name).decode)


def encode_effect(item: dict[str, Any]) -> dict[str, Any]:
    """One effect summary as a history row stores it: the event a send carried, an
    ``<invoke>``'s params (``data``) and a ``done``'s ``donedata`` written by the writing
    codec (the row records its name: the one :func:`encode_input` returns)."""
    _, codec = writing()
    if isinstance(codec, JSONCodec):
        return item
    return _map_effect(item, codec.encode)


def decode_effects(effects: Any, codec_name: str) -> Any:
    """A history row's effect summaries, their payloads decoded with the row's codec."""
    if codec_name == JSON or not isinstance(effects, list):
        return effects
    return map_effects(effects, resolve(codec_name).decode)


def encode_value(value: Any) -> tuple[Any, str]:
    """A whole value (e.g. an invocation's params, a route send's data) as the writing codec
    stores it, and the codec's name. ``None`` stays ``None`` (nothing to hide)."""
    name, codec = writing()
    if value is None or isinstance(codec, JSONCodec):
        return value, name
    return codec.encode(value), name


def decode_value(stored: Any, codec_name: str) -> Any:
    """A value :func:`encode_value` stored, decoded with the row's codec."""
    if stored is None or codec_name == JSON:
        return stored
    return resolve(codec_name).decode(stored)


def map_event(event: Any, convert: Any) -> Any:
    """``event`` (a stored event dict) with ``convert`` applied to its payload fields."""
    return _map_event(event, convert) if isinstance(event, dict) else event


def map_input(raw: Any, convert: Any) -> Any:
    """A history input with ``convert`` applied to its payload fields."""
    return _map_input(raw, convert) if isinstance(raw, dict) else raw


def map_effects(effects: Any, convert: Any) -> Any:
    """A history row's effect summaries with ``convert`` applied to the events they carry."""
    if not isinstance(effects, list):
        return effects
    return [_map_effect(item, convert) if isinstance(item, dict) else item for item in effects]


# The payload fields of effect summaries other than the event a send carried, by kind
# (statecharts.core.effects.EffectKind's values).
EFFECT_PAYLOAD_FIELDS = {"invoke": "data", "done": "donedata"}


def _map_effect(item: dict[str, Any], convert: Any) -> dict[str, Any]:
    mapped = dict(item)
    if isinstance(mapped.get("event"), dict):
        mapped["event"] = _map_event(mapped["event"], convert)
    field = EFFECT_PAYLOAD_FIELDS.get(str(mapped.get("kind")))
    if field is not None and mapped.get(field) is not None:
        mapped[field] = convert(mapped[field])
    return mapped


def _map_event(event: dict[str, Any], convert: Any) -> dict[str, Any]:
    mapped = dict(event)
    for name in EVENT_PAYLOAD_FIELDS:
        if mapped.get(name) is not None:
            mapped[name] = convert(mapped[name])
    return mapped


def _map_input(raw: dict[str, Any], convert: Any) -> dict[str, Any]:
    mapped = dict(raw)
    if isinstance(mapped.get("event"), dict):
        mapped["event"] = _map_event(mapped["event"], convert)
    if mapped.get("data") is not None:
        mapped["data"] = convert(mapped["data"])
    return mapped


# ---- settings and their check --------------------------------------------------------------

_DEFAULT_PATH = "statecharts.policies.codecs.JSONCodec"


def check(configured: Mapping[str, Any]) -> list[CheckMessage]:
    """``manage.py check``: the writing codec must work now (an error: every step would
    fail); another registered codec that cannot be loaded is a warning (rows written with
    it are snoozed or left pending until it can)."""
    codecs = configured.get("PAYLOAD_CODECS", default("PAYLOAD_CODECS"))
    label = "STATECHARTS['PAYLOAD_CODECS']"
    if not isinstance(codecs, Mapping) or not all(
        isinstance(k, str) and 0 < len(k) <= 40 and isinstance(v, str) for k, v in codecs.items()
    ):
        return [
            Error(
                f"{label} must be a dict of name (at most 40 characters: it is stored on "
                "rows) -> dotted path of a codec class.",
                id="statecharts.E025",
            )
        ]
    chosen = configured.get("PAYLOAD_CODEC", default("PAYLOAD_CODEC"))
    problems: list[CheckMessage] = []
    if chosen not in codecs:
        problems.append(
            Error(
                f"STATECHARTS['PAYLOAD_CODEC'] ({chosen!r}) is not a name in {label}.",
                hint=f"Names: {', '.join(sorted(codecs))}.",
                id="statecharts.E021",
            )
        )
    for name in codecs:
        try:
            codec = resolve(name)
        except CodecUnavailable as exc:
            message = f"{label}[{name!r}]: {exc}"
            if name == chosen:
                problems.append(Error(message, id="statecharts.E022"))
            else:
                problems.append(
                    Warning(
                        message,
                        hint="Timers whose rows name it are snoozed and outbox messages wait "
                        "until it can be loaded here.",
                        id="statecharts.W020",
                    )
                )
            continue
        if isinstance(codec, EncryptingCodec):
            problems.extend(_check_keys(configured, name == chosen, codec))
    return problems


def _check_keys(
    configured: Mapping[str, Any], writes: bool, codec: EncryptingCodec
) -> list[CheckMessage]:
    keys = configured.get("PAYLOAD_KEYS", default("PAYLOAD_KEYS"))
    label = "STATECHARTS['PAYLOAD_KEYS']"
    if not isinstance(keys, list | tuple) or not all(
        isinstance(k, Mapping) and isinstance(k.get("id"), str) and k.get("id") for k in keys
    ):
        return [
            Error(f"{label} must be a list of {{'id': ..., 'key': ...}}.", id="statecharts.E023")
        ]
    problems: list[CheckMessage] = []
    for entry in keys:
        try:
            codec._fernet(entry["id"], entry.get("key"))
        except CodecUnavailable as exc:
            problems.append(Error(f"{label}: {exc}", id="statecharts.E023"))
    if not keys:
        message = f"{label} is empty: the encrypting codec has no key."
        if writes:
            problems.append(Error(message, id="statecharts.E024"))
        else:
            problems.append(
                Warning(message, hint="Rows it wrote are snoozed or wait.", id="statecharts.W021")
            )
    return problems
