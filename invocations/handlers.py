"""Invoke handlers: ``<invoke type="...">`` for types other than SCXML, run on django-q2.

A host registers handlers by type in settings, never by a path taken from a chart::

    STATECHARTS = {
        "INVOKERS": {"task": "invocations.handlers.TaskInvoker"},   # the default
        "TASKS": {"charge": "myapp.payments.charge"},                # what "task" may call
    }

A handler is a class with ``start(invocation)`` and ``cancel(invocation)``; ``invocation`` is
a :class:`HandlerInvocation` (a stable ``id`` to be idempotent with, the type, ``src``, the
evaluated params, the caller context). ``start`` runs on the django-q2 cluster after the
parent's step commits, **at least once** (again after a crash, and after a failure, with
backoff): it must be idempotent, keyed on the invocation's ``id``. It runs under a lease and
a fence token (``invocations.leases``): a start whose worker died is started again within
seconds, and a start that lost its claim writes nothing. It may return an :class:`Answer`
(the ``task`` handler does), answer later through :func:`invocations.answers.answer`, or give
up with ``Cancel(reason)`` / ``Discard(reason)`` (``invocations.policies``: failed at once,
no attempt spent). A ``start`` that raises is retried as the handler's ``retry_policy`` says
(``invocations.policies``; the ``INVOKE_HANDLER_*`` settings for what it leaves unset:
``INVOKE_HANDLER_RETRY_SECONDS``, doubled each time, until ``INVOKE_HANDLER_MAX_ATTEMPTS``),
and fails at once for an exception its policy names non-retryable; a handler that has not
answered within ``INVOKE_HANDLER_TIMEOUT_SECONDS`` is treated as failed. Either way the
invocation fails, with the error on its row, and the parent gets
``error.communication.invoke.<id>`` (with ``_event.invokeid`` set). ``cancel`` runs when the
parent leaves the invoking state; a ``start`` that runs after its invocation was cancelled
does nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from django.utils.module_loading import import_string

from invocations.conf import invocation_settings
from statecharts.policies.retrying import GiveUp


@dataclass(frozen=True, slots=True)
class HandlerInvocation:
    id: int  # stable: the same invocation has the same id at every attempt
    invokeid: str
    type: str
    src: str
    params: Any
    caller_context: Any
    attempt: int


@dataclass(frozen=True, slots=True)
class Answer:
    """What a handler answers: ``done`` (with data, the parent gets ``done.invoke.<id>``),
    ``failed`` (``error.communication.invoke.<id>``), or ``event`` (an event of its own,
    named ``name``; the invocation stays open)."""

    kind: str  # "done", "failed" or "event"
    data: Any = None
    name: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def done(cls, data: Any = None) -> Answer:
        return cls("done", data)

    @classmethod
    def failed(cls, reason: str) -> Answer:
        return cls("failed", {"message": reason})

    @classmethod
    def event(cls, name: str, data: Any = None) -> Answer:
        return cls("event", data, name)


class InvokeHandler(Protocol):
    """``retry_policy`` (optional, a class attribute): ``invocations.policies.RetryPolicy``."""

    def start(self, invocation: HandlerInvocation) -> Answer | GiveUp | None: ...

    def cancel(self, invocation: HandlerInvocation) -> None: ...


class UnknownTask(LookupError):
    """A ``task`` invocation names a function that is not registered in ``TASKS``."""


class TaskInvoker:
    """The built-in ``task`` handler: call a Python function registered by name in
    ``STATECHARTS["TASKS"]`` (the chart names the function in ``src``, never its dotted path)
    with the invocation's params, and answer with its return value (``done``), or fail if it
    keeps raising. The everyday "call the payment provider and wait for the result"."""

    def start(self, invocation: HandlerInvocation) -> Answer | None:
        function = task_function(invocation.src)
        params = invocation.params if isinstance(invocation.params, dict) else {}
        return Answer.done(function(**params))

    def cancel(self, invocation: HandlerInvocation) -> None:
        return None  # a task already running is not interrupted; its answer is ignored


def task_function(name: str) -> Any:
    tasks: dict[str, Any] = invocation_settings.TASKS or {}
    target = tasks.get(name)
    if target is None:
        raise UnknownTask(f"no task {name!r} in STATECHARTS['TASKS']")
    return import_string(target) if isinstance(target, str) else target


def handler_for(invoke_type: str) -> InvokeHandler | None:
    """The handler registered for ``invoke_type``, or None (a deployment fact)."""
    configured: dict[str, Any] = invocation_settings.INVOKERS or {}
    target = configured.get(invoke_type)
    if target is None:
        return None
    cls = import_string(target) if isinstance(target, str) else target
    handler: InvokeHandler = cls()
    return handler


def handler_types() -> list[str]:
    return sorted((invocation_settings.INVOKERS or {}).keys())
