"""The registered routes, built from ``STATECHARTS["ROUTES"]``, and scope overrides.

A route exists only if the host registered it in settings: a chart, an execution, a row or a
request can name a route, never define one or the code it runs. A scope (an execution's
``metadata["routes"]``, a chart's ``ROUTE_OVERRIDES`` entry) overrides a route's options,
never its existence, and only the keys the route declares overridable: anything else is
refused when the execution starts (and, for settings, by ``manage.py check``).

Resolution order of a send's configuration: the route's OPTIONS, then the chart's
settings-level overrides, then the execution's.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.core.signals import setting_changed
from django.utils.module_loading import import_string

from routes.base import RetryPolicy, Route, RouteConfig
from routes.conf import route_settings
from routes.policies import parse_retry

# The key of an execution's metadata that holds its route overrides.
METADATA_KEY = "routes"


class RouteSettingsError(ValueError):
    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


class OverrideRefused(ValueError):
    """A scope overrides a route that is not registered, or an option it may not."""


@dataclass(frozen=True, slots=True)
class RegisteredRoute:
    name: str
    route: Route
    types: tuple[str, ...]
    overridable: frozenset[str]
    # Its own retry policy (the settings entry's RETRY over the class's retry_policy); the
    # fields it leaves None come from the ROUTE_* settings when it is used
    # (routes.retrying.policy_of).
    retry: RetryPolicy = field(default_factory=RetryPolicy)


def build_routes(configured: Any) -> dict[str, RegisteredRoute]:
    """The routes a ``ROUTES`` setting registers; ``RouteSettingsError`` lists what is wrong."""
    if not isinstance(configured, Mapping):
        raise RouteSettingsError(["must be a dict of name -> {ROUTE, TYPES, OPTIONS}"])
    problems: list[str] = []
    built: dict[str, RegisteredRoute] = {}
    served: dict[str, str] = {}
    for name, entry in configured.items():
        if not isinstance(name, str) or not name or len(name) > 100:
            problems.append(f"bad route name {name!r} (a non-empty string, at most 100)")
            continue
        if not isinstance(entry, Mapping):
            problems.append(f"[{name!r}] must be a dict with ROUTE, TYPES and OPTIONS")
            continue
        unknown = set(entry) - {"ROUTE", "TYPES", "OPTIONS", "OVERRIDABLE", "RETRY"}
        if unknown:
            problems.append(f"[{name!r}] has unknown keys {sorted(unknown)}")
        cls: Any = entry.get("ROUTE")
        if isinstance(cls, str):
            try:
                cls = import_string(cls)
            except ImportError as exc:
                problems.append(f"[{name!r}]['ROUTE'] cannot be imported: {exc}")
                continue
        if not (inspect.isclass(cls) and issubclass(cls, Route)):
            problems.append(f"[{name!r}]['ROUTE'] is not a routes.base.Route subclass")
            continue
        types = entry.get("TYPES") or []
        if not isinstance(types, list | tuple) or not all(isinstance(t, str) and t for t in types):
            problems.append(f"[{name!r}]['TYPES'] must be a list of <send type> strings")
            continue
        for send_type in types:
            if send_type in served:
                problems.append(
                    f"[{name!r}] serves {send_type!r}, which {served[send_type]!r} serves"
                )
            served[send_type] = name
        options = entry.get("OPTIONS") or {}
        if not isinstance(options, Mapping):
            problems.append(f"[{name!r}]['OPTIONS'] must be a dict")
            continue
        overridable = entry.get("OVERRIDABLE", cls.overridable)
        if not isinstance(overridable, list | tuple | set | frozenset) or not all(
            isinstance(key, str) for key in overridable
        ):
            problems.append(f"[{name!r}]['OVERRIDABLE'] must be a list of option keys")
            continue
        retry, retry_problems = parse_retry(entry.get("RETRY"), cls.retry_policy)
        if retry_problems:
            problems.extend(f"[{name!r}]['RETRY'] {problem}" for problem in retry_problems)
            continue
        try:
            route = cls(name, dict(options))
        except Exception as exc:  # a route refusing its options: a settings problem
            problems.append(f"[{name!r}] refuses its OPTIONS: {exc}")
            continue
        built[name] = RegisteredRoute(
            name, route, tuple(types), frozenset(overridable), retry=retry
        )
    if problems:
        raise RouteSettingsError(problems)
    return built


class _Cache:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.routes: dict[str, RegisteredRoute] | None = None


_cache = _Cache()


def routes() -> dict[str, RegisteredRoute]:
    """The registered routes (built once per settings; one instance per route and process).
    Settings that do not build (``manage.py check`` says why) register no route at all."""
    built = _cache.routes
    if built is None:
        try:
            built = build_routes(route_settings.ROUTES)
        except RouteSettingsError:
            built = {}
        with _cache.lock:
            _cache.routes = built
    return built


def get(name: str) -> RegisteredRoute | None:
    return routes().get(name)


def send_types() -> dict[str, str]:
    """``<send type>`` -> route name, for the registered-types snapshot."""
    return {t: r.name for r in routes().values() for t in r.types}


def reset(setting: str = "STATECHARTS", **kwargs: Any) -> None:
    if setting == "STATECHARTS":
        with _cache.lock:
            _cache.routes = None


setting_changed.connect(reset, dispatch_uid="routes.registry")


def override_problems(scoped: Any, registered: Mapping[str, RegisteredRoute]) -> list[str]:
    """What is wrong with one scope's overrides ({route: {option: value}})."""
    if not isinstance(scoped, Mapping):
        return ["must be a dict of route name -> {option: value}"]
    problems = []
    for name, options in scoped.items():
        known = registered.get(name)
        if known is None:
            problems.append(f"names the route {name!r}, which is not registered")
            continue
        if not isinstance(options, Mapping):
            problems.append(f"[{name!r}] must be a dict of option -> value")
            continue
        refused = sorted(str(key) for key in options if key not in known.overridable)
        if refused:
            allowed = ", ".join(sorted(known.overridable)) or "none"
            problems.append(
                f"[{name!r}] overrides {refused}, which the route does not let a scope "
                f"override (overridable: {allowed})"
            )
    return problems


def resolve_config(name: str, chart_name: str, metadata: Mapping[str, Any] | None) -> RouteConfig:
    """The route's configuration under a scope: OPTIONS, then the chart's settings-level
    overrides, then the execution's. ``OverrideRefused`` if a scope names what it may not
    (settings changed since the execution started)."""
    known = get(name)
    if known is None:
        raise OverrideRefused(f"the route {name!r} is not registered")
    config = dict(known.route.options)
    chart_scoped = (route_settings.ROUTE_OVERRIDES or {}).get(chart_name) or {}
    execution_scoped = (metadata or {}).get(METADATA_KEY) or {}
    for scoped in (chart_scoped, execution_scoped):
        problems = override_problems({name: scoped[name]} if name in scoped else {}, routes())
        if problems:
            raise OverrideRefused("; ".join(problems))
        config.update(scoped.get(name) or {})
    return config
