"""Pending work: what is waiting to happen to executions, and when, from every app.

Work that happens later (a timer due in three days, an outbox message a crash left pending, an
invoke handler to retry) is done in production by workers (the django-q2 cluster) and sweepers.
Tools that must run it themselves, in order and on their own clock (the test workbench in
``statecharts.testing``, ``manage.py statechart deliver``), ask the apps through this registry,
so ``statecharts`` needs to know none of them: each app registers a :class:`WorkSource` in its
``AppConfig.ready()``::

    register_work_source(WorkSource("timers", next_due=..., run_due=...))

``next_due()`` is when its earliest pending work is due (None: nothing pending); ``run_due(now)``
does what is due at ``now`` and returns how many things it did; ``pending_timers(execution)``,
given by a source that keeps timers, lists an execution's pending timer rows, soonest first
(``Workbench.pending_timers``).

``recover(now)``, given by a source whose work a dead worker can leave half done (an invoke
handler's start whose lease ran out), hands that work over again and returns how much: the
timer workers' heartbeat calls it every beat (``recover_due``), so such work is picked up
within seconds by whichever worker group runs timers, without either app knowing the other.
It must be quick (a query and a hand-over, never the work itself in the caller's thread).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.apps import apps

log = logging.getLogger("statecharts")


@dataclass(frozen=True, slots=True)
class WorkSource:
    app: str  # the app label (its work is ignored when the app is not installed)
    next_due: Callable[[], datetime | None]
    run_due: Callable[[datetime], int]
    pending_timers: Callable[[Any], list[Any]] | None = None
    recover: Callable[[datetime], int] | None = None


_sources: dict[str, WorkSource] = {}


def register_work_source(source: WorkSource) -> None:
    _sources[source.app] = source


def work_sources() -> list[WorkSource]:
    return [s for s in _sources.values() if apps.is_installed(s.app)]


def next_due() -> datetime | None:
    """When the earliest pending work of any app is due."""
    times = [t for t in (s.next_due() for s in work_sources()) if t is not None]
    return min(times) if times else None


def recover_due(now: datetime) -> int:
    """Every source's ``recover(now)``; how much was handed over. A source that raises is
    logged and skipped (the next call tries again): the caller is a heartbeat."""
    handed = 0
    for source in work_sources():
        if source.recover is None:
            continue
        try:
            handed += source.recover(now)
        except Exception:
            log.warning("recovering the work of %s failed", source.app, exc_info=True)
    return handed


def run_due(now: datetime) -> int:
    """Do all the work due at ``now``, app after app, until none is left; how much was done."""
    done = 0
    for _ in range(10_000):  # (bounded: work that makes due work forever is a bug to see)
        round_done = sum(source.run_due(now) for source in work_sources())
        if not round_done:
            return done
        done += round_done
    raise RuntimeError("pending work keeps making more pending work at the same instant")
