"""Answers of invoke handlers, fed to the parent through the stepper's answer entry point.

Each answer has a key, stable across retries (a handler answering twice, a task re-run after a
crash), so it is applied once: ``statecharts.stepper.answer`` is idempotent per key. What the
parent gets is what the design documents' answer builders make:

- ``done`` -> ``done.invoke.<invokeid>`` with the answer's data;
- ``failed`` -> ``error.communication.invoke.<invokeid>`` with ``{"message": ...}``;
- ``event`` -> an event of the handler's own name;

all with ``_event.invokeid`` set, and all ignored if the parent has cancelled the invocation
meanwhile (spec 6.4.3, recorded in its history as discarded).

An answer is data from outside the platform (a task's return value, a callback's body): it
passes the one validator (``statecharts.validation``) before anything is fed, like every
other door. Its data is a chart value (no code-carrying tags, bounded depth and size, finite
numbers, JSON types only) and an ``event`` answer's name is an event name outside the
platform's reserved prefixes. A refused answer raises
:class:`~statecharts.validation.InvalidInput` and feeds nothing.
"""

from __future__ import annotations

from invocations.handlers import Answer
from invocations.models import Invocation
from statecharts import stepper, validation
from statecharts.core.events import EXTERNAL, Event
from statecharts.stepper import StepResult


def event_of(invocation: Invocation, answer: Answer) -> Event:
    invokeid = invocation.invokeid
    if answer.kind == "done":
        return Event(f"done.invoke.{invokeid}", EXTERNAL, answer.data, invokeid=invokeid)
    if answer.kind == "failed":
        name = f"error.communication.invoke.{invokeid}"
        return Event(name, EXTERNAL, answer.data, invokeid=invokeid)
    if answer.kind == "event" and answer.name:
        return Event(answer.name, EXTERNAL, answer.data, invokeid=invokeid)
    raise ValueError(f"not an answer: {answer!r}")


def checked(reply: Answer) -> Answer:
    """``reply`` if the one validator accepts it as data from outside; else InvalidInput."""
    validation.chart_value(reply.data, "the handler's answer")
    if reply.kind == "event":
        validation.event_name(reply.name, "the handler's event name")
    return reply


def answer(invocation: Invocation, reply: Answer, *, key: str) -> StepResult:
    """Feed ``reply`` to the invocation's parent, once per ``key``. Raises InvalidInput
    (nothing fed) for an answer the validator refuses (:func:`checked`)."""
    checked(reply)
    return stepper.answer(
        invocation.parent_id,
        event_of(invocation, reply),
        key=f"invocation:{invocation.pk}:{key}"[:200],
        cause={"invocation": invocation.ordinal, "answer": key},
        caller_context=invocation.caller_context,
    )
