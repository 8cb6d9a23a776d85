"""System checks: a misconfigured STATECHARTS setting is reported at start-up, not mid-step."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register
from django.db import router
from django.utils.module_loading import import_string

from statecharts.conf import all_defaults, registered_groups
from statecharts.core.plan import InstructionKind
from statecharts.policies import codecs  # noqa: F401  (registers the PAYLOAD_* settings and their check)
from statecharts.stepper.performing import LEGACY_EFFECT_KINDS

# Apps whose rows take part in a step's transaction: they must live in one database.
STEP_APPS = ("statecharts", "timers", "invocations")


@register()
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    configured = getattr(settings, "STATECHARTS", None)
    if configured is None:
        return []
    if not isinstance(configured, dict):
        return [Error("STATECHARTS must be a dict.", id="statecharts.E001")]
    defaults = all_defaults()
    problems: list[CheckMessage] = []
    for name in sorted(set(configured) - set(defaults)):
        hint = f"Known settings: {', '.join(sorted(defaults))}."
        if name.startswith("TIMER_"):
            hint += " (TIMER_* settings belong to the timers app: is it installed?)"
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
    for name in ("CLOCK", "RESOLVER"):
        problems.extend(_importable(f"STATECHARTS[{name!r}]", configured.get(name)))
    problems.extend(_check_retention(configured))
    problems.extend(_check_choices(configured))
    problems.extend(_check_switches(configured))
    problems.extend(_check_performers(configured))
    problems.extend(_check_transforms(configured.get("MIGRATION_TRANSFORMS", {})))
    for group in registered_groups():
        if group.check is not None:
            problems.extend(group.check(configured))
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
        return [Error("STATECHARTS['PERFORMERS'] must be a dict.", id="statecharts.E001")]
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
    handlers = configured.get("EFFECT_HANDLERS", {})
    if not isinstance(handlers, dict):
        problems.append(
            Error("STATECHARTS['EFFECT_HANDLERS'] must be a dict.", id="statecharts.E001")
        )
        return problems
    if handlers:
        mapping = ", ".join(f"{k} -> {v.value}" for k, v in LEGACY_EFFECT_KINDS.items())
        problems.append(
            Warning(
                "STATECHARTS['EFFECT_HANDLERS'] is deprecated: use STATECHARTS['PERFORMERS'], "
                "keyed by instruction kind (a performer gets the instruction; its .effect is "
                "what a handler got).",
                hint=f"Effect kinds map to instruction kinds: {mapping}.",
                id="statecharts.W001",
            )
        )
    for kind, handler in handlers.items():
        if kind not in LEGACY_EFFECT_KINDS:
            problems.append(
                Error(
                    f"STATECHARTS['EFFECT_HANDLERS'] has an unknown effect kind {kind!r}.",
                    hint=f"Kinds: {', '.join(sorted(LEGACY_EFFECT_KINDS))}.",
                    id="statecharts.E004",
                )
            )
        problems.extend(_importable(f"STATECHARTS['EFFECT_HANDLERS'][{kind!r}]", handler))
    return problems


@register("database")
def check_one_database(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Database routers are supported as long as every model a step writes is routed to the
    one database steps use (a step is one transaction)."""
    from statecharts.models import Execution

    expected = router.db_for_write(Execution)
    problems: list[CheckMessage] = []
    for label in STEP_APPS:
        if not apps.is_installed(label):
            continue
        for model in apps.get_app_config(label).get_models():
            alias = router.db_for_write(model)
            if alias != expected:
                problems.append(
                    Error(
                        f"{model._meta.label} is routed to database {alias!r}, but steps "
                        f"run on {expected!r} (where Execution is written).",
                        hint="Route every model of the statecharts, timers and invocations "
                        "apps to one database: a step writes them in one transaction.",
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
        if value is None:
            problems.append(
                Error(f"{label} must be a dotted path or a callable.", id="statecharts.E005")
            )
        else:
            problems.extend(_importable(label, value))
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
