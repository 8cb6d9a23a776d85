"""Answers of invoke handlers, fed to the parent through the stepper (an ``AnswerRequest``).

Each answer has a key, stable across retries (a handler answering twice, a task re-run after a
crash), so it is applied once: ``statecharts.stepper.answer`` is idempotent per key. What the
parent gets is what the design documents' answer builders make:

- ``done`` -> ``done.invoke.<invokeid>`` with the answer's data;
- ``failed`` -> ``error.communication.invoke.<invokeid>`` with ``{"message": ...}``;
- ``event`` -> an event of the handler's own name;

all with ``_event.invokeid`` set, and all ignored if the parent has cancelled the invocation
meanwhile (spec 6.4.3, recorded in its history as discarded).

An answer is data from outside the platform (a task's return value, a callback's body): it
is handed to the stepper as an ``AnswerRequest``, checked by its gate before anything is
fed, like every other door's request. Its data is a chart value (no code-carrying tags,
bounded depth and size, finite numbers, JSON types only) and an ``event`` answer's name
is an event name outside the platform's reserved prefixes. A refused answer raises
:class:`~statecharts.exceptions.InvalidInput` and feeds nothing.

The answer a ``start`` returns is fenced (``invocations.leases``): it is fed only while the
start's claim still holds the row, so a start whose lease ran out and whose row a newer start
claimed answers nothing. (Between that check and the feed the key still makes it one answer:
both starts answer under the key ``start``.)
"""

from __future__ import annotations

from invocations import leases
from invocations import telemetry as invocation_telemetry
from invocations.handlers import Answer
from invocations.models import Invocation
from statecharts import stepper
from statecharts.stepper import AnswerRequest, StepResult


def request_of(invocation: Invocation, reply: Answer, *, key: str) -> AnswerRequest:
    """The stepper request for ``reply`` to ``invocation``'s parent, once per ``key``."""
    return AnswerRequest(
        execution=invocation.parent_id,
        kind=reply.kind,
        name=reply.name,
        data=reply.data,
        invokeid=invocation.invokeid,
        key=f"invocation:{invocation.pk}:{key}"[:200],
        cause={"invocation": invocation.ordinal, "answer": key},
        caller_context=invocation.caller_context,
    )


def answer(invocation: Invocation, reply: Answer, *, key: str) -> StepResult:
    """Feed ``reply`` to the invocation's parent, once per ``key``. Raises InvalidInput
    (nothing fed) for an answer the stepper's gate refuses."""
    result = stepper.submit(request_of(invocation, reply, key=key))
    invocation_telemetry.answered(invocation, reply, key)
    return result


def answer_of_start(invocation: Invocation, reply: Answer, *, token: int) -> StepResult | None:
    """``answer`` (key ``start``) for the start of claim ``token``, only while that claim
    holds the row: None (nothing fed) when the start was fenced."""
    if not leases.holds(invocation.pk, token):
        return None
    return answer(invocation, reply, key="start")
