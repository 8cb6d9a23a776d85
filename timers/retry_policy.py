"""Retry policies of timer deliveries, and the give-up answers a delivery may give.

A delivery class (``timers.delivery``) may carry a ``retry_policy``: what a raise of its
``deliver`` costs. Any field it leaves ``None`` is taken from the global settings, which are
the defaults of every delivery (``TIMER_MAX_ATTEMPTS``, ``TIMER_RETRY_SECONDS``,
``TIMER_RETRY_COEFFICIENT``, ``TIMER_RETRY_MAX_SECONDS``, ``TIMER_RETRY_JITTER``)::

    class Webhook:
        retry_policy = RetryPolicy(max_attempts=10, maximum_seconds=600,
                                   non_retryable=(PermissionError,))

        def deliver(self, fire): ...

The backoff after the n-th failed attempt is ``initial * coefficient ** (n - 1)``, capped at
``maximum``, then moved by up to ``± jitter`` of itself (and capped again). The jitter is
derived from the row's key (its execution and ordinal) and the attempt, never from a random
generator, so a test or a replay computes the same due. An exception that is an instance of a
``non_retryable`` class fails the timer at once, whatever attempts are left.

A delivery may also give up on a row without spending attempts (Oban's ``{:cancel, reason}``):
``Cancel(reason)`` ends it ``cancelled``, ``Discard(reason)`` ends it ``discarded``, with the
reason recorded. Like ``Snooze``, answer it before doing anything: what the delivery wrote
commits with the row's end.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from timers.conf import timer_settings


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """What a raise costs a timer; ``None`` fields come from the global settings."""

    max_attempts: int | None = None
    initial_seconds: float | None = None
    coefficient: float | None = None
    maximum_seconds: float | None = None
    jitter: float | None = None  # a fraction of the backoff, 0 to 1
    non_retryable: tuple[type[BaseException], ...] = ()

    def with_defaults(self) -> RetryPolicy:
        """This policy, each ``None`` field filled from the settings."""
        return replace(
            self,
            max_attempts=_or(self.max_attempts, timer_settings.TIMER_MAX_ATTEMPTS),
            initial_seconds=_or(self.initial_seconds, timer_settings.TIMER_RETRY_SECONDS),
            coefficient=_or(self.coefficient, timer_settings.TIMER_RETRY_COEFFICIENT),
            maximum_seconds=_or(self.maximum_seconds, timer_settings.TIMER_RETRY_MAX_SECONDS),
            jitter=_or(self.jitter, timer_settings.TIMER_RETRY_JITTER),
        )

    def retryable(self, exc: BaseException) -> bool:
        return not isinstance(exc, self.non_retryable)

    def backoff(self, attempts: int, key: str) -> float:
        """Seconds until the next attempt after the ``attempts``-th failed one (a filled-in
        policy: ``with_defaults``), its jitter derived from ``key`` and ``attempts``."""
        assert self.initial_seconds is not None and self.coefficient is not None
        assert self.maximum_seconds is not None and self.jitter is not None
        base = min(
            self.initial_seconds * self.coefficient ** max(attempts - 1, 0), self.maximum_seconds
        )
        if not self.jitter:
            return base
        digest = hashlib.sha256(f"{key}:{attempts}".encode()).digest()
        unit = int.from_bytes(digest[:8], "big") / 2**64  # in [0, 1)
        return min(max(base * (1 + self.jitter * (2 * unit - 1)), 0.0), self.maximum_seconds)


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


def policy_of(delivery: object | None) -> RetryPolicy:
    """The filled-in policy of a delivery (its class's ``retry_policy``, the settings for
    what it leaves unset); the settings alone for none, or for one without a policy."""
    policy = getattr(delivery, "retry_policy", None)
    if not isinstance(policy, RetryPolicy):
        policy = RetryPolicy()
    return policy.with_defaults()


def timer_key(execution_id: int, ordinal: int) -> str:
    """The jitter's seed: the row's key, which a replay or an import keeps."""
    return f"{execution_id}:{ordinal}"


@dataclass(frozen=True, slots=True)
class GiveUp:
    """A delivery's "never deliver this row": it ends at once with ``status``, no attempt
    spent. Answer one of its two kinds, ``Cancel`` or ``Discard``."""

    reason: str = ""
    status: ClassVar[str] = "discarded"


class Cancel(GiveUp):
    """The delivery cancels the row: it ends ``cancelled``, ``reason`` recorded (Oban's
    ``{:cancel, reason}``)."""

    __slots__ = ()
    status: ClassVar[str] = "cancelled"


class Discard(GiveUp):
    """The delivery discards the row: it ends ``discarded``, ``reason`` recorded."""

    __slots__ = ()
    status: ClassVar[str] = "discarded"
