"""The built-in routes: ``task`` (run a registered function on the django-q2 cluster) and
``email`` (Django's ``send_mail`` to an allow-list of domains). Neither is registered until the
host names it in ``STATECHARTS["ROUTES"]`` (docs/routes.md)::

    "ROUTES": {
        "task": {"ROUTE": "routes.builtins.TaskRoute", "TYPES": ["task"]},
        "email": {
            "ROUTE": "routes.builtins.EmailRoute",
            "TYPES": ["email"],
            "OPTIONS": {"allowed_domains": ["example.com"], "from_email": "hi@example.com"},
        },
    }
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from django.apps import apps
from django.core.mail import send_mail

from routes.base import ROUTE_OK, Route, RouteAnswer, RouteConfig, RouteMessage, RouteVerdict

RUN_TASK = "routes.builtins.run_task"


def _task_function(name: str) -> Any:
    # The invocations app's registry of task functions (STATECHARTS["TASKS"], name -> path):
    # one registry for <invoke type="task"> and <send type="task">.
    from invocations.handlers import task_function

    return task_function(name)


def _registered_tasks() -> dict[str, Any]:
    from invocations.conf import invocation_settings

    tasks: dict[str, Any] = invocation_settings.TASKS or {}
    return tasks


def call_task(name: str, data: Any) -> Any:
    """Call the task registered as ``name`` with the send's data: a dict as keyword
    arguments, nothing as no argument, anything else as the one argument."""
    function = _task_function(name)
    if isinstance(data, dict):
        return function(**data)
    if data is None:
        return function()
    return function(data)


def run_task(name: str, data: Any, key: str) -> Any:
    """The django-q2 task of a ``task`` route send (``key`` names it in the cluster's logs)."""
    return call_task(name, data)


class TaskRoute(Route):
    """``<send type="task" target="NAME">``: run the function registered as NAME in
    ``STATECHARTS["TASKS"]`` (the chart names it, never its dotted path) with the event's
    data, on the django-q2 cluster. Typically delayed: "run my code in three days".

    Delivered means *enqueued* (at most once per key); what the function does after that is
    the cluster's business (a failure shows in django-q2's failed tasks, not in the chart).
    OPTIONS: ``queue``: ``"django_q"`` (default) or ``"inline"`` (call it in the delivering
    process, e.g. tests and small sites: then a raise is ``error.communication``)."""

    default_options: ClassVar[dict[str, Any]] = {"queue": "django_q"}

    def __init__(self, name: str, options: dict[str, Any]) -> None:
        super().__init__(name, options)
        if not apps.is_installed("invocations"):
            raise ValueError("the task route uses the invocations app's TASKS registry")
        if self.options["queue"] not in ("django_q", "inline"):
            raise ValueError("queue must be 'django_q' or 'inline'")

    def check(self, config: RouteConfig, send_type: str, target: str | None) -> RouteAnswer:
        if not target:
            return RouteAnswer(RouteVerdict.INVALID, "no task named (the target)")
        if target not in _registered_tasks():
            return RouteAnswer(RouteVerdict.INVALID, f"no task {target!r} in TASKS")
        return ROUTE_OK

    def deliver(self, config: RouteConfig, message: RouteMessage, key: str) -> None:
        name = message.target or ""
        if config.get("queue") == "inline":
            call_task(name, message.data)
            return
        _task_function(name)  # (refused now, not on the worker, if it is gone)
        from django_q.tasks import async_task

        async_task(RUN_TASK, name, message.data, key, task_name=f"route {key}"[:100])


_ADDRESS = re.compile(r"[^@\s<>,;\"']+@([A-Za-z0-9.-]+\.[A-Za-z]{2,})")


class EmailRoute(Route):
    """``<send type="email" target="ada@example.com">``: Django's ``send_mail``.

    The subject and body come from the event's data: ``subject`` and ``body`` params (or a
    ``<content>`` object with those keys); a ``<content>`` string is the body. The subject
    defaults to the event name. Recipients are limited to ``allowed_domains`` (deny by
    default: it must never become an open relay, since ``targetexpr`` can come from event
    data); an address off the list is ``error.execution`` and nothing is sent.

    OPTIONS: ``allowed_domains`` (list; a domain also allows its subdomains), ``from_email``
    (default ``DEFAULT_FROM_EMAIL``), ``subject_prefix`` (the one option a scope may
    override by default)."""

    overridable: ClassVar[frozenset[str]] = frozenset({"subject_prefix"})
    default_options: ClassVar[dict[str, Any]] = {
        "allowed_domains": [],
        "from_email": None,
        "subject_prefix": "",
    }

    def __init__(self, name: str, options: dict[str, Any]) -> None:
        super().__init__(name, options)
        domains = self.options["allowed_domains"]
        if not isinstance(domains, list | tuple) or not all(isinstance(d, str) for d in domains):
            raise ValueError("allowed_domains must be a list of domain names")

    def check(self, config: RouteConfig, send_type: str, target: str | None) -> RouteAnswer:
        if not target:
            return RouteAnswer(RouteVerdict.UNREACHABLE, "no address (the target)")
        refused = refusal(config, target)
        if refused:
            return RouteAnswer(RouteVerdict.INVALID, refused)
        return ROUTE_OK

    def deliver(self, config: RouteConfig, message: RouteMessage, key: str) -> None:
        address = message.target or ""
        refused = refusal(config, address)
        if refused:  # (checked at the send too; the settings may have changed since)
            raise PermissionError(refused)
        subject, body = _subject_and_body(message)
        prefix = str(config.get("subject_prefix") or "")
        send_mail(
            f"{prefix}{subject}",
            body,
            config.get("from_email"),
            [address],
            fail_silently=False,
        )


def refusal(config: RouteConfig, address: str) -> str:
    """Why ``address`` may not be mailed under ``config`` ('' if it may)."""
    match = _ADDRESS.fullmatch(address)
    if match is None:
        return f"{address!r} is not an email address"
    domain = match.group(1).lower()
    allowed = [str(d).lower().strip(".") for d in config.get("allowed_domains") or []]
    if not any(domain == d or domain.endswith(f".{d}") for d in allowed):
        return f"the domain {domain!r} is not in the route's allowed_domains"
    return ""


def _subject_and_body(message: RouteMessage) -> tuple[str, str]:
    data = message.data
    if isinstance(data, str):
        return message.name, data
    if isinstance(data, dict):
        subject = data.get("subject", message.name)
        body = data.get("body", "")
        return str(subject), str(body)
    return message.name, "" if data is None else str(data)
