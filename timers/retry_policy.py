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

The policy type and the give-up answers live in ``statecharts.policies.retrying`` (re-exported
here), shared with the invocations app's handler policies: neither app may import the other.
"""

from __future__ import annotations

from statecharts.policies.retrying import Cancel, Discard, GiveUp, RetryPolicy
from timers.conf import timer_settings

__all__ = ["Cancel", "Discard", "GiveUp", "RetryPolicy", "defaults", "policy_of", "timer_key"]


def defaults() -> RetryPolicy:
    """The global policy of every delivery: the ``TIMER_*`` settings."""
    return RetryPolicy(
        max_attempts=timer_settings.TIMER_MAX_ATTEMPTS,
        initial_seconds=timer_settings.TIMER_RETRY_SECONDS,
        coefficient=timer_settings.TIMER_RETRY_COEFFICIENT,
        maximum_seconds=timer_settings.TIMER_RETRY_MAX_SECONDS,
        jitter=timer_settings.TIMER_RETRY_JITTER,
    )


def policy_of(delivery: object | None) -> RetryPolicy:
    """The filled-in policy of a delivery (its class's ``retry_policy``, the settings for
    what it leaves unset); the settings alone for none, or for one without a policy."""
    policy = getattr(delivery, "retry_policy", None)
    if not isinstance(policy, RetryPolicy):
        policy = RetryPolicy()
    return policy.filled(defaults())


def timer_key(execution_id: int, ordinal: int) -> str:
    """The jitter's seed: the row's key, which a replay or an import keeps."""
    return f"{execution_id}:{ordinal}"
