"""Paced catch-up: a backlog of overdue timers drains at a bounded rate, live timers first.

After downtime (or a burst beyond what the firers can take) the due index holds a backlog of
**overdue** timers: due more than ``TIMER_OVERDUE_SECONDS`` (60 s) ago. Claimed in due order,
as every claim once was, a timer that has just come due waits behind the whole backlog: with
100,000 overdue rows, for minutes. A **paced** claim (``timers.claiming.claim_batch(...,
paced=True)``: the django-q2 sweeper and drains, ``fire_timers --loop``) instead

1. takes the **live** rows first (due within the last ``TIMER_OVERDUE_SECONDS``: one range
   of the due index), in due order;
2. fills the rest of its batch with overdue rows, most overdue first, at most what this
   process's allowance holds now (:func:`allowance`): a token bucket refilled at
   ``TIMER_CATCHUP_PER_SECOND`` rows per second, holding at most one second's worth (at
   least one row).

So the backlog drains at ``TIMER_CATCHUP_PER_SECOND`` per firer process, and live timers keep
their lateness low meanwhile. Nothing overdue is skipped or dropped (each is delivered, or
expired by its own ``ds:expires``: ``timers.expiry``), only paced. ``TIMER_CATCHUP_PER_SECOND
= 0`` turns pacing off: claims take the due rows in due order, most overdue first.

The bucket is per process (each django-q2 worker keeps its own), on the claim's clock (the
``now`` it is given: tests inject it; a clock that goes back refills nothing). A one-off
``fire_timers`` (``--once``) and ``fire_all_due`` are not paced: an operator asking for
everything due gets everything due.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime, timedelta

from timers.conf import timer_settings


@dataclass(slots=True)
class Bucket:
    """Overdue rows this process may still claim: ``tokens``, refilled at ``rate`` per second
    up to ``capacity`` (one second's worth, at least one row: a rate below one a second
    still lets a row through now and then), as of ``at``."""

    rate: float
    tokens: float
    at: datetime | None = None

    @property
    def capacity(self) -> float:
        return max(self.rate, 1.0)

    def refill(self, now: datetime) -> None:
        if self.at is not None and now > self.at:
            gained = (now - self.at).total_seconds() * self.rate
            self.tokens = min(self.capacity, self.tokens + gained)
        if self.at is None or now > self.at:
            self.at = now


_bucket: Bucket | None = None
_lock = threading.Lock()


def rate() -> float:
    """``TIMER_CATCHUP_PER_SECOND``: 0 means unpaced."""
    return float(timer_settings.TIMER_CATCHUP_PER_SECOND)


def overdue_edge(now: datetime) -> datetime:
    """Rows due before this are overdue (``TIMER_OVERDUE_SECONDS`` before ``now``)."""
    return now - timedelta(seconds=timer_settings.TIMER_OVERDUE_SECONDS)


def allowance(now: datetime) -> int | None:
    """How many overdue rows this process may claim at ``now`` (None: pacing is off)."""
    global _bucket
    per_second = rate()
    if per_second <= 0:
        return None
    with _lock:
        if _bucket is None or _bucket.rate != per_second:
            _bucket = Bucket(per_second, max(per_second, 1.0))  # (a changed setting: afresh)
        _bucket.refill(now)
        return int(_bucket.tokens)


def spend(count: int) -> None:
    """Take ``count`` overdue rows claimed (after :func:`allowance`) out of the bucket."""
    with _lock:
        if _bucket is not None and count:
            _bucket.tokens = max(0.0, _bucket.tokens - count)


def reset() -> None:
    """Forget the bucket (tests; a process starting afresh has a full one)."""
    global _bucket
    with _lock:
        _bucket = None
