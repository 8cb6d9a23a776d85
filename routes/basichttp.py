"""The Basic HTTP Event I/O Processor (W3C SCXML Appendix C.2), the wire half: no Django here.

Outbound, a ``<send type="http://www.w3.org/TR/scxml/#BasicHTTPEventProcessor">`` (or its short
name ``basichttp``) becomes one HTTP ``POST`` to the send's target:

- the body is ``application/x-www-form-urlencoded`` (the encoding C.2 names as the default);
- the event name goes in the field ``_scxmleventname`` (C.2.2), the namelist and ``<param>``
  values as fields of their own (a non-string value as its JSON text);
- ``<content>`` is the body itself: its text (JSON for a non-string value), percent-encoded as
  one bare form value, with the event name (if any) in the query string's ``_scxmleventname``.

Because ``targetexpr`` can come from event data, the target must be on an allow-list of
schemes and hosts (deny by default: an empty list allows nothing), which the route checks
while the ``<send>`` executes (off the list: ``error.execution``; no target at all:
``error.communication``, W3C test 577). The request has a timeout, reads at most a capped
number of response bytes, follows redirects only onto the allow-list (and at most a few), and
ignores proxy settings from the environment. A non-2xx answer, a refused redirect, a timeout or
a network error fails the delivery (``error.communication`` with the send id, in the sender).
Two failures prove that no byte of the request left: the connection was refused, or the host
name did not resolve. Those raise :class:`NotPosted` (a ``routes.base.NotSent``), which the
route's retry policy may retry under the same key (docs/routes.md); every other failure (a
timeout, a reset, an answer) may have reached the target, and is never retried.

Inbound, :func:`decode_post` turns a received ``POST`` into the external event it raises
(C.2.1): named by a single ``_scxmleventname`` (query string or form field), else
``HTTP.POST``; every other field in ``_event.data``; the message as received in
``_event.raw``; the sender's address in ``_event.origin`` when it names one in the
``SCXML-Origin`` header (HTTP has no other place for it; it is the sender's word, never a
credential). ``routes.inbound`` is the Django view that uses it; the conformance runner's
loopback server uses it too.
"""

from __future__ import annotations

import json
import re
import socket
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

from routes.base import NotSent, Route, RouteConfig, RouteMessage
from statecharts.core.host import ROUTE_OK, RouteAnswer, RouteVerdict

BASICHTTP_TYPE = "http://www.w3.org/TR/scxml/#BasicHTTPEventProcessor"
BASICHTTP_SHORT = "basichttp"
BASICHTTP_TYPES = (BASICHTTP_TYPE, BASICHTTP_SHORT)
EVENT_NAME_FIELD = "_scxmleventname"
FORM_TYPE = "application/x-www-form-urlencoded"
# The name of an event posted without _scxmleventname: the HTTP method's (C.2.1).
METHOD_EVENT = "HTTP.POST"
# The request header a sender may name its own address in (where to answer): the received
# event's _event.origin (C.2: "the URL of the sender, if known"). HTTP itself carries no such
# address, so it is known only when the sender says it. Never a credential: anyone can write
# any value there, so a receiver never decides who may do what by it.
ORIGIN_HEADER = "SCXML-Origin"
ORIGIN_MAX_LENGTH = 2048  # (statecharts.policies.validation.EVENT_FIELD_MAX_LENGTH)
ORIGIN_SCHEMES = ("http", "https")

# The route's options (settings OPTIONS; none of them may be overridden by a scope: an
# execution widening its own allow-list would defeat it).
DEFAULT_OPTIONS: Mapping[str, Any] = {
    "allowed_schemes": ("https",),  # http only where a host says so (tests: loopback)
    "allowed_hosts": (),  # deny by default; "example.org", "*.example.org", "host:port"
    "timeout_seconds": 5.0,  # per socket operation (connect, each read)
    "max_request_bytes": 64 * 1024,  # the body this side sends
    "max_response_bytes": 64 * 1024,  # read at most this much of an answer, then hang up
    "max_redirects": 3,  # each one must land on the allow-list too
}
LOOPBACK_OPTIONS: Mapping[str, Any] = {
    **DEFAULT_OPTIONS,
    "allowed_schemes": ("http", "https"),
    "allowed_hosts": ("127.0.0.1", "localhost", "[::1]"),
}


class DeliveryFailed(Exception):
    """The POST did not reach its target, or the target refused it (error.communication)."""


class NotPosted(DeliveryFailed, NotSent):
    """The POST provably never left: the connection was refused, or the host name did not
    resolve (raised ``from`` that error). A retry cannot deliver it twice."""


# The errors urllib reports before any byte of a request is written: connect() refused
# (ECONNREFUSED comes only from connect) and the name lookup that precedes it.
NOT_SENT_ERRORS: tuple[type[BaseException], ...] = (ConnectionRefusedError, socket.gaierror)


class BadInbound(ValueError):
    """A received message that cannot become an event (the view answers 400 with ``reasons``)."""

    def __init__(self, reasons: Sequence[str]) -> None:
        super().__init__("; ".join(reasons))
        self.reasons = list(reasons)


# ---- the allow-list ----------------------------------------------------------------------------


def _host_port(host: str, port: int | None) -> tuple[str, str]:
    host = host.lower().rstrip(".")
    shown = f"[{host}]" if ":" in host else host  # an IPv6 literal, as written in a URL
    return shown, f"{shown}:{port}" if port is not None else shown


def target_verdict(config: Mapping[str, Any], target: str | None) -> RouteAnswer:
    """Whether a POST may go to ``target`` under ``config``, decided from the text alone (no
    I/O: it runs inside the step, and its answer is recorded with it)."""
    if target is None or not target.strip():
        return RouteAnswer(RouteVerdict.UNREACHABLE, "a Basic HTTP send needs a target URL")
    try:
        parts = urlsplit(target)
        port = parts.port
    except ValueError as exc:
        return RouteAnswer(RouteVerdict.INVALID, f"not a URL ({exc})")
    schemes = tuple(config.get("allowed_schemes") or ())
    if parts.scheme.lower() not in schemes:
        allowed = ", ".join(schemes) or "none"
        return RouteAnswer(
            RouteVerdict.INVALID, f"scheme {parts.scheme!r} is not allowed (allowed: {allowed})"
        )
    if not parts.hostname:
        return RouteAnswer(RouteVerdict.INVALID, "the URL names no host")
    if parts.username is not None or parts.password is not None:
        return RouteAnswer(RouteVerdict.INVALID, "credentials in the URL are not accepted")
    host, host_and_port = _host_port(parts.hostname, port)
    if not host_allowed(config, host, host_and_port):
        return RouteAnswer(RouteVerdict.INVALID, f"host {host_and_port!r} is not on the allow-list")
    return ROUTE_OK


def host_allowed(config: Mapping[str, Any], host: str, host_and_port: str) -> bool:
    for entry in config.get("allowed_hosts") or ():
        entry = str(entry).lower()
        if entry in (host, host_and_port):
            return True
        if entry.startswith("*.") and host.endswith(entry[1:]) and host != entry[2:]:
            return True
    return False


# ---- outbound ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Request:
    """One outbound POST, built from a send (plain data; :func:`post` performs it)."""

    url: str
    body: bytes
    content_type: str = FORM_TYPE


def _field_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def build_request(
    target: str, name: str | None, data: Any, payload: str | None, key: str | None = None
) -> Request:
    """The POST for one send (C.2.2). ``payload`` says what ``data`` is: ``"content"`` (the
    body), ``"params"`` (namelist and ``<param>`` fields) or None (nothing but the name)."""
    fields: list[tuple[str, str]] = []
    if payload == "content":
        # Percent-encoded as one bare form value (spaces as %20, which every form decoder
        # reads; W3C test 520 looks for exactly that in the receiver's _event.raw).
        body = quote(_field_text(data), safe="") if data is not None else ""
        url = target
        if name:
            url += ("&" if urlsplit(target).query else "?") + urlencode({EVENT_NAME_FIELD: name})
        return Request(url, body.encode("ascii"))
    if name:
        fields.append((EVENT_NAME_FIELD, name))
    if isinstance(data, Mapping):
        fields.extend((str(k), _field_text(v)) for k, v in data.items())
    elif data is not None:
        raise DeliveryFailed(f"params must be name/value pairs, not {type(data).__name__}")
    return Request(target, urlencode(fields).encode("ascii"))


class _AllowListRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only onto the allow-list, and at most ``max_redirects`` times."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = config
        self.max_redirections = int(config.get("max_redirects", 0))
        self.max_repeats = self.max_redirections

    def redirect_request(  # type: ignore[no-untyped-def]
        self, req, fp, code, msg, headers, newurl
    ):
        if self.max_redirections <= 0:
            raise DeliveryFailed(f"redirected ({code}) and redirects are not followed")
        answer = target_verdict(self.config, newurl)
        if answer.verdict is not RouteVerdict.OK:
            raise DeliveryFailed(f"redirected ({code}) off the allow-list: {answer.reason}")
        if code in (307, 308):  # the method and body kept, as those codes say
            return urllib.request.Request(
                newurl, data=req.data, headers=dict(req.header_items()), method="POST"
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def post(config: Mapping[str, Any], request: Request, key: str | None = None) -> int:
    """Perform ``request``; return the HTTP status. Raises :class:`DeliveryFailed` for
    anything but a 2xx answer (after allowed redirects)."""
    answer = target_verdict(config, request.url)
    if answer.verdict is not RouteVerdict.OK:  # (checked in the step too; a row may be old)
        raise DeliveryFailed(answer.reason)
    limit = int(config.get("max_request_bytes", DEFAULT_OPTIONS["max_request_bytes"]))
    if len(request.body) > limit:
        raise DeliveryFailed(f"the request body is {len(request.body)} bytes (at most {limit})")
    headers = {"Content-Type": request.content_type, "User-Agent": "django-statecharts"}
    if key is not None:  # lets a receiver drop a repeat (the route owes at-most-once)
        headers["Idempotency-Key"] = key
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}),  # never an environment proxy
        _AllowListRedirects(config),
    )
    outgoing = urllib.request.Request(request.url, data=request.body, headers=headers)
    timeout = float(config.get("timeout_seconds", DEFAULT_OPTIONS["timeout_seconds"]))
    cap = int(config.get("max_response_bytes", DEFAULT_OPTIONS["max_response_bytes"]))
    try:
        with opener.open(outgoing, timeout=timeout) as response:
            response.read(cap)  # the answer is not used; at most ``cap`` bytes are taken
            return int(response.status)
    except urllib.error.HTTPError as exc:
        exc.close()
        raise DeliveryFailed(f"the target answered {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, NOT_SENT_ERRORS):
            raise NotPosted(f"the POST was not sent: {reason}") from reason
        raise DeliveryFailed(f"the POST failed: {reason}") from None


class BasicHTTPRoute(Route):
    """The route a host registers for the Basic HTTP types (docs/basichttp.md)::

        STATECHARTS = {"ROUTES": {"basichttp": {
            "ROUTE": "routes.basichttp.BasicHTTPRoute",
            "TYPES": ["http://www.w3.org/TR/scxml/#BasicHTTPEventProcessor", "basichttp"],
            "OPTIONS": {"allowed_hosts": ["hooks.example.org"]},
        }}}

    ``check`` decides from the target's text in the step; ``deliver`` POSTs after it."""

    types = BASICHTTP_TYPES
    overridable: ClassVar[frozenset[str]] = frozenset()  # no scope may widen the allow-list
    default_options: ClassVar[Mapping[str, Any]] = DEFAULT_OPTIONS

    def check(self, config: RouteConfig, send_type: str, target: str | None) -> RouteAnswer:
        return target_verdict(config, target)

    def deliver(self, config: RouteConfig, message: RouteMessage, key: str) -> None:
        assert message.target is not None  # (check refused a send without one)
        request = build_request(message.target, message.name or None, message.data, message.payload)
        post(config, request, key)


class MemoryBasicHTTP:
    """The same route for ``MemoryDriver(routes={"basichttp": MemoryBasicHTTP(...)})``.

    ``after_post`` runs on the driver's thread once a POST was answered: a host that receives
    its own posts (the conformance runner's loopback server) hands what arrived to the driver
    there, so an event posted to oneself is queued before the sends that follow it."""

    types = BASICHTTP_TYPES

    def __init__(
        self,
        options: Mapping[str, Any] | None = None,
        after_post: Any = None,
    ) -> None:
        self.config: dict[str, Any] = {**DEFAULT_OPTIONS, **(options or {})}
        self.after_post = after_post
        self.sent: list[tuple[str, str]] = []  # (url, key) of every POST answered 2xx

    def check(self, send_type: str, target: str | None) -> RouteAnswer:
        return target_verdict(self.config, target)

    def deliver(self, session: Any, instruction: Any, key: str) -> None:
        target, event = instruction.target, instruction.event
        payload = instruction.effect.data.get("payload") if instruction.effect else None
        request = build_request(target.address, _sent_name(event), event.data, payload)
        try:
            post(self.config, request, key)
            self.sent.append((request.url, key))
        finally:
            if self.after_post is not None:
                self.after_post()


def _sent_name(event: Any) -> str | None:
    # A <send> with no event attribute has the empty name here: nothing to put in the field.
    return event.name or None


# ---- inbound -----------------------------------------------------------------------------------

# What an event name may be: dot-separated tokens of no spaces or controls (spec 3.12.1).
_EVENT_NAME = re.compile(r"[^\s.\x00-\x1f\x7f]+(\.[^\s.\x00-\x1f\x7f]+)*")


@dataclass(frozen=True, slots=True)
class Inbound:
    """The external event a received POST raises (C.2.1)."""

    name: str
    data: Any
    raw: str
    origin: str | None = None  # the sender's address, when it gave one (ORIGIN_HEADER)


def origin_problems(origin: str) -> list[str]:
    """Why ``origin`` (an ``ORIGIN_HEADER`` value) cannot be ``_event.origin``: it must be an
    absolute http(s) URL with a host, no credentials, no whitespace or control characters,
    at most ``ORIGIN_MAX_LENGTH`` characters. Empty: it can."""
    where = f"the {ORIGIN_HEADER} header"
    if len(origin) > ORIGIN_MAX_LENGTH:
        return [f"{where} is longer than {ORIGIN_MAX_LENGTH} characters"]
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in origin):
        return [f"{where} must not contain whitespace or control characters"]
    try:
        parts = urlsplit(origin)
        parts.port  # noqa: B018 (a bad port raises here)
    except ValueError as exc:
        return [f"{where} is not a URL ({exc})"]
    if parts.scheme.lower() not in ORIGIN_SCHEMES or not parts.hostname:
        return [f"{where} must be an absolute http or https URL"]
    if parts.username is not None or parts.password is not None:
        return [f"{where} must not carry credentials"]
    return []


def _text(body: bytes) -> str:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInbound(["the body is not UTF-8 text"]) from None


def _form_data(body: str) -> Any:
    """Form fields as a dict; a body that is one bare value (``<content>`` as this processor
    sends it) as that value (JSON text read back as its value)."""
    if not body:
        return None
    if "=" not in body and "&" not in body:
        text = parse_qsl("=" + body, keep_blank_values=True)[0][1]
        try:
            return json.loads(text)
        except ValueError:
            return text
    fields: dict[str, Any] = {}
    for name, value in parse_qsl(body, keep_blank_values=True, strict_parsing=True):
        fields.setdefault(name, []).append(value)
    return {name: values[0] if len(values) == 1 else values for name, values in fields.items()}


def decode_post(
    *,
    path: str,
    query: str,
    content_type: str | None,
    body: bytes,
    reserved: Sequence[str] = ("error", "done"),
    origin: str | None = None,
) -> Inbound:
    """The event a ``POST`` raises (C.2.1). ``path`` is what ``_event.raw``'s request line shows
    (the receiver passes it with its capability token already masked); ``origin`` is the
    request's ``ORIGIN_HEADER`` (the sender's address, for ``_event.origin``; shown in
    ``_event.raw`` too). Raises :class:`BadInbound` with every reason for anything that cannot
    be an event."""
    if origin is not None:
        origin = origin.strip() or None
    if origin is not None:
        problems = origin_problems(origin)
        if problems:
            raise BadInbound(problems)
    text = _text(body)
    media = (content_type or "").split(";", 1)[0].strip().lower()
    try:
        names = [v for k, v in parse_qsl(query, keep_blank_values=True) if k == EVENT_NAME_FIELD]
        if media in (FORM_TYPE, ""):  # (no type: C.2's default encoding)
            data = _form_data(text)
        elif media == "application/json":
            data = json.loads(text) if text else None
        elif media == "text/plain":
            data = text or None
        else:
            raise BadInbound([f"content type {media!r} is not accepted (form, JSON or text)"])
    except RecursionError:  # (a JSON body nested deeper than the parser's stack)
        raise BadInbound([f"the body is nested too deeply to read as {media}"]) from None
    except ValueError as exc:
        if isinstance(exc, BadInbound):
            raise
        raise BadInbound([f"the body cannot be read as {media or 'a form'}: {exc}"]) from None
    if isinstance(data, dict) and EVENT_NAME_FIELD in data:
        found = data.pop(EVENT_NAME_FIELD)
        names.extend(found if isinstance(found, list) else [found])
        data = data or None
    if len(names) > 1:
        raise BadInbound([f"{EVENT_NAME_FIELD} is given {len(names)} times (at most once)"])
    name = names[0] if names else METHOD_EVENT
    problems = event_name_problems(name, reserved)
    if problems:
        raise BadInbound(problems)
    head = f"POST {path} HTTP/1.1\r\n"
    if content_type:
        head += f"Content-Type: {content_type}\r\n"
    if origin is not None:
        head += f"{ORIGIN_HEADER}: {origin}\r\n"
    raw = f"{head}Content-Length: {len(body)}\r\n\r\n{text}"
    return Inbound(name, data, raw, origin)


def event_name_problems(name: str, reserved: Sequence[str]) -> list[str]:
    if not _EVENT_NAME.fullmatch(name):
        return [f"{EVENT_NAME_FIELD} {name[:80]!r} is not an event name"]
    root = name.split(".", 1)[0]
    if root in reserved:
        return [f"event name {name[:80]!r} is reserved for the platform ({root}.*)"]
    return []
