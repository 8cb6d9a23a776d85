"""The timers app's pending work (``statecharts.work``): due timers fired by tools that run
pending work themselves, and an execution's pending timer rows for ``statecharts.testing``."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from timers.firing import timer_work as firing_work
from timers.models import Timer


def pending_timers(execution: Any) -> list[Timer]:
    """``execution``'s pending timer rows, soonest first."""
    return list(Timer.objects.filter(execution=execution, status="pending"))


timer_work = replace(firing_work, pending_timers=pending_timers)
