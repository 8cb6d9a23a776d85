"""The gate: where every request from outside is checked, once, before anything is written.

A door builds a request (``statecharts.stepper.requests``) and hands it to
``statecharts.stepper.submit``; the gate checks every field of it against the rules of
``statecharts.policies.validation`` (and the apps' start checks, ``register_start_check``),
collecting
every problem into one ``InvalidInput`` naming each bad path, then asks
``statecharts.policies.authorization`` whether the user (or the door's capability) may, and records
who (the caller context gets the user). Only then does the stepper take its lock. No door
calls the rules itself: a new check (a per-chart schema for event data, say) goes here.

What the platform encodes itself (a replayed history, a timer, an outbox row, an invoked
child's params from its parent's datamodel) never comes through here: ``stepper.feed`` and
the internal start trust what they are given.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from statecharts.conf import statecharts_settings
from statecharts.core.events import EXTERNAL, Event
from statecharts.exceptions import InputProblem, InvalidInput
from statecharts.models import Chart, Execution
from statecharts.policies import attribution, authorization, idempotency, subjects, validation
from statecharts.stepper.performing import check_start
from statecharts.stepper.requests import (
    AdmittedRequest,
    AnswerRequest,
    CallerContextRequest,
    CancelRequest,
    ChartLoadRequest,
    ChartLookupRequest,
    ErasureRequest,
    EventRequest,
    ImportedRowRequest,
    ImportRequest,
    JSONText,
    MigrationRequest,
    OperatorRequest,
    StartRequest,
)


def _length(model: Any, column: str) -> int:
    return model._meta.get_field(column).max_length or 0


# The columns a start (or an import) writes text into; a chart's name and version.
BUSINESS_KEY_LENGTH = _length(Execution, "business_key")
SESSION_ID_LENGTH = _length(Execution, "session_id")
CHART_NAME_LENGTH = _length(Chart, "name")
CHART_VERSION_LENGTH = _length(Chart, "version")
# What a migration's renames, an erasure's reason and a cancel's reason are recorded in.
RENAMED_ID_MAX_LENGTH = 200
REASON_MAX_LENGTH = 1000
assert SESSION_ID_LENGTH == validation.SESSION_ID_MAX_LENGTH


class _Problems:
    """Every problem of one request (each rule raises at its first; the request's fields are
    all checked, so one answer lists them all)."""

    __slots__ = ("found",)

    def __init__(self) -> None:
        self.found: list[InputProblem] = []

    def check(self, rule: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return rule(*args, **kwargs)
        except InvalidInput as exc:
            self.found.extend(exc.problems)
            return None

    def done(self) -> None:
        if self.found:
            raise InvalidInput(self.found[: validation.MAX_PROBLEMS])


def _idempotency_key(key: Any) -> str | None:
    return validation.idempotency_key(key, max_length=idempotency.KEY_MAX_LENGTH)


def _read(value: Any, where: str) -> Any:
    """A value as given, or the JSON a :class:`JSONText` holds (read strictly)."""
    if isinstance(value, JSONText):
        return validation.parse_json(value.text, where)
    return value


def _start_data(value: Any, where: str) -> Any:
    return validation.start_data(_read(value, where), where)


def _chart_value(value: Any, where: str) -> Any:
    return validation.chart_value(_read(value, where), where)


def _json_object(value: Any, where: str) -> Any:
    return validation.json_object(_read(value, where), where)


def _declared(request: StartRequest, data: Any) -> None:
    if not data:
        return
    declared = [item.id for item in request.chart.compiled().root.datas]
    unknown = validation.undeclared_data_ids(data, declared)
    if unknown:
        known = ", ".join(declared) or "none"
        raise InvalidInput.at(
            "data",
            f"not a top-level <data> id of this chart: {', '.join(unknown)} (declared: {known})",
        )


def start(request: StartRequest, *, trusted_data: bool = False) -> tuple[StartRequest, Any]:
    """``request`` checked (its text read), and the starter the history records (or None);
    ``trusted_data``: the data is the platform's own (an invoked child's params)."""
    problems = _Problems()
    data = request.data
    if request.subject is not None:
        problems.check(subjects.check_subject, request.subject)
    if not trusted_data:
        data = problems.check(_start_data, data, "data")
        if request.declared_only and data is not None:
            problems.check(_declared, request, data)
    problems.check(
        validation.text, request.business_key, "business_key",
        max_length=BUSINESS_KEY_LENGTH, optional=True,
    )  # fmt: skip
    if request.session_id is not None:
        problems.check(validation.session_id, request.session_id)
    metadata = problems.check(_json_object, request.metadata, "metadata")
    context = problems.check(_json_object, request.caller_context, "caller_context")
    problems.check(_idempotency_key, request.idempotency_key)
    problems.done()
    problems.check(check_start, request.chart, metadata)  # the apps' own checks
    problems.done()
    starter = None
    if request.user is not None:
        decision = authorization.require_start(request.user, request.chart, data, request.subject)
        starter = decision.record()
        context = attribution.with_user(context, request.user)
    checked = StartRequest(
        chart=request.chart, data=data, business_key=request.business_key, metadata=metadata,
        session_id=request.session_id, subject=request.subject, caller_context=context,
        idempotency_key=request.idempotency_key, user=request.user, now=request.now,
        tracing=request.tracing, declared_only=request.declared_only,
    )  # fmt: skip
    return checked, starter


def event(request: EventRequest) -> tuple[Event, Any, Any]:
    """The event ``request`` asks for, its caller context (with the user) and the sender the
    history records (or None)."""
    try:  # the hot path: every check at once; the slow one lists every problem
        validation.event_name(request.name)
        data = request.data
        if type(data) is JSONText:
            data = validation.parse_json(data.text, "data")
        validation.chart_value(data, "data")
        if request.fields:
            validation.event_fields(request.fields)
        context = request.caller_context
        if context is not None:
            context = _json_object(context, "caller_context")
        if request.idempotency_key is not None:
            _idempotency_key(request.idempotency_key)
    except InvalidInput:
        problems = _Problems()
        problems.check(validation.event_name, request.name)
        problems.check(_chart_value, request.data, "data")
        problems.check(validation.event_fields, request.fields)
        problems.check(_json_object, request.caller_context, "caller_context")
        problems.check(_idempotency_key, request.idempotency_key)
        problems.done()
        raise
    context = attribution.with_user(context, request.user)
    sender = None
    if request.user is not None:
        decision = authorization.require(
            request.user, _with_chart(request.execution), request.name, data
        )
        sender = decision.record()
    elif request.capability is not None:
        decision = authorization.decide_capability(
            _with_chart(request.execution), request.name, request.capability
        )
        if not decision.allowed:
            raise authorization.EventNotPermitted(decision)
    fields = request.fields
    if request.raw is not None:
        fields = {**fields, "raw": request.raw}
    return Event(request.name, EXTERNAL, data, **fields), context, sender


def cancel(request: CancelRequest) -> tuple[Any, Any]:
    """The caller context of ``request`` (with the user) and the canceller the history
    records (or None)."""
    problems = _Problems()
    context = problems.check(_json_object, request.caller_context, "caller_context")
    problems.check(
        validation.text, request.reason, "reason", max_length=REASON_MAX_LENGTH, optional=True
    )
    problems.check(_idempotency_key, request.idempotency_key)
    problems.done()
    canceller = None
    if request.user is not None:
        decision = authorization.require_cancel(
            request.user, _with_chart(request.execution), request.reason
        )
        canceller = decision.record()
        context = attribution.with_user(context, request.user)
    return context, canceller


ANSWER_KINDS = ("done", "failed", "event")


def answer(request: AnswerRequest) -> Event:
    """The event an answer becomes (``statecharts.stepper.requests.AnswerRequest``)."""
    problems = _Problems()
    data = problems.check(_chart_value, request.data, "the handler's answer")
    if request.kind == "event":
        problems.check(validation.event_name, request.name, "the handler's event name")
    elif request.kind not in ANSWER_KINDS:
        problems.found.append(InputProblem("kind", f"not an answer kind: {request.kind!r}"))
    problems.done()
    invokeid = request.invokeid
    if request.kind == "done":
        name = f"done.invoke.{invokeid}"
    elif request.kind == "failed":
        name = f"error.communication.invoke.{invokeid}"
    else:
        name = request.name or ""
    return Event(name, EXTERNAL, data, invokeid=invokeid)


# ---- requests that ask for no step ---------------------------------------------------------------


def caller_context(request: CallerContextRequest) -> dict[str, Any]:
    """The caller context a door records (``statecharts.policies.attribution``): its door, the
    request id and ``traceparent`` of its HTTP headers, the user who acts, and the caller's
    own value (the caller-context header, or ``--caller-context``) under ``given``. A bad
    request id or caller-context value is refused naming the header or the option."""
    context: dict[str, Any] = {"door": request.door}
    headers: Mapping[str, str] = request.headers or {}
    for header in statecharts_settings.REQUEST_ID_HEADERS:
        request_id = headers.get(header)
        if request_id:
            validation.request_id(
                request_id, header, max_length=attribution.REQUEST_ID_MAX_LENGTH
            )
            context["request_id"] = request_id
            break
    trace = attribution.traceparent(headers.get("traceparent"))
    if trace is not None:
        context["traceparent"] = trace
    user = attribution.user_of(request.user)
    if user is not None:
        context["user"] = user
    if request.headers is not None:
        where = statecharts_settings.CALLER_CONTEXT_HEADER
        own = validation.caller_context_text(headers.get(where), where)
    else:
        own = validation.caller_context_text(request.given, "--caller-context")
    if own is not None:
        context["given"] = own
    return context


def chart_load(request: ChartLoadRequest) -> None:
    """A chart's name and version fit their columns (no NUL, no lone surrogate)."""
    problems = _Problems()
    problems.check(validation.text, request.name, "name", max_length=CHART_NAME_LENGTH)
    problems.check(validation.text, request.version, "version", max_length=CHART_VERSION_LENGTH)
    problems.done()


def chart_lookup(request: ChartLookupRequest) -> str:
    """A chart reference is text the chart columns could hold (it is looked up in them)."""
    checked = validation.text(request.reference, "chart", max_length=CHART_NAME_LENGTH)
    assert checked is not None
    return checked


def imported(request: ImportRequest) -> None:
    """An exported execution's text fits its columns; its metadata is bounded JSON."""
    problems = _Problems()
    problems.check(
        validation.text, request.session_id, "execution.session_id",
        max_length=SESSION_ID_LENGTH,
    )  # fmt: skip
    problems.check(
        validation.text, request.business_key, "execution.business_key",
        max_length=BUSINESS_KEY_LENGTH, optional=True,
    )  # fmt: skip
    problems.check(validation.json_object, request.metadata, "execution.metadata", optional=False)
    problems.done()


def imported_row(request: ImportedRowRequest) -> dict[str, str]:
    """Each text column of an imported row, checked against its column (first problem
    raised: a part reports one line)."""
    checked: dict[str, str] = {}
    for column, value in request.texts.items():
        bound = request.max_length if request.model is None else _length(request.model, column)
        text = validation.text(value, column, max_length=bound, blank=request.blank)
        assert text is not None
        checked[column] = text
    return checked


def migration(request: MigrationRequest) -> None:
    """A migration's renamed (old) state ids are text a history row holds."""
    problems = _Problems()
    for old_id in request.renames:
        problems.check(validation.text, old_id, "renames", max_length=RENAMED_ID_MAX_LENGTH)
    problems.done()


def erasure(request: ErasureRequest) -> None:
    """An erasure's reason is text its history entry holds."""
    validation.text(request.reason, "reason", max_length=REASON_MAX_LENGTH)


def operator_action(request: OperatorRequest) -> dict[str, Any] | None:
    """An operator's reason (required, not blank) and caller context; returns the context."""
    problems = _Problems()
    problems.check(
        validation.text, request.reason, "reason", max_length=request.max_length, blank=False
    )
    context: dict[str, Any] | None = problems.check(
        validation.json_object, request.caller_context, "caller_context"
    )
    problems.done()
    return context


_ADMISSIONS: dict[type, Callable[[Any], Any]] = {
    CallerContextRequest: caller_context,
    ChartLoadRequest: chart_load,
    ChartLookupRequest: chart_lookup,
    ImportRequest: imported,
    ImportedRowRequest: imported_row,
    MigrationRequest: migration,
    ErasureRequest: erasure,
    OperatorRequest: operator_action,
}


def admit(request: AdmittedRequest) -> Any:
    """Check a request that asks for no step (``statecharts.stepper.admit``): what the
    request's checker returns, or ``InvalidInput``."""
    try:
        checker = _ADMISSIONS[type(request)]
    except KeyError:
        raise TypeError(f"not a request the gate admits: {request!r}") from None
    return checker(request)


def _with_chart(execution: Execution | int) -> Execution:
    """The execution a permission check reads (before the step's lock), its chart loaded."""
    if isinstance(execution, Execution):
        return execution
    return Execution.objects.select_related("chart").get(pk=execution)


__all__ = [
    "admit",
    "answer",
    "caller_context",
    "cancel",
    "chart_load",
    "chart_lookup",
    "erasure",
    "event",
    "imported",
    "imported_row",
    "migration",
    "operator_action",
    "start",
]
