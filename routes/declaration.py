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
    # The default retry policy of every route (routes.retrying): only failures a route
    # declares were not sent (routes.base.NotSent) are retried; an ambiguous one never is.
    Setting("ROUTE_MAX_ATTEMPTS", 1, "attempts of a not-sent delivery (1: never retried)"),
    Setting("ROUTE_RETRY_SECONDS", 5, "retry backoff base: 5 s, 10 s, 20 s, ..."),
    Setting("ROUTE_RETRY_COEFFICIENT", 2.0, "each retry's backoff is the last one's times this"),
    Setting("ROUTE_RETRY_MAX_SECONDS", 3600, "the longest retry backoff"),
    Setting(
        "ROUTE_RETRY_JITTER",
        0.0,
        "a backoff moves by up to this fraction of itself (derived from the idempotency key)",
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
