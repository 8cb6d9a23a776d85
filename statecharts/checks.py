"""System checks: a misconfigured STATECHARTS setting is reported at start-up, not mid-step.

Registered from the app's declaration (``statecharts.declaration``). Each check id means one
thing: docs/system-checks.md lists them, and tests/project/test_check_ids.py holds that no
id is raised from two places and every id is listed there.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.checks import CheckMessage, Error
from django.db import router
from django.utils.module_loading import import_string

from statecharts.conf import all_defaults, declarations, settings_checks
from statecharts.core.plan import InstructionKind


def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The configured ``STATECHARTS`` dict: a dict, of keys the installed apps declare, its
    integer keys positive; then each installed app's own checks of it."""
    configured = getattr(settings, "STATECHARTS", None)
    if configured is None:
        return []
    if not isinstance(configured, dict):
        return [Error("STATECHARTS must be a dict.", id="statecharts.E001")]
    defaults = all_defaults()
    problems: list[CheckMessage] = []
    for name in sorted(set(configured) - set(defaults)):
        hint = (
            f"Known settings: {', '.join(sorted(defaults))}. (A key of an app that is not in "
            "INSTALLED_APPS is not known: is its app installed?)"
        )
        problems.append(
            Error(f"STATECHARTS[{name!r}] is not a setting.", hint=hint, id="statecharts.E002")
        )
    positive = [
        name
        for name, value in defaults.items()
        if isinstance(value, int) and not isinstance(value, bool)
    ]
    for name in positive:
        value = configured.get(name, defaults[name])
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            problems.append(
                Error(f"STATECHARTS[{name!r}] must be a positive integer.", id="statecharts.E003")
            )
    for check in settings_checks():
        problems.extend(check(configured))
    return problems


def check_own_settings(configured: dict[str, Any]) -> list[CheckMessage]:
    """The ``statecharts`` app's own keys (the policies check theirs)."""
    problems: list[CheckMessage] = []
    for name in ("CLOCK", "RESOLVER"):
        problems.extend(_importable(f"STATECHARTS[{name!r}]", configured.get(name)))
    problems.extend(_check_retention(configured))
    problems.extend(_check_choices(configured))
    problems.extend(_check_switches(configured))
    problems.extend(_check_performers(configured))
    problems.extend(_check_transforms(configured.get("MIGRATION_TRANSFORMS", {})))
    return problems


# Settings that take one of a few words: the words.
CHOICES = {"DEFAULT_DATAMODEL": ("ecmascript", "null"), "EXPRESSION_SYNTAX": ("warning", "error")}


def _check_choices(configured: dict[str, Any]) -> list[CheckMessage]:
    return [
        Error(
            f"STATECHARTS[{name!r}] must be one of {', '.join(map(repr, choices))}.",
            id="statecharts.E030",
        )
        for name, choices in CHOICES.items()
        if name in configured and configured[name] not in choices
    ]


# Settings that are switched on or off. A string such as "false" is truthy: it would turn a
# switch on silently, so anything but a bool is refused. (PRUNE_SCHEDULED has its own check,
# statecharts.E006, with the retention settings.)
SWITCHES = ("PREPARED_STATEMENTS", "OPENTELEMETRY")


def _check_switches(configured: dict[str, Any]) -> list[CheckMessage]:
    return [
        Error(f"STATECHARTS[{name!r}] must be True or False.", id="statecharts.E031")
        for name in SWITCHES
        if name in configured and not isinstance(configured[name], bool)
    ]


# Retention settings that may be None (keep forever): a positive number of days otherwise.
OPTIONAL_DAYS = ("EXECUTION_RETENTION_DAYS", "HISTORY_RETENTION_DAYS")


def _check_retention(configured: dict[str, Any]) -> list[CheckMessage]:
    problems: list[CheckMessage] = []
    for name in OPTIONAL_DAYS:
        value = configured.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            problems.append(
                Error(
                    f"STATECHARTS[{name!r}] must be a positive number of days, or None "
                    "(kept forever).",
                    id="statecharts.E006",
                )
            )
    if not isinstance(configured.get("PRUNE_SCHEDULED", True), bool):
        problems.append(
            Error("STATECHARTS['PRUNE_SCHEDULED'] must be True or False.", id="statecharts.E006")
        )
    return problems + _check_thresholds(configured.get("HEALTH_THRESHOLDS", {}))


def _check_thresholds(thresholds: Any) -> list[CheckMessage]:
    """``{"timers.oldest_overdue_seconds": {"warning": 30, "critical": None}, ...}``."""
    label = "STATECHARTS['HEALTH_THRESHOLDS']"
    if not isinstance(thresholds, dict):
        return [Error(f"{label} must be a dict.", id="statecharts.E007")]
    problems: list[CheckMessage] = []
    for name, levels in thresholds.items():
        where = f"{label}[{name!r}]"
        if not isinstance(levels, dict) or not set(levels) <= {"warning", "critical"}:
            problems.append(
                Error(
                    f"{where} must be a dict with 'warning' and/or 'critical'.",
                    id="statecharts.E007",
                )
            )
            continue
        for level, value in levels.items():
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if value is not None and not number:
                problems.append(
                    Error(f"{where}[{level!r}] must be a number or None.", id="statecharts.E007")
                )
    return problems


def _check_performers(configured: dict[str, Any]) -> list[CheckMessage]:
    problems: list[CheckMessage] = []
    kinds = {kind.value for kind in InstructionKind}
    performers = configured.get("PERFORMERS", {})
    if not isinstance(performers, dict):
        return [Error("STATECHARTS['PERFORMERS'] must be a dict.", id="statecharts.E009")]
    for kind, performer in performers.items():
        if kind not in kinds:
            problems.append(
                Error(
                    f"STATECHARTS['PERFORMERS'] has an unknown instruction kind {kind!r}.",
                    hint=f"Kinds: {', '.join(sorted(kinds))}.",
                    id="statecharts.E004",
                )
            )
        problems.extend(_importable(f"STATECHARTS['PERFORMERS'][{kind!r}]", performer))
    return problems


def check_one_database(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Database routers are supported as long as every model a step writes is routed to the
    one database steps use (a step is one transaction)."""
    from statecharts.models import Execution

    expected = router.db_for_write(Execution)
    problems: list[CheckMessage] = []
    step_apps = [declaration.app for declaration in declarations() if declaration.step_models]
    for label in step_apps:
        for model in apps.get_app_config(label).get_models():
            alias = router.db_for_write(model)
            if alias != expected:
                problems.append(
                    Error(
                        f"{model._meta.label} is routed to database {alias!r}, but steps "
                        f"run on {expected!r} (where Execution is written).",
                        hint=f"Route every model of the apps {', '.join(step_apps)} to one "
                        "database: a step writes them in one transaction.",
                        id="statecharts.E010",
                    )
                )
    return problems


def _check_transforms(transforms: Any) -> list[CheckMessage]:
    """MIGRATION_TRANSFORMS: names -> importable callables
    (statecharts.operations.chart_migration)."""
    if not isinstance(transforms, dict):
        return [Error("STATECHARTS['MIGRATION_TRANSFORMS'] must be a dict.", id="statecharts.E008")]
    problems: list[CheckMessage] = []
    for name, value in transforms.items():
        label = f"STATECHARTS['MIGRATION_TRANSFORMS'][{name!r}]"
        problems.extend(_importable(label, value, optional=False))
    return problems


def _importable(label: str, value: Any, *, optional: bool = True) -> list[CheckMessage]:
    """A dotted path of a callable, or a callable (or None, when ``optional``)."""
    if (value is None and optional) or callable(value):
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
