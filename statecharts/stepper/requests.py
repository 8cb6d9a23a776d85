"""What a door hands the stepper: one request object per thing asked (docs/embedding.md).

Every door data comes in through (the REST API, the admin's forms, ``manage.py statechart``,
the Basic HTTP inbound view, an invoke handler's answer, the Python API) builds one of these
and gives it to :func:`statecharts.stepper.submit`. The stepper's gate
(``statecharts.stepper.gate``) checks it once, against the rules of
``statecharts.policies.validation``, before anything is written: a door does not call the rules
itself. What the gate refuses is an ``InvalidInput`` naming every bad path; what the
execution refuses is one of the ``StepRefused`` family; ``statecharts.policies.refusals`` says what
each door answers for each.

A value a door read as text (a form field, a command option, a form-encoded API body) is
given as :class:`JSONText`: the gate reads it strictly (no ``NaN``, never a
``RecursionError``) and names the field in its refusal.

Who and why: ``user`` (checked by ``statecharts.policies.authorization``: a user who may not is
refused with ``NotPermitted``, nothing written; the history records who), ``caller_context``
(opaque JSON saying who or what asked, ``statecharts.policies.attribution``), ``reason`` (a
cancel's),
``cause`` (what caused an input). A request is a value: build a new one rather than change
one handed over (they are not frozen only because a frozen dataclass costs three times as
much to build, on every event). Without a user the caller is trusted code (no permission
check), except an event request with a ``capability`` (a door that holds an address, not a
user: an event ``EVENT_PERMISSIONS`` protects cannot come in through it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from statecharts.models import Chart, Execution


@dataclass(frozen=True, slots=True)
class JSONText:
    """JSON a door has as text (a form field, an option): the gate reads it strictly."""

    text: str | bytes


@dataclass(slots=True, kw_only=True)
class StartRequest:
    """Start an execution of ``chart`` and run it to its first stable configuration.

    ``data``: initial values of the chart's top-level ``<data>`` ids (the tagged encoding's
    data tags only); with ``declared_only`` (the API's and the admin's), an id the chart does
    not declare is refused. ``business_key``: unique per chart. ``metadata``: opaque JSON
    object. ``session_id``: 1 to 64 of ``[A-Za-z0-9_-]`` (else a uuid4 hex is minted).
    ``subject``: the saved model instance it is about. ``idempotency_key``: a retried start
    with the same key returns the first one's execution. ``tracing``: keep the core's trace
    effects in the history."""

    chart: Chart
    data: Any = None
    business_key: str | None = None
    metadata: Any = None
    session_id: str | None = None
    subject: Any = None
    caller_context: Any = None
    idempotency_key: str | None = None
    user: Any = None
    now: datetime | None = None
    tracing: bool = False
    declared_only: bool = False


@dataclass(slots=True, kw_only=True)
class EventRequest:
    """Feed one external event named ``name`` (never a reserved name: ``error.*``,
    ``done.*``) with ``data`` (a chart value) to ``execution``.

    ``fields``: the event's optional fields (``sendid``, ``origin``, ``origintype``,
    ``invokeid``). ``raw``: the message as it arrived (``_event.raw``; the inbound view's).
    ``capability``: the door's name when it holds a capability for this execution instead of
    a user (``"a Basic HTTP address"``). ``cause``: what caused it (``{"kind": "basichttp"}``).
    ``strict``: refuse the event (``EventUnhandled``) when no transition takes it; None: the
    ``STRICT_EVENTS`` setting.
    """

    execution: Execution | int
    name: Any
    data: Any = None
    fields: Mapping[str, Any] = field(default_factory=dict)
    raw: str | None = None
    caller_context: Any = None
    idempotency_key: str | None = None
    user: Any = None
    capability: str | None = None
    cause: dict[str, Any] | None = None
    now: datetime | None = None
    strict: bool | None = None


@dataclass(slots=True, kw_only=True)
class CancelRequest:
    """Stop ``execution`` from outside: its onexit handlers run, then it is ``cancelled``.
    ``reason``: why, in the caller's words (recorded with the input)."""

    execution: Execution | int
    reason: str | None = None
    caller_context: Any = None
    idempotency_key: str | None = None
    user: Any = None
    now: datetime | None = None


@dataclass(slots=True, kw_only=True)
class AnswerRequest:
    """An invoke handler's (or a route's) answer to ``execution``, applied once per ``key``.

    ``kind``: ``done`` (-> ``done.invoke.<invokeid>``), ``failed`` (->
    ``error.communication.invoke.<invokeid>``) or ``event`` (an event named ``name``, never a
    reserved one). ``data`` comes from outside (a task's return value, a callback's body): it
    is checked as a chart value."""

    execution: Execution | int
    kind: str
    invokeid: str
    key: str
    name: str | None = None
    data: Any = None
    caller_context: Any = None
    cause: dict[str, Any] | None = None
    now: datetime | None = None


Request = StartRequest | EventRequest | CancelRequest | AnswerRequest


# ---- requests that ask for no step: the gate alone (``statecharts.stepper.admit``) -------------


@dataclass(slots=True, kw_only=True)
class CallerContextRequest:
    """Who asks, as a door knows it (``statecharts.policies.attribution``): its ``door``
    (``"api"``, ``"admin"``, ``"command"``), the HTTP request's ``headers`` (a request id, a
    ``traceparent``, the caller's own ``CALLER_CONTEXT_HEADER``) or a command's ``given`` text
    (``--caller-context``), and the ``user`` who acts. The gate returns the caller context the
    history records, or refuses a bad header or option (an ``InvalidInput`` naming it)."""

    door: str
    headers: Mapping[str, str] | None = None
    given: str | None = None
    user: Any = None


@dataclass(slots=True, kw_only=True)
class ChartLoadRequest:
    """Store a chart under ``name`` and ``version`` (``Chart.objects.load``, the API's and the
    admin's chart forms, ``statechart load``): each must fit its column, without a NUL or a
    lone surrogate. ``name`` is the one the chart gets: the caller's, else the document's
    ``<scxml name>``."""

    name: Any = ""
    version: Any = ""


@dataclass(slots=True, kw_only=True)
class ChartLookupRequest:
    """Find a chart by ``reference`` (a name, ``NAME@VERSION``): text its columns could hold."""

    reference: Any


@dataclass(slots=True, kw_only=True)
class ImportRequest:
    """An exported execution written here (``statecharts.operations.transfer``): the
    document's session id, business key and metadata, checked against their columns and the
    bounds of JSON from outside."""

    session_id: Any
    business_key: Any = None
    metadata: Any = None


@dataclass(slots=True, kw_only=True)
class ImportedRowRequest:
    """What an app's part of an import writes (``Part.load``): ``texts`` maps each text
    column of ``model`` to the document's value for it (it must fit the column, no NUL).
    Without a ``model``, each text is bounded by ``max_length`` (a value the app keeps
    elsewhere: the routes app's address base URL); ``blank=False`` refuses blank text."""

    texts: Mapping[str, Any]
    model: Any = None
    max_length: int = 0
    blank: bool = True


@dataclass(slots=True, kw_only=True)
class OperatorRequest:
    """An operator's action an app applies to an execution, recorded with ``reason`` (the
    routes app's address rotation: its API, admin form and action, ``rotate_address``,
    ``routes.addresses.rotate``): the reason is required, not blank, at most ``max_length``
    characters, no NUL; ``caller_context`` a JSON object (or None)."""

    reason: Any
    max_length: int
    caller_context: Any = None


@dataclass(slots=True, kw_only=True)
class MigrationRequest:
    """A chart migration's ``renames`` (old state id to new): the old ids are recorded with
    the migration's history entry, so each is text a row holds (at most 200 characters)."""

    renames: Mapping[str, str]


@dataclass(slots=True, kw_only=True)
class ErasureRequest:
    """Erase personal data (``statecharts.operations.retention.erase``) for ``reason``,
    recorded in the history: at most 1000 characters, no NUL."""

    reason: Any = ""


AdmittedRequest = (
    CallerContextRequest
    | ChartLoadRequest
    | ChartLookupRequest
    | ImportRequest
    | ImportedRowRequest
    | MigrationRequest
    | ErasureRequest
    | OperatorRequest
)

__all__ = [
    "AdmittedRequest",
    "AnswerRequest",
    "CallerContextRequest",
    "CancelRequest",
    "ChartLoadRequest",
    "ChartLookupRequest",
    "ErasureRequest",
    "EventRequest",
    "ImportRequest",
    "ImportedRowRequest",
    "JSONText",
    "MigrationRequest",
    "OperatorRequest",
    "Request",
    "StartRequest",
]
