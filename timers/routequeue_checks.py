"""The system check of the route timer queue, importable without the routes app (it loads
``timers.routequeue`` only when ``routes`` is installed)."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.core.checks import CheckMessage, Warning
from django.db import DatabaseError


def check_unregistered(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[CheckMessage]:
    """``manage.py check --database default`` (and ``migrate``): route timer rows naming a
    route that is not registered are snoozed until it is; say so. A database check (tagged
    so): the plain ``check`` never reads the database; one that cannot be read yet (before
    migrate) says nothing."""
    if not databases or not apps.is_installed("routes"):
        return []
    from timers.routequeue import unregistered_routes

    try:
        unregistered = unregistered_routes()
    except DatabaseError:
        return []
    return [
        Warning(
            f"{rows} route timer row(s) name the route {name!r}, which is not in "
            "STATECHARTS['ROUTES']: they are snoozed until it is registered again.",
            hint="Register the route again, or delete the rows in the admin.",
            id="timers.W001",
        )
        for name, rows in unregistered
    ]
