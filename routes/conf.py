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

Registered, with their system check, by ``routes.checks`` (``RoutesConfig.ready``). Checked by
``manage.py check``: every route loads and is a ``Route``, its
types are not taken twice, its OVERRIDABLE keys are strings, and every settings-level override
names a registered route and only options that route lets a scope override.
"""

from __future__ import annotations

from typing import Any

from statecharts.conf import statecharts_settings

DEFAULTS: dict[str, Any] = {
    "ROUTES": {},
    "ROUTE_OVERRIDES": {},
    "ROUTE_TIMER_QUEUE": "timers.routequeue.RouteTimerQueue",
    "ROUTE_IN_DOUBT_SECONDS": 300,
    "ROUTE_RETENTION_DAYS": 30,
}


route_settings = statecharts_settings
