"""The routes app's settings check (``manage.py check``), named by its declaration."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.checks import CheckMessage, Error, Warning

from routes.policies import RETRY_SETTINGS, number_problem
from routes.queue import QueueUnavailable, load_queue
from routes.registry import RouteSettingsError, build_routes, override_problems
from statecharts.conf import default


def check(configured: Mapping[str, Any]) -> list[CheckMessage]:
    """Every route loads and is a ``Route`` (``routes.E001``), the settings-level scope
    overrides name registered routes and overridable options only (``routes.E002``), and the
    route timer queue can be loaded here (``routes.W001``: otherwise delayed route sends are
    refused). The ``ROUTE_*`` retry defaults are numbers in their range (``routes.E003``), as
    is each route's ``RETRY`` (``routes.E001``)."""
    problems: list[CheckMessage] = []
    for field, key in RETRY_SETTINGS.items():
        problem = number_problem(field, configured.get(key, default(key)))
        if problem:
            problems.append(Error(f"STATECHARTS[{key!r}] {problem}.", id="routes.E003"))
    try:
        registered = build_routes(configured.get("ROUTES", default("ROUTES")))
    except RouteSettingsError as exc:
        return problems + [
            Error(f"STATECHARTS['ROUTES']: {message}", id="routes.E001") for message in exc.problems
        ]
    overrides = configured.get("ROUTE_OVERRIDES", default("ROUTE_OVERRIDES"))
    if not isinstance(overrides, Mapping):
        return [Error("STATECHARTS['ROUTE_OVERRIDES'] must be a dict.", id="routes.E002")]
    for chart, scoped in overrides.items():
        for problem in override_problems(scoped, registered):
            problems.append(
                Error(
                    f"STATECHARTS['ROUTE_OVERRIDES'][{chart!r}]: {problem}",
                    hint="A scope overrides a route's configuration, never its existence, "
                    "and only the option keys the route declares overridable.",
                    id="routes.E002",
                )
            )
    queue = configured.get("ROUTE_TIMER_QUEUE", default("ROUTE_TIMER_QUEUE"))
    if queue is not None:
        try:
            load_queue(queue)
        except QueueUnavailable as exc:
            problems.append(
                Warning(
                    f"STATECHARTS['ROUTE_TIMER_QUEUE']: {exc}; delayed route sends are "
                    "refused (error.communication) until it is available.",
                    id="routes.W001",
                )
            )
    return problems
