"""System checks: a misconfigured STATECHARTS setting is reported at start-up, not mid-step."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, register
from django.utils.module_loading import import_string

from statecharts.conf import DEFAULTS
from statecharts.handlers import HANDLED_KINDS


@register()
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    configured = getattr(settings, "STATECHARTS", None)
    if configured is None:
        return []
    if not isinstance(configured, dict):
        return [Error("STATECHARTS must be a dict.", id="statecharts.E001")]
    problems: list[CheckMessage] = []
    for name in sorted(set(configured) - set(DEFAULTS)):
        problems.append(
            Error(
                f"STATECHARTS[{name!r}] is not a setting.",
                hint=f"Known settings: {', '.join(sorted(DEFAULTS))}.",
                id="statecharts.E002",
            )
        )
    positive = [name for name, value in DEFAULTS.items() if isinstance(value, int)]
    for name in positive:
        value = configured.get(name, DEFAULTS[name])
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            problems.append(
                Error(f"STATECHARTS[{name!r}] must be a positive integer.", id="statecharts.E003")
            )
    for name in ("CLOCK", "RESOLVER"):
        problems.extend(_importable(f"STATECHARTS[{name!r}]", configured.get(name)))
    handlers = configured.get("EFFECT_HANDLERS", {})
    if not isinstance(handlers, dict):
        problems.append(
            Error("STATECHARTS['EFFECT_HANDLERS'] must be a dict.", id="statecharts.E001")
        )
        return problems
    for kind, handler in handlers.items():
        if kind not in HANDLED_KINDS:
            problems.append(
                Error(
                    f"STATECHARTS['EFFECT_HANDLERS'] has an unknown effect kind {kind!r}.",
                    hint=f"Kinds: {', '.join(sorted(HANDLED_KINDS))}.",
                    id="statecharts.E004",
                )
            )
        problems.extend(_importable(f"STATECHARTS['EFFECT_HANDLERS'][{kind!r}]", handler))
    return problems


def _importable(label: str, value: Any) -> list[CheckMessage]:
    if value is None or callable(value):
        return []
    if not isinstance(value, str):
        return [Error(f"{label} must be a dotted path or a callable.", id="statecharts.E005")]
    try:
        imported = import_string(value)
    except ImportError as exc:
        return [Error(f"{label} cannot be imported: {exc}", id="statecharts.E005")]
    if not callable(imported):
        return [Error(f"{label} ({value}) is not callable.", id="statecharts.E005")]
    return []
