"""Retry policies and give-up answers, shared by the apps that retry work (no settings here).

The type every app built on the stepper uses for "what does a failure cost": the ``timers``
app's deliveries (``timers.retry_policy``, which fills a policy's unset fields from its
``TIMER_*`` settings) and the ``routes`` app's routes (``routes.retrying``: only failures a
route declares were not sent, at most once). It lives here because those apps may not import
each other (tests/architecture/test_layers.py) and ``statecharts`` imports none of them.

The backoff after the n-th failed attempt is ``initial * coefficient ** (n - 1)``, capped at
``maximum``, then moved by up to ``± jitter`` of itself (and capped again). The jitter is
derived from a key the caller gives (a row's key, which a replay or an import keeps) and the
attempt, never from a random generator, so a test or a replay computes the same due. An
exception that is an instance of a ``non_retryable`` class fails the work at once, whatever
attempts are left.

A give-up answer (Oban's ``{:cancel, reason}``) ends the work without spending attempts:
``Cancel(reason)`` ends it ``cancelled``, ``Discard(reason)`` ends it ``discarded``, with the
reason recorded.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, fields, replace
from typing import ClassVar


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """What a failure costs; ``None`` fields are filled from defaults (``over``)."""

    max_attempts: int | None = None
    initial_seconds: float | None = None
    coefficient: float | None = None
    maximum_seconds: float | None = None
    jitter: float | None = None  # a fraction of the backoff, 0 to 1
    non_retryable: tuple[type[BaseException], ...] = ()

    def over(self, defaults: RetryPolicy) -> RetryPolicy:
        """This policy, each ``None`` field taken from ``defaults`` (``non_retryable``: both
        lists)."""
        filled = {
            f.name: getattr(defaults, f.name)
            for f in fields(RetryPolicy)
            if f.name != "non_retryable" and getattr(self, f.name) is None
        }
        extra = tuple(c for c in defaults.non_retryable if c not in self.non_retryable)
        return replace(self, **filled, non_retryable=self.non_retryable + extra)

    def retryable(self, exc: BaseException) -> bool:
        return not isinstance(exc, self.non_retryable)

    def backoff(self, attempts: int, key: str) -> float:
        """Seconds until the next attempt after the ``attempts``-th failed one (a filled-in
        policy), its jitter derived from ``key`` and ``attempts``."""
        assert self.initial_seconds is not None and self.coefficient is not None
        assert self.maximum_seconds is not None and self.jitter is not None
        base = min(
            self.initial_seconds * self.coefficient ** max(attempts - 1, 0), self.maximum_seconds
        )
        if not self.jitter:
            return base
        return min(
            max(base * (1 + self.jitter * (2 * unit(key, attempts) - 1)), 0.0), self.maximum_seconds
        )


def unit(key: str, attempts: int) -> float:
    """A number in [0, 1) derived from ``key`` and ``attempts`` alone (the jitter's draw)."""
    digest = hashlib.sha256(f"{key}:{attempts}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@dataclass(frozen=True, slots=True)
class GiveUp:
    """An answer meaning "never do this work": it ends at once with ``status``, no attempt
    spent. Answer one of its two kinds, ``Cancel`` or ``Discard``."""

    reason: str = ""
    status: ClassVar[str] = "discarded"


class Cancel(GiveUp):
    """Cancel the work: it ends ``cancelled``, ``reason`` recorded (Oban's
    ``{:cancel, reason}``)."""

    __slots__ = ()
    status: ClassVar[str] = "cancelled"


class Discard(GiveUp):
    """Discard the work: it ends ``discarded``, ``reason`` recorded."""

    __slots__ = ()
    status: ClassVar[str] = "discarded"
