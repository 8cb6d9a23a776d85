"""The Basic HTTP Event I/O Processor's inbound door: a Django view the host mounts.

A ``POST`` to an execution's Basic HTTP address becomes one external event of that execution
(W3C SCXML C.2.1), fed through the stepper's public API (``stepper.feed``), recorded in its
history like any other input. The address is a capability: its last path segment is a token
signed by Django's signing framework under a salt of its own (:data:`SALT`), naming the
execution's session id. Nobody can post into an execution they were not given the address of,
and rotating ``SECRET_KEY`` (with the old key in ``SECRET_KEY_FALLBACKS``) keeps existing
addresses working until the fallback is dropped. Answers:

- 204: the event was applied (or its ``Idempotency-Key`` repeated one already applied);
- 400: the body or the event name cannot be an event (the reasons are listed); reserved names
  (``STATECHARTS["RESERVED_EVENT_PREFIXES"]``: ``error.*``, ``done.*``) are refused here, and
  so is an ``SCXML-Origin`` header that is not an absolute http(s) URL;

``_event.origintype`` is the processor's URI; ``_event.origin`` is the sender's address when
it gives one in the ``SCXML-Origin`` header (C.2: "the URL of the sender, if known"; HTTP has
no other place for it), else unset. It is what the sender says, not who it is: nothing here
decides anything by it, and a chart that answers to it goes through the outbound allow-list
like any other target.
- 403: the token is not one this site signed under this salt (forged, cut, or another
  signer's token replayed here), or not the execution's current address (rotated); or the
  event is one ``EVENT_PERMISSIONS`` protects (the address is a capability for the
  execution, not a user: ``authorization.decide_capability``);
- 404: the token is genuine but its execution no longer exists (deleted);
- 405: not a POST;
- 409: the execution finished (or cannot take inputs now: halted, needs migration/repair,
  a chart whose stored source no longer compiles: it is marked needs repair),
  or the idempotency key was used before for a different message; nothing is applied;
- 413: the body is larger than ``max_body_bytes`` (it is not read);
- 429: more than ``max_posts_per_minute`` posts to one execution this minute (the cache
  keeps the count; the clock is ``STATECHARTS["CLOCK"]``).

Mount it and give executions their address when starting them::

    urlpatterns = [path("scxml/basichttp/", include("routes.inbound"))]

    execution = routes.inbound.start(chart, base_url="https://example.org/scxml/basichttp/")
"""

from __future__ import annotations

import uuid
from typing import Any

from django.core.cache import cache
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import path
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.csrf import csrf_exempt

from routes import addresses
from routes.basichttp import (
    BASICHTTP_TYPE,
    ORIGIN_HEADER,
    BadInbound,
    decode_post,
)
from routes.tokens import (
    SALT,
    address_of,
    io_processors,
    location,
    new_nonce,
    session_of,
    token_for,
)
from statecharts import stepper
from statecharts.conf import statecharts_settings
from statecharts.exceptions import printable
from statecharts.models import Chart, Execution
from statecharts.policies import refusals
from statecharts.statuses import TABLE

MASK = "<token>"  # what _event.raw shows instead of the token (the receiver's own capability)
IDEMPOTENCY_KEY_MAX = 200
DOOR = "a Basic HTTP address"  # (what a refusal calls this door)


def start(
    chart: Chart, *, base_url: str, session_id: str | None = None, **kwargs: Any
) -> Execution:
    """``stepper.start`` with the execution's Basic HTTP address in its ``_ioprocessors`` (the
    address is part of the start input, so replay sees the same), its secret nonce stored
    (``routes.models.InboundAddress``)."""
    session_id = session_id or uuid.uuid4().hex
    request = stepper.StartRequest(chart=chart, session_id=session_id, **kwargs)
    execution = stepper.start_internal(
        request, io_processors=io_processors(base_url, session_id, new_nonce())
    ).execution
    # From the committed position, not the nonce minted above: a start that repeated an
    # earlier one's idempotency key returns that execution, with its own address.
    addresses.remember(execution)
    return execution


def _answer(code: int, detail: str, **extra: Any) -> JsonResponse:
    return JsonResponse({"detail": detail, **extra}, status=code)


def _refused(refused: refusals.Refusal, pk: int) -> JsonResponse:
    """A refusal as this door answers it (``statecharts.policies.refusals``: its ``inbound``
    status)."""
    row = refused.row
    if row.reason is refusals.Reason.INVALID_INPUT:
        return _answer(row.inbound, "the message cannot be an event", reason=row.reason,
                       reasons=refused.lines())
    if row.reason is refusals.Reason.NOT_PERMITTED:
        return _answer(row.inbound, "this event cannot be sent to a Basic HTTP address",
                       reason=row.reason, reasons=refused.lines())
    status = refused.status
    if not status:  # the execution's status now (a refusal may have changed it)
        now = Execution.objects.filter(pk=pk).values_list("status", flat=True)
        status = next(iter(now), "")
    body = {**refused.body(), "status": status}
    return JsonResponse(body, status=row.inbound)


@method_decorator(csrf_exempt, name="dispatch")  # posted by other systems, never by a form
class BasicHTTPInbound(View):
    """Turns a POST into an external event of the execution the token names (module doc)."""

    http_method_names = ["post"]
    max_body_bytes = 64 * 1024
    max_posts_per_minute = 600

    def post(self, request: HttpRequest, token: str) -> HttpResponse:
        address = address_of(token)
        if address is None:
            return _answer(403, "not a Basic HTTP address of this site")
        session_id, nonce = address
        length = request.META.get("CONTENT_LENGTH") or "0"
        if not length.isdigit():
            return _answer(400, "bad Content-Length")
        if int(length) > self.max_body_bytes:
            return _answer(413, f"the body is larger than {self.max_body_bytes} bytes")
        execution = (
            Execution.objects.filter(session_id=session_id)
            .select_related("chart")
            .only("pk", "status", "chart__name")
            .first()
        )
        if execution is None:
            return _answer(404, "the execution no longer exists")
        if not addresses.is_current(execution, nonce):
            return _answer(403, "not the execution's current address (it was rotated)")
        if TABLE[execution.status].finished:
            finished = refusals.discarded(f"the execution is {execution.status}", execution.status)
            return _refused(finished, execution.pk)
        if self._over_rate(session_id):
            return _answer(429, f"more than {self.max_posts_per_minute} posts this minute")
        body = request.read(self.max_body_bytes + 1)
        if len(body) > self.max_body_bytes:
            return _answer(413, f"the body is larger than {self.max_body_bytes} bytes")
        try:
            inbound = decode_post(
                path=request.path.replace(token, MASK),
                query=request.META.get("QUERY_STRING", ""),
                content_type=request.META.get("CONTENT_TYPE"),
                body=body,
                reserved=(),  # the stepper's gate refuses reserved names, as at every door
                origin=request.headers.get(ORIGIN_HEADER),
            )
        except BadInbound as exc:
            return _answer(400, "the message cannot be an event", reason="invalid_input",
                           reasons=[printable(reason) for reason in exc.reasons])
        key = request.headers.get("Idempotency-Key")
        # The address is a capability for this execution, not a user: an event that
        # EVENT_PERMISSIONS protects cannot come in here (docs/basichttp.md). _event.origin:
        # the sender's own word (its SCXML-Origin header), recorded with the input like the
        # rest of the event; never used to decide anything here.
        fields = {"origintype": BASICHTTP_TYPE}
        if inbound.origin is not None:
            fields["origin"] = inbound.origin
        event = stepper.EventRequest(
            execution=execution,
            name=inbound.name,
            data=inbound.data,
            fields=fields,
            raw=inbound.raw,
            idempotency_key=f"basichttp:{key}" if key else None,
            capability=DOOR,
            cause={"kind": "basichttp"},
        )
        try:
            result = stepper.submit(event)
        except Exception as exc:  # the refusal table says what each refusal answers
            refused = refusals.refusal(exc)
            if refused is None:
                raise
            return _refused(refused, execution.pk)
        if not result.applied:
            now = result.execution.status
            return _refused(
                refusals.discarded(f"the input was {result.disposition}", now), execution.pk
            )
        return HttpResponse(status=204)

    def _over_rate(self, session_id: str) -> bool:
        minute = int(statecharts_settings.now().timestamp() // 60)
        key = f"statecharts:basichttp:{session_id}:{minute}"
        cache.add(key, 0, timeout=120)
        try:
            count = cache.incr(key)
        except ValueError:  # evicted between add and incr: count this one as the first
            cache.set(key, 1, timeout=120)
            count = 1
        return count > self.max_posts_per_minute


urlpatterns = [path("<str:token>/", BasicHTTPInbound.as_view(), name="basichttp-inbound")]

__all__ = [
    "SALT",
    "BasicHTTPInbound",
    "address_of",
    "io_processors",
    "location",
    "new_nonce",
    "session_of",
    "start",
    "token_for",
    "urlpatterns",
]
