"""Firing due timers: claim, lock (execution, then timer), check liveness, deliver, settle.

``fire_due`` is what every firer runs: the ``fire_timers`` command, the django-q2 tasks and
the tests. Correctness never depends on the claim: any firer may fire any pending timer, and
a timer row only ever leaves ``pending`` through a conditional UPDATE (``WHERE status =
'pending'``) under its row lock, taken under its execution's lock when it is delivered, so a
fire and a cancel of one row (the cancel runs inside a step, which holds the same lock) can
never both succeed, and two firers never deliver one timer twice. Claims keep concurrent
firers from doing the same work, and count attempts: a claim is an attempt of each timer it
takes, and a claim that ended unsettled (its lease ran out, or its per-fire timeout passed,
whichever came first) is an attempt spent; the next claim records it, and ends the timer
``failed`` ("timed out") when it was the last one.

What a fired timer does is its delivery's business (``timers.delivery``: a name on the row,
looked up in ``TIMER_DELIVERIES``; by default the stepper's ``perform_delivery``).

One concern per module: ``timers.claiming`` (claims, their leases and the attempts they
spend: ``claim_batch``, ``_keep``), ``timers.chunks`` (a chunk of timers fired in one
transaction: ``fire_rows``), ``timers.fire_one`` (one timer's fire under its execution's
lock: ``fire_row``, ``fire``), ``timers.settling`` (what a fire writes on its row: settle,
snooze, record a failed attempt; the outcomes). This module is the loop every firer runs
(``fire_due``, ``fire_all_due``) and keeps the names of the others importable from here.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from datetime import datetime

from django.apps import apps

from statecharts import stepper
from statecharts.work import WorkSource
from timers import leases
from timers.chunks import fire_rows
from timers.claiming import TIMED_OUT, Claim, _keep, claim, claim_batch, claim_rows, walk_due_index
from timers.conf import timer_settings
from timers.fire_one import InvalidAnswer, Undecodable, fire, fire_row
from timers.models import Timer
from timers.settling import DISCARDED, FAILED, FIRED, RETRYING, SKIPPED, SNOOZED


@dataclass(slots=True)
class FireReport:
    outcomes: dict[str, int] = field(default_factory=dict)

    def add(self, outcome: str) -> None:
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    @property
    def fired(self) -> int:
        return self.outcomes.get(FIRED, 0)

    @property
    def handled(self) -> int:
        return sum(n for outcome, n in self.outcomes.items() if outcome != SKIPPED)

    def __str__(self) -> str:
        parts = [f"{n} {outcome}" for outcome, n in sorted(self.outcomes.items())]
        return ", ".join(parts) or "nothing due"


def fire_due(
    *,
    now: datetime | None = None,
    limit: int | None = None,
    fresh_only: bool = False,
    paced: bool = False,
) -> FireReport:
    """Claim and fire one batch of due timers. Returns what happened to each.

    The batch's fresh timers are fired in chunks of ``TIMER_FIRE_CHUNK`` timers, each chunk in
    one transaction (``fire_rows``); then its suspects (their previous claim ended unsettled):
    taken over for the first time in a row, in chunks too; for the second, one by one
    (``Claim.units``). Without ``now`` each chunk reads the clock when it starts, so
    its steps are stamped with the time they really ran, not the time the batch was claimed;
    and a batch that runs long renews the claim of what it has not fired yet before half its
    window has passed (``_keep``), so a live firer never lets its own timers time out. Under
    a running heartbeat (``timers.leases``: django-q2's drains, ``fire_timers``) the batch's
    leases are renewed meanwhile too, also during a long chunk. ``fresh_only`` claims no
    suspects (``claim_batch``). ``paced``: live timers first, overdue ones at the catch-up
    rate (``timers.pacing``).
    """
    limit = limit or timer_settings.TIMER_BATCH
    report = FireReport()
    batch = claim_batch(now or timer_settings.now(), limit, fresh_only=fresh_only, paced=paced)
    for _ in range(batch.failed):
        report.add(FAILED)
    units = batch.units(timer_settings.TIMER_FIRE_CHUNK)
    held = leases.heartbeat().holding(batch.token, [t.pk for t in batch.rows], batch.claimed)
    with held if now is None else contextlib.nullcontext():  # (the heartbeat's clock is real)
        for index, unit in enumerate(units):
            if index:
                unit = _keep(batch, unit, [t for rest in units[index:] for t in rest], now)
            for outcome in fire_rows(unit, now=now):
                report.add(outcome)
    if apps.is_installed("routes"):  # delayed route sends: the same loop (timers.routequeue)
        from timers import routequeue

        for outcome in routequeue.fire_due(now=now, limit=limit):
            report.add(outcome)
    return report


def fire_all_due(
    *, now: datetime | None = None, batch: int | None = None, paced: bool = False
) -> FireReport:
    """Fire batches until nothing is due at ``now`` (``fire_timers --once``); ``paced``
    (``fire_timers --loop``): until nothing more may be claimed now (``timers.pacing``)."""
    total = FireReport()
    while True:
        report = fire_due(now=now, limit=batch, paced=paced)
        for outcome, n in report.outcomes.items():
            total.outcomes[outcome] = total.outcomes.get(outcome, 0) + n
        if not report.outcomes:
            return total


def _next_due() -> datetime | None:
    due: datetime | None = (
        Timer.objects.using(stepper.database())
        .pending()
        .order_by("due", "id")
        .values_list("due", flat=True)
        .first()
    )
    if apps.is_installed("routes"):
        from timers import routequeue

        route_due = routequeue.next_due()
        if route_due is not None and (due is None or route_due < due):
            return route_due
    return due


# Due timers, for tools that run pending work themselves (statecharts.work).
timer_work = WorkSource(
    "timers", next_due=_next_due, run_due=lambda now: fire_all_due(now=now).handled
)


__all__ = [
    "DISCARDED",
    "FAILED",
    "FIRED",
    "RETRYING",
    "SKIPPED",
    "SNOOZED",
    "TIMED_OUT",
    "Claim",
    "FireReport",
    "InvalidAnswer",
    "Undecodable",
    "claim",
    "claim_batch",
    "claim_rows",
    "fire",
    "fire_all_due",
    "fire_due",
    "fire_row",
    "fire_rows",
    "timer_work",
    "walk_due_index",
]
