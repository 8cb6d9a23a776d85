"""The invocations app's settings: ``INVOKE_*`` keys of the one ``STATECHARTS`` dict.

    "INVOKE_RUNTIME_CHARTS": True,    # <invoke srcexpr> / <content expr> may define a child
                                      # chart at run time (from event data: it runs in the
                                      # sandbox); False refuses them with error.execution
    "INVOKE_CHART_MAX_BYTES": 1_000_000,  # a child chart's source
    "INVOKE_RUNTIME_CHARTS_PER_EXECUTION": 100,  # distinct run-time child charts per parent
    "INVOKERS": {"task": "invocations.handlers.TaskInvoker"},  # <invoke type> -> handler class
    "TASKS": {},                      # name -> dotted path: what the "task" handler may call
    "INVOKE_HANDLER_MAX_ATTEMPTS": 5, # a handler's start that raises, before it fails
    "INVOKE_HANDLER_RETRY_SECONDS": 5,  # backoff base: 5 s, 10 s, 20 s, ...
    "INVOKE_HANDLER_TIMEOUT_SECONDS": 600,  # no answer by then: the invocation fails
    "INVOKE_HANDLER_QUEUE": "django_q",  # or "inline": handlers run in the caller's process
                                      # (tests, statecharts.testing; small sites)
    "INVOKE_RETENTION_DAYS": 30,      # settled invocation rows of finished parents are pruned
                                      # this long after they settled (statechart prune)
    "INVOKE_MAX_DEPTH": 8,            # a child chart's depth in its tree (the root is 0)
    "INVOKE_MAX_CHILDREN": 50,        # live child charts of one execution at once
    "INVOKE_MAX_DESCENDANTS": 100,    # live child charts in one tree (below one root) at once
                                      # (over any of the three: the parent gets error.execution
                                      # and no child is created: docs/invocations.md "Bounds")
    "INVOKE_STARTS_PER_DELIVERY": 20,  # child charts of one tree one delivery call starts;
                                      # the others wait, pending, for the sweeper's next call
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.checks import CheckMessage, Error
from django.utils.module_loading import import_string

from statecharts.conf import register_settings, statecharts_settings

DEFAULTS = {
    "INVOKE_RUNTIME_CHARTS": True,
    "INVOKE_CHART_MAX_BYTES": 1_000_000,
    "INVOKE_RUNTIME_CHARTS_PER_EXECUTION": 100,
    "INVOKERS": {"task": "invocations.handlers.TaskInvoker"},
    "TASKS": {},
    "INVOKE_HANDLER_MAX_ATTEMPTS": 5,
    "INVOKE_HANDLER_RETRY_SECONDS": 5,
    "INVOKE_HANDLER_TIMEOUT_SECONDS": 600,
    "INVOKE_HANDLER_QUEUE": "django_q",
    "INVOKE_RETENTION_DAYS": 30,
    "INVOKE_MAX_DEPTH": 8,
    "INVOKE_MAX_CHILDREN": 50,
    "INVOKE_MAX_DESCENDANTS": 100,
    "INVOKE_STARTS_PER_DELIVERY": 20,
}

BOUNDS = (
    "INVOKE_MAX_DEPTH",
    "INVOKE_MAX_CHILDREN",
    "INVOKE_MAX_DESCENDANTS",
    "INVOKE_STARTS_PER_DELIVERY",
)


def check(configured: Mapping[str, Any]) -> list[CheckMessage]:
    """INVOKERS and TASKS name importable things (by name in charts, by path here only); the
    bounds on trees of child charts are positive integers."""
    problems: list[CheckMessage] = []
    for key in BOUNDS:
        value = configured.get(key, DEFAULTS[key])
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            problems.append(
                Error(
                    f"STATECHARTS[{key!r}] must be a positive integer, not {value!r}.",
                    id="invocations.E004",
                )
            )
    queue = configured.get("INVOKE_HANDLER_QUEUE", DEFAULTS["INVOKE_HANDLER_QUEUE"])
    if queue not in ("django_q", "inline"):
        problems.append(
            Error(
                "STATECHARTS['INVOKE_HANDLER_QUEUE'] must be 'django_q' or 'inline'.",
                id="invocations.E003",
            )
        )
    for key in ("INVOKERS", "TASKS"):
        value = configured.get(key, DEFAULTS[key])
        if not isinstance(value, dict):
            problems.append(Error(f"STATECHARTS[{key!r}] must be a dict.", id="invocations.E001"))
            continue
        for name, target in value.items():
            if callable(target):
                continue
            try:
                import_string(str(target))
            except ImportError as exc:
                problems.append(
                    Error(
                        f"STATECHARTS[{key!r}][{name!r}] cannot be imported: {exc}",
                        id="invocations.E002",
                    )
                )
    return problems


register_settings("invocations", DEFAULTS, check)

invocation_settings = statecharts_settings
