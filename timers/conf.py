"""The timers app's settings: ``TIMER_*`` keys of the one ``STATECHARTS`` dict.

Registered with the ``statecharts`` settings registry when this module is imported (every
timers module reads settings through it), so ``statecharts_settings.TIMER_BATCH`` works and
``manage.py check`` knows the keys. Defaults (docs/timers.md)::

    "TIMER_BATCH": 100,         # timers one firer claims at a time
    "TIMER_FIRE_CHUNK": 20,     # timers fired in one transaction (fewer commits per fire)
    "TIMER_LEASE_SECONDS": 60,  # a claim expires: a dead firer only delays its timers
    "TIMER_MAX_ATTEMPTS": 5,    # deliveries that raise, before a timer is marked failed
    "TIMER_RETRY_SECONDS": 5,   # backoff base: 5 s, 10 s, 20 s, ...
    "TIMER_SNOOZE_SECONDS": 300,  # an execution that cannot take it now: try again later
    "TIMER_POLL_MS": 200,       # how often a sweeper looks for due timers
    "TIMER_SWEEP_SECONDS": 90,  # how long one sweeper task lives (a schedule restarts it)
    "TIMER_RETENTION_DAYS": 30, # prune_timers keeps settled rows this long
"""

from __future__ import annotations

from statecharts.conf import register_settings, statecharts_settings

DEFAULTS = {
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

register_settings("timers", DEFAULTS)

timer_settings = statecharts_settings  # (read the TIMER_* keys through this name)
