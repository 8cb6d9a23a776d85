"""The project's settings: one namespaced dict, ``STATECHARTS``, read lazily.

Every read goes through ``django.conf.settings`` at the time of use, so ``override_settings``
works in tests. Defaults::

    STATECHARTS = {
        "CLOCK": "django.utils.timezone.now",      # injected clock: () -> aware datetime
        "RESOLVER": "statecharts.core.resolve.refuse_all",  # src="..." of stored charts
        "ROUND_BUDGET": 10_000,     # microstep rounds per macrostep before the execution fails
        "SEND_BUDGET": 1_000,       # self-sends drained inside one step before it fails
        "TIME_LIMIT_MS": 500,       # per ECMAScript evaluation
        "MEMORY_LIMIT_BYTES": 64 * 1024 * 1024,
        "OUTBOX_BATCH": 1_000,      # cross-execution deliveries done right after one step
        "EFFECT_HANDLERS": {},      # effect kind -> dotted path (see statecharts.handlers)
        # Timers (the timers app; see docs/timers.md):
        "TIMER_BATCH": 100,         # timers one firer claims at a time
        "TIMER_FIRE_CHUNK": 20,     # timers fired in one transaction (fewer commits per fire)
        "TIMER_LEASE_SECONDS": 60,  # a claim expires: a dead firer only delays its timers
        "TIMER_MAX_ATTEMPTS": 5,    # deliveries that raise, before a timer is marked failed
        "TIMER_RETRY_SECONDS": 5,   # backoff base: 5 s, 10 s, 20 s, ...
        "TIMER_SNOOZE_SECONDS": 300,  # an execution that needs migration: try again later
        "TIMER_POLL_MS": 200,       # how often a sweeper looks for due timers
        "TIMER_SWEEP_SECONDS": 90,  # how long one sweeper task lives (a schedule restarts it)
        "TIMER_RETENTION_DAYS": 30, # prune_timers keeps settled rows this long
    }
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

DEFAULTS: dict[str, Any] = {
    "CLOCK": "django.utils.timezone.now",
    "RESOLVER": "statecharts.core.resolve.refuse_all",
    "ROUND_BUDGET": 10_000,
    "SEND_BUDGET": 1_000,
    "TIME_LIMIT_MS": 500,
    "MEMORY_LIMIT_BYTES": 64 * 1024 * 1024,
    "OUTBOX_BATCH": 1_000,
    # Kinds not listed here are recorded in the history and logged as unhandled; the timers
    # and invocations apps register theirs.
    "EFFECT_HANDLERS": {},
    "TIMER_BATCH": 100,
    "TIMER_FIRE_CHUNK": 20,
    "TIMER_LEASE_SECONDS": 60,
    "TIMER_MAX_ATTEMPTS": 5,
    "TIMER_RETRY_SECONDS": 5,
    "TIMER_SNOOZE_SECONDS": 300,
    "TIMER_POLL_MS": 200,
    "TIMER_SWEEP_SECONDS": 90,
    "TIMER_RETENTION_DAYS": 30,
}


class StatechartsSettings:
    def __getattr__(self, name: str) -> Any:
        if name not in DEFAULTS:
            raise AttributeError(f"unknown STATECHARTS setting {name!r}")
        configured: dict[str, Any] = getattr(settings, "STATECHARTS", {}) or {}
        return configured.get(name, DEFAULTS[name])

    def clock(self) -> Callable[[], datetime]:
        clock = self.CLOCK
        return import_string(clock) if isinstance(clock, str) else clock

    def now(self) -> datetime:
        return self.clock()()


statecharts_settings = StatechartsSettings()
