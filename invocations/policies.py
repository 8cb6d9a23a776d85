"""Retry policies of invoke handlers, and the give-up answers a handler's ``start`` may give.

A handler class (``STATECHARTS["INVOKERS"]``, ``invocations.handlers``) may carry a
``retry_policy``: what a raise of its ``start`` costs. Any field it leaves ``None`` is taken
from the global settings, the defaults of every handler (``INVOKE_HANDLER_MAX_ATTEMPTS``,
``INVOKE_HANDLER_RETRY_SECONDS``, ``INVOKE_HANDLER_RETRY_COEFFICIENT``,
``INVOKE_HANDLER_RETRY_MAX_SECONDS``, ``INVOKE_HANDLER_RETRY_JITTER``)::

    class Charge:
        retry_policy = RetryPolicy(max_attempts=10, maximum_seconds=600,
                                   non_retryable=(CardDeclined,))

        def start(self, invocation): ...
        def cancel(self, invocation): ...

The policy type is the timers' (``statecharts.policies.retrying``, where both apps can use it):
the backoff after the n-th failed start is ``initial * coefficient ** (n - 1)``, capped at
``maximum``, moved by up to ``± jitter`` derived from the invocation's key (its parent and
ordinal) and the attempt; an exception of a ``non_retryable`` class fails the invocation at
once. A start may also answer ``Cancel(reason)`` or ``Discard(reason)``: the invocation ends
failed at once with that reason, no attempt spent, and its parent hears
``error.communication.invoke.<id>`` as for any failed start.
"""

from __future__ import annotations

from invocations.conf import invocation_settings
from statecharts.policies.retrying import Cancel, Discard, GiveUp, RetryPolicy

__all__ = ["Cancel", "Discard", "GiveUp", "RetryPolicy", "defaults", "invocation_key", "policy_of"]


def defaults() -> RetryPolicy:
    """The global policy of every handler: the ``INVOKE_HANDLER_*`` settings."""
    return RetryPolicy(
        max_attempts=invocation_settings.INVOKE_HANDLER_MAX_ATTEMPTS,
        initial_seconds=invocation_settings.INVOKE_HANDLER_RETRY_SECONDS,
        coefficient=invocation_settings.INVOKE_HANDLER_RETRY_COEFFICIENT,
        maximum_seconds=invocation_settings.INVOKE_HANDLER_RETRY_MAX_SECONDS,
        jitter=invocation_settings.INVOKE_HANDLER_RETRY_JITTER,
    )


def policy_of(handler: object | None) -> RetryPolicy:
    """The filled-in policy of a handler (its class's ``retry_policy``, the settings for what
    it leaves unset); the settings alone for none, or for one without a policy."""
    policy = getattr(handler, "retry_policy", None)
    if not isinstance(policy, RetryPolicy):
        policy = RetryPolicy()
    return policy.filled(defaults())


def invocation_key(parent_id: int, ordinal: int) -> str:
    """The jitter's seed: the invocation's key (its parent and ordinal), which a replay keeps."""
    return f"invocation:{parent_id}:{ordinal}"
