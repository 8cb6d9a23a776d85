"""The timers app's settings: ``TIMER_*`` keys of the one ``STATECHARTS`` dict.

Registered with the ``statecharts`` settings registry when this module is imported (every
timers module reads settings through it), so ``statecharts_settings.TIMER_BATCH`` works and
``manage.py check`` knows the keys and runs :func:`check`. Defaults (docs/timers.md)::

    "TIMER_BATCH": 100,         # timers one firer claims at a time
    "TIMER_FIRE_CHUNK": 20,     # timers fired in one transaction (fewer commits per fire)
    "TIMER_ROUTE_FIRE_CHUNK": 20,  # route timers fired in one transaction (keys in doubt per crash)
    "TIMER_LEASE_SECONDS": 3,   # a claim's lease, renewed by a live firer's heartbeat
    "TIMER_FIRE_TIMEOUT_SECONDS": 120,  # per-fire timeout, written on the row when scheduled
    "TIMER_MAX_ATTEMPTS": 5,    # attempts (raised or timed out) before a timer is failed
    "TIMER_RETRY_SECONDS": 5,   # backoff base: 5 s, 10 s, 20 s, ...
    "TIMER_SNOOZE_SECONDS": 300,  # an execution that cannot take it now: try again later
    "TIMER_POLL_MS": 200,       # how often a sweeper looks for due timers
    "TIMER_SWEEP_SECONDS": 90,  # how long one sweeper task lives (a schedule restarts it)
    "TIMER_SWEEPER_FIRES": True,  # a sweeper fires due timers itself, not only via drains
    "TIMER_RETENTION_DAYS": 30, # statechart prune keeps settled rows this long
    "TIMER_DELIVERIES": {"default": "timers.delivery.StepperDelivery"},  # name -> class
    "TIMER_DELIVERY": "default",  # the delivery new timer rows name
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from django.core.checks import CheckMessage, Error
from django.utils.module_loading import import_string

from statecharts.conf import register_settings, statecharts_settings

DEFAULT_DELIVERY = "default"

DEFAULTS: dict[str, Any] = {
    "TIMER_BATCH": 100,
    "TIMER_FIRE_CHUNK": 20,
    # Route timer rows (delayed route sends) fired in one transaction. A firer killed after a
    # chunk's commit leaves its unsettled keys "in doubt" (never retried): 1 gives one key in
    # doubt per crash without un-chunking SCXML timers (docs/routes.md).
    "TIMER_ROUTE_FIRE_CHUNK": 20,
    # A claim's lease: a dead firer's timers are taken over this long after its last renewal
    # (a live firer renews it every third of it: timers.leases). 3 s + the sweeper's poll
    # (0.2 s) + a drain's start (django-q2's poll, 0.1 s) keeps recovery under 5 s.
    "TIMER_LEASE_SECONDS": 3,
    "TIMER_FIRE_TIMEOUT_SECONDS": 120,
    "TIMER_MAX_ATTEMPTS": 5,
    "TIMER_RETRY_SECONDS": 5,
    "TIMER_SNOOZE_SECONDS": 300,
    "TIMER_POLL_MS": 200,
    "TIMER_SWEEP_SECONDS": 90,
    # A django-q2 sweeper fires due timers itself (one batch, then it looks again), and
    # enqueues drains only for a backlog beyond what the firers at work take; False: it only
    # enqueues drains (the broker's hop to a drain is then in every timer's lateness).
    "TIMER_SWEEPER_FIRES": True,
    "TIMER_RETENTION_DAYS": 30,
    # Delivery name -> dotted path of a class (timers.delivery.Delivery), instantiated once
    # per process. A timer row names its delivery; the name is looked up here when it fires.
    "TIMER_DELIVERIES": {DEFAULT_DELIVERY: "timers.delivery.StepperDelivery"},
    "TIMER_DELIVERY": DEFAULT_DELIVERY,
}


def check(configured: Mapping[str, Any]) -> list[CheckMessage]:
    """``manage.py check`` for the timers' settings (the generic check already refuses
    unknown keys and non-positive integers): the per-fire timeout outlasts a step, and every
    registered delivery can be loaded now.

    Rows naming a delivery this deployment does not know are not an error here: a timer row
    may have been written by a newer node of a rolling deploy; it is snoozed when it fires.
    """
    problems: list[CheckMessage] = []
    timeout = configured.get("TIMER_FIRE_TIMEOUT_SECONDS", DEFAULTS["TIMER_FIRE_TIMEOUT_SECONDS"])
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
    if not isinstance(configured.get("TIMER_SWEEPER_FIRES", True), bool):
        problems.append(
            Error("STATECHARTS['TIMER_SWEEPER_FIRES'] must be True or False.", id="timers.E005")
        )
    problems.extend(check_deliveries(configured))
    return problems


def check_deliveries(configured: Mapping[str, Any]) -> list[CheckMessage]:
    deliveries = configured.get("TIMER_DELIVERIES", DEFAULTS["TIMER_DELIVERIES"])
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
    chosen = configured.get("TIMER_DELIVERY", DEFAULTS["TIMER_DELIVERY"])
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


register_settings("timers", DEFAULTS, check)

timer_settings = statecharts_settings  # (read the TIMER_* keys through this name)
