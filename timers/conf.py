"""The timers app's settings: ``TIMER_*`` keys of the one ``STATECHARTS`` dict.

Declared, with their defaults and what each is, in ``timers/declaration.py`` (the app's
declaration, read by ``statecharts.conf``); read through :data:`timer_settings`. Their check,
:func:`check`, runs in ``manage.py check`` (docs/timers.md, "Settings").
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from django.core.checks import CheckMessage, Error
from django.utils.module_loading import import_string

from statecharts.conf import default, numbers_out_of_range, statecharts_settings


def check(configured: Mapping[str, Any]) -> list[CheckMessage]:
    """``manage.py check`` for the timers' settings (the generic check already refuses
    unknown keys and non-positive integers): the per-fire timeout outlasts a step, and every
    registered delivery can be loaded now.

    Rows naming a delivery this deployment does not know are not an error here: a timer row
    may have been written by a newer node of a rolling deploy; it is snoozed when it fires.
    """
    problems: list[CheckMessage] = []
    timeout = configured.get("TIMER_FIRE_TIMEOUT_SECONDS", default("TIMER_FIRE_TIMEOUT_SECONDS"))
    budget_ms = configured.get("STEP_TIME_BUDGET_MS", statecharts_settings.STEP_TIME_BUDGET_MS)
    if (
        isinstance(timeout, int)
        and not isinstance(timeout, bool)
        and isinstance(budget_ms, int)
        and timeout * 1000 <= budget_ms
    ):
        problems.append(
            Error(
                f"STATECHARTS['TIMER_FIRE_TIMEOUT_SECONDS'] ({timeout} s) must be longer than "
                f"the step time budget, STEP_TIME_BUDGET_MS ({budget_ms} ms).",
                hint="A fire is a step: a timeout shorter than the step's own budget would "
                "spend attempts on steps the core is still allowed to finish.",
                id="timers.E001",
            )
        )
    for switch in ("TIMER_SWEEPER_FIRES", "TIMER_SWEEP_AT_START"):
        if not isinstance(configured.get(switch, True), bool):
            problems.append(
                Error(f"STATECHARTS['{switch}'] must be True or False.", id="timers.E005")
            )
    problems.extend(check_retry(configured))
    problems.extend(check_deliveries(configured))
    return problems


def check_retry(configured: Mapping[str, Any]) -> list[CheckMessage]:
    """The global retry policy (``timers.retry_policy``), the snooze bounds and the catch-up
    rate (``timers.pacing``): numbers in their range."""
    bounds = {
        "TIMER_RETRY_COEFFICIENT": (1, None),
        "TIMER_RETRY_MAX_SECONDS": (0, None),
        "TIMER_RETRY_JITTER": (0, 1),
        "TIMER_UNDEPLOYED_MAX_SECONDS": (0, None),
        "TIMER_SNOOZE_MAX_SECONDS": (1, None),
        "TIMER_CATCHUP_PER_SECOND": (0, None),
    }
    return numbers_out_of_range(configured, bounds, "timers.E006")


def check_deliveries(configured: Mapping[str, Any]) -> list[CheckMessage]:
    deliveries = configured.get("TIMER_DELIVERIES", default("TIMER_DELIVERIES"))
    label = "STATECHARTS['TIMER_DELIVERIES']"
    if not isinstance(deliveries, Mapping):
        return [Error(f"{label} must be a dict of name -> dotted path.", id="timers.E002")]
    problems: list[CheckMessage] = []
    for name, path in deliveries.items():
        if not isinstance(name, str) or not name or len(name) > 100:
            problems.append(
                Error(
                    f"{label} has a bad name {name!r}: a non-empty string of at most 100 "
                    "characters (it is stored on timer rows).",
                    id="timers.E002",
                )
            )
            continue
        problems.extend(_loadable(f"{label}[{name!r}]", path))
    chosen = configured.get("TIMER_DELIVERY", default("TIMER_DELIVERY"))
    if not isinstance(chosen, str) or chosen not in deliveries:
        problems.append(
            Error(
                f"STATECHARTS['TIMER_DELIVERY'] ({chosen!r}) is not a name in {label}.",
                hint=f"Names: {', '.join(sorted(map(str, deliveries)))}.",
                id="timers.E004",
            )
        )
    return problems


def _loadable(label: str, path: Any) -> list[CheckMessage]:
    if not isinstance(path, str):
        return [Error(f"{label} must be a dotted path to a class.", id="timers.E003")]
    try:
        loaded = import_string(path)
    except ImportError as exc:
        return [Error(f"{label} ({path}) cannot be imported: {exc}", id="timers.E003")]
    if not inspect.isclass(loaded) or not callable(getattr(loaded, "deliver", None)):
        return [
            Error(
                f"{label} ({path}) is not a delivery class (a class with a deliver(fire) "
                "method: timers.delivery.Delivery).",
                id="timers.E003",
            )
        ]
    return []


timer_settings = statecharts_settings  # (read the TIMER_* keys through this name)
