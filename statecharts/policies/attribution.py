"""Who did it: the caller context of an input, as each door derives it.

A caller context is an opaque JSON object that says where an input came from: a request id,
a W3C trace context, the user who acted, and whatever correlation value the caller sent
itself. It is stored with the input's history entry, carried on what the step schedules or
sends (timer rows, outbox messages, invocation rows) and handed back when those fire, are
delivered or are cancelled, so a request can be followed through every step it caused. It is
row data: never part of a key (a timer's, a message's, an idempotency key's), never read by
chart code.

What each door records (keys absent when unknown)::

    {
        "door": "api" | "admin" | "command",
        "request_id": "...",            # X-Request-ID (API, admin)
        "traceparent": "00-...-...-01", # a valid W3C traceparent header (API, admin)
        "user": {"id": 7, "username": "alice"},   # the authenticated user who acted
        "given": {...},                 # the caller's own value: the X-Caller-Context
                                        # header (API, admin) or --caller-context (command)
    }

The caller's own value is kept apart under ``given``, so a client cannot pass itself off as
another user or request. A door derives the caller context through the stepper's gate (a
``statecharts.stepper.CallerContextRequest`` given to ``stepper.admit``: the rules are
``statecharts.policies.validation``'s ``caller_context`` and ``request_id``), checked like
any JSON from outside, within tighter bounds (``CALLER_CONTEXT_MAX_BYTES``,
``CALLER_CONTEXT_MAX_DEPTH``): a bad one is a 400 (a form error, a ``CommandError``) and
nothing is applied. Python callers pass ``caller_context=`` to ``stepper.start`` / ``send`` /
``cancel`` and it is stored as they gave it (checked as a JSON object).
"""

from __future__ import annotations

import re
from typing import Any

REQUEST_ID_MAX_LENGTH = 200
# W3C Trace Context, version 00: version-traceid-parentid-flags, lowercase hex; an all-zero
# trace id or parent id is invalid.
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}")


class Door:
    API = "api"
    ADMIN = "admin"
    COMMAND = "command"


def traceparent(value: str | None) -> str | None:
    """A valid W3C ``traceparent`` value, or None: an invalid one is ignored, as the Trace
    Context specification says (a new trace starts), not refused."""
    if not value:
        return None
    value = value.strip().lower()
    match = _TRACEPARENT.fullmatch(value)
    if match is None or value.startswith("ff") or set(match[1]) == {"0"} or set(match[2]) == {"0"}:
        return None
    return value


def user_of(user: Any) -> dict[str, Any] | None:
    """The user who acted, as recorded (None for an anonymous or missing user)."""
    if user is None or not getattr(user, "is_authenticated", False):
        return None
    return {"id": user.pk, "username": user.get_username()}


def with_user(context: dict[str, Any] | None, user: Any) -> dict[str, Any] | None:
    """``context`` with the user who acted (``user_of``) under ``"user"``, unless it names
    one already (a door that derived it from the request) or the user is not known."""
    recorded = user_of(user)
    if recorded is None or (context is not None and "user" in context):
        return context
    return {**(context or {}), "user": recorded}


def describe(context: Any) -> str:
    """One line for a page: "alice via admin, request r-1" (never fails on odd data)."""
    if not isinstance(context, dict):
        return ""
    parts: list[str] = []
    user = context.get("user")
    who = user.get("username") if isinstance(user, dict) else None
    door = context.get("door")
    if who and door:
        parts.append(f"{who} via {door}")
    elif who or door:
        parts.append(f"{'via ' if door else ''}{who or door}")
    if context.get("request_id"):
        parts.append(f"request {context['request_id']}")
    if context.get("traceparent"):
        parts.append(f"trace {str(context['traceparent'])[3:35]}")
    if not parts and context:
        parts.append(", ".join(sorted(str(k) for k in context)[:4]))
    return ", ".join(parts)
