"""What the ``routes`` app declares (``RoutesConfig.declaration``): its keys of
``STATECHARTS`` (docs/routes.md), their check, its telemetry events and its contributions."""

from __future__ import annotations

from statecharts.conf import Declaration, Setting

SETTINGS = (
    Setting(
        "ROUTES",
        {},
        "name -> {'ROUTE': Route class path, 'TYPES': [...], 'OPTIONS': {...}, 'OVERRIDABLE'}",
    ),
    Setting(
        "ROUTE_OVERRIDES", {}, "chart name -> {route name -> {option: value}} (a chart's scope)"
    ),
    Setting(
        "ROUTE_TIMER_QUEUE",
        "timers.routequeue.RouteTimerQueue",
        "delayed route sends; None: refused (error.communication in the chart), never dropped",
    ),
    Setting(
        "ROUTE_IN_DOUBT_SECONDS",
        300,
        "a delivery claimed this long ago and never settled is shown in doubt (not retried)",
    ),
    Setting("ROUTE_RETENTION_DAYS", 30, "settled ledger entries of finished executions (prune)"),
)

DECLARATION = Declaration(
    app="routes",
    settings=SETTINGS,
    settings_checks=("routes.checks.check",),
    # Immediate route sends: an outbox message, delivered after the commit (and by the outbox
    # sweeper after a crash); delayed ones: the route timer queue.
    performers={"deliver_route": "routes.performers.deliver_route"},
    # Its telemetry events: route.* (deliveries) and route_timer.* (docs/telemetry.md).
    telemetry_events=("routes.telemetry.RouteEvent",),
    contributions=(
        "routes.surface.register",  # the routes panel, API endpoints, read-model section
        "routes.pruning.register",  # settled ledger rows pruned, those of erased executions
        # The Basic HTTP address does not travel with an export: an import mints a new one.
        "routes.addresses.register",
    ),
)
