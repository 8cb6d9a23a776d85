"""The Basic HTTP address's token (``routes.inbound``): signed by Django's signing framework
under a salt of its own (:data:`SALT`) over the execution's session id and the secret nonce
stored with it (``routes.models.InboundAddress``; ``routes.addresses`` rotates it)."""

from __future__ import annotations

import secrets

from django.core import signing

from routes.basichttp import BASICHTTP_SHORT, BASICHTTP_TYPE

# Django's signing salt for these addresses: a token signed for any other purpose of the site
# (a password reset, a session cookie) never verifies here, nor one of these anywhere else.
SALT = "statecharts.routes.basichttp.inbound"


def new_nonce() -> str:
    """A fresh secret for an address (256 random bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def token_for(session_id: str, nonce: str | None = None) -> str:
    """The capability token for an execution's session id and address nonce: URL-safe, and
    the same for the same nonce (no timestamp: the address lives until it is rotated).
    Without a nonce: the token of an address minted before nonces existed."""
    if nonce is None:
        return signing.Signer(salt=SALT).sign_object(session_id)
    return signing.Signer(salt=SALT).sign_object([session_id, nonce])


def address_of(token: str) -> tuple[str, str | None] | None:
    """The (session id, nonce) a token names (nonce None: an address minted before nonces
    existed), or None if this site did not sign it (under SALT)."""
    try:
        value = signing.Signer(salt=SALT).unsign_object(token)
    except (signing.BadSignature, ValueError):
        return None
    if isinstance(value, str):
        return value, None
    if isinstance(value, list) and len(value) == 2 and all(isinstance(part, str) for part in value):
        return value[0], value[1]
    return None


def session_of(token: str) -> str | None:
    """The session id a token names, or None if this site did not sign it (under SALT)."""
    address = address_of(token)
    return None if address is None else address[0]


def location(base_url: str, session_id: str, nonce: str | None = None) -> str:
    """The Basic HTTP address of a session: ``base_url`` (where the view is mounted) and its
    token."""
    return f"{base_url.rstrip('/')}/{token_for(session_id, nonce)}/"


def io_processors(base_url: str, session_id: str, nonce: str | None = None) -> dict[str, str]:
    """The ``_ioprocessors`` entries of the processor: under its URI and its short name (in
    :func:`canonical` order)."""
    where = location(base_url, session_id, nonce)
    return canonical({BASICHTTP_TYPE: where, BASICHTTP_SHORT: where})


def canonical(entries: dict[str, str]) -> dict[str, str]:
    """``entries`` in the order PostgreSQL's ``jsonb`` keeps an object's keys (shorter first,
    then by their UTF-8 bytes). The start and readdress inputs are recorded in a JSON column,
    and replay feeds them back as read: the order the step saw must be the one replay reads,
    or the position (which keeps ``_ioprocessors`` in order) would differ."""
    return dict(sorted(entries.items(), key=lambda item: (len(item[0].encode()), item[0].encode())))
