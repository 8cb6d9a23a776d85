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

from collections.abc import Callable
from typing import Any

from statecharts.core.events import EXTERNAL, Event
from statecharts.exceptions import InputProblem, InvalidInput
from statecharts.models import Execution
from statecharts.policies import attribution, authorization, idempotency, subjects, validation
from statecharts.stepper.performing import check_start
from statecharts.stepper.requests import (
    AnswerRequest,
    CancelRequest,
    EventRequest,
    JSONText,
    StartRequest,
)

# The columns a start writes text into.
BUSINESS_KEY_LENGTH = Execution._meta.get_field("business_key").max_length or 0
assert Execution._meta.get_field("session_id").max_length == validation.SESSION_ID_MAX_LENGTH


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
    problems.check(idempotency.check_key, request.idempotency_key)
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
            idempotency.check_key(request.idempotency_key)
    except InvalidInput:
        problems = _Problems()
        problems.check(validation.event_name, request.name)
        problems.check(_chart_value, request.data, "data")
        problems.check(validation.event_fields, request.fields)
        problems.check(_json_object, request.caller_context, "caller_context")
        problems.check(idempotency.check_key, request.idempotency_key)
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
        validation.text, request.reason, "reason", max_length=1000, optional=True
    )
    problems.check(idempotency.check_key, request.idempotency_key)
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


def _with_chart(execution: Execution | int) -> Execution:
    """The execution a permission check reads (before the step's lock), its chart loaded."""
    if isinstance(execution, Execution):
        return execution
    return Execution.objects.select_related("chart").get(pk=execution)


__all__ = ["answer", "cancel", "event", "start"]
