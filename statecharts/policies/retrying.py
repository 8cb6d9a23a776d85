"""Retry policies and give-up answers, shared by the apps that retry work for a chart.

Two apps retry work on a worker's behalf: a timer delivery (``timers.retry_policy``) and an
invoke handler's ``start`` (``invocations.policies``). They use the one policy type defined
here, because neither app may import the other (tests/architecture/test_layers.py): the type
sits below both, in the platform's policies, and each app fills the fields a policy leaves
``None`` from its own global settings (``TIMER_*`` or ``INVOKE_HANDLER_*``).

The backoff after the n-th failed attempt is ``initial * coefficient ** (n - 1)``, capped at
``maximum``, then moved by up to ``± jitter`` of itself (and capped again). The jitter is
derived from the row's key and the attempt, never from a random generator, so a test or a
replay computes the same due. An exception that is an instance of a ``non_retryable`` class
ends the work at once, whatever attempts are left.

A give-up answer (Oban's ``{:cancel, reason}``) ends the row at once without spending its
remaining attempts: ``Cancel(reason)`` or ``Discard(reason)``, the reason recorded. What each
app does with the row then is its own (a timer ends ``cancelled``/``discarded``; an
invocation ends ``failed`` and its parent hears ``error.communication.invoke.<id>``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """What a raise costs; ``None`` fields are filled from an app's settings (``filled``)."""

    max_attempts: int | None = None
    initial_seconds: float | None = None
    coefficient: float | None = None
    maximum_seconds: float | None = None
    jitter: float | None = None  # a fraction of the backoff, 0 to 1
    non_retryable: tuple[type[BaseException], ...] = ()

    def filled(self, defaults: RetryPolicy) -> RetryPolicy:
        """This policy, each ``None`` field taken from ``defaults`` (the non-retryable classes
        of both)."""
        values: dict[str, Any] = {
            f.name: _or(getattr(self, f.name), getattr(defaults, f.name))
            for f in fields(self)
            if f.name != "non_retryable"
        }
        return replace(self, **values, non_retryable=(*self.non_retryable, *defaults.non_retryable))

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
        digest = hashlib.sha256(f"{key}:{attempts}".encode()).digest()
        unit = int.from_bytes(digest[:8], "big") / 2**64  # in [0, 1)
        return min(max(base * (1 + self.jitter * (2 * unit - 1)), 0.0), self.maximum_seconds)


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


@dataclass(frozen=True, slots=True)
class GiveUp:
    """ "Never do this row": it ends at once, no attempt spent, ``reason`` recorded. Answer one
    of its two kinds, ``Cancel`` or ``Discard``."""

    reason: str = ""
    status: ClassVar[str] = "discarded"


class Cancel(GiveUp):
    """Cancel the row (Oban's ``{:cancel, reason}``)."""

    __slots__ = ()
    status: ClassVar[str] = "cancelled"


class Discard(GiveUp):
    """Discard the row."""

    __slots__ = ()
    status: ClassVar[str] = "discarded"
