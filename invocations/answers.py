"""Answers of invoke handlers, fed to the parent through the stepper's answer entry point.

Each answer has a key, stable across retries (a handler answering twice, a task re-run after a
crash), so it is applied once: ``statecharts.stepper.answer`` is idempotent per key. What the
parent gets is what the design documents' answer builders make:

- ``done`` -> ``done.invoke.<invokeid>`` with the answer's data;
- ``failed`` -> ``error.communication.invoke.<invokeid>`` with ``{"message": ...}``;
- ``event`` -> an event of the handler's own name;

all with ``_event.invokeid`` set, and all ignored if the parent has cancelled the invocation
meanwhile (spec 6.4.3, recorded in its history as discarded).
"""

from __future__ import annotations

from invocations.handlers import Answer
from invocations.models import Invocation
from statecharts import stepper
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


def answer(invocation: Invocation, reply: Answer, *, key: str) -> StepResult:
    """Feed ``reply`` to the invocation's parent, once per ``key``."""
    return stepper.answer(
        invocation.parent_id,
        event_of(invocation, reply),
        key=f"invocation:{invocation.pk}:{key}"[:200],
        cause={"invocation": invocation.ordinal, "answer": key},
        caller_context=invocation.caller_context,
    )
