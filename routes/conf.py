"""The routes app's settings: keys of the one ``STATECHARTS`` dict (docs/routes.md)::

    "ROUTES": {},            # name -> {"ROUTE": dotted path of a routes.base.Route class,
                             #          "TYPES": [<send type> values it serves],
                             #          "OPTIONS": {...}, "OVERRIDABLE": [option keys]}
    "ROUTE_OVERRIDES": {},   # chart name -> {route name -> {option: value}} (a chart's scope)
    "ROUTE_TIMER_QUEUE": "timers.routequeue.RouteTimerQueue",  # delayed route sends; None:
                             # refused (error.communication in the chart), never dropped
    "ROUTE_IN_DOUBT_SECONDS": 300,  # a delivery claimed this long ago, never settled, is
                             # shown "in doubt" (its worker died: it is not retried blindly)
    "ROUTE_RETENTION_DAYS": 30,  # settled ledger entries of finished executions (prune)

Checked by ``manage.py check`` (:func:`check`): every route loads and is a ``Route``, its
types are not taken twice, its OVERRIDABLE keys are strings, and every settings-level override
names a registered route and only options that route lets a scope override.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.checks import CheckMessage, Error, Warning

from statecharts.conf import register_settings, statecharts_settings

DEFAULTS: dict[str, Any] = {
    "ROUTES": {},
    "ROUTE_OVERRIDES": {},
    "ROUTE_TIMER_QUEUE": "timers.routequeue.RouteTimerQueue",
    "ROUTE_IN_DOUBT_SECONDS": 300,
    "ROUTE_RETENTION_DAYS": 30,
}


def check(configured: Mapping[str, Any]) -> list[CheckMessage]:
    from routes.registry import RouteSettingsError, build_routes, override_problems

    problems: list[CheckMessage] = []
    try:
        registered = build_routes(configured.get("ROUTES", DEFAULTS["ROUTES"]))
    except RouteSettingsError as exc:
        return [
            Error(f"STATECHARTS['ROUTES']: {message}", id="routes.E001")
            for message in exc.problems
        ]
    overrides = configured.get("ROUTE_OVERRIDES", DEFAULTS["ROUTE_OVERRIDES"])
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
    queue = configured.get("ROUTE_TIMER_QUEUE", DEFAULTS["ROUTE_TIMER_QUEUE"])
    if queue is not None:
        from routes.queue import QueueUnavailable, load_queue

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


register_settings("routes", DEFAULTS, check)

route_settings = statecharts_settings
