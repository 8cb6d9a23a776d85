"""Retrying route deliveries that were not sent, and routes giving up (docs/routes.md).

Routes are **at most once**: a delivery whose outcome is unknown (a timeout after the request
left, a connection reset, any raise the route does not vouch for) is never retried by the
platform. Only a failure the route declares was not sent (``routes.base.NotSent``: the
connection was refused, the host name did not resolve; nothing reached the destination) may
be retried, by the route's retry policy (``policy_of``: its settings entry's
``RETRY``, its class's ``retry_policy``, the ``ROUTE_*`` settings for the rest; by default
one attempt: no retry).

A retry keeps the key (the destination sees the same idempotency key on every attempt) and is
durable: in ONE transaction, under the sender's lock (the lock order of every step: the
execution, then its rows), the ledger row goes ``claimed`` -> ``retrying`` (``retry_at`` the
due) and a route timer row with the same key, due after the policy's backoff, is written to
the route timer queue (``routes.queue``). That row fires like any delayed route send
(liveness, cancellation by ``<cancel sendid>``, chunks): its fire takes the key back
``claimed`` (``ledger.take_retrying``: one more attempt) and calls the route again. A crash
before the transaction commits leaves the key ``claimed``: in doubt, never retried (the
route's word that it was not sent is lost with the process; at most once holds).

The backoff's jitter is derived from the idempotency key and the attempt
(``statecharts.policies.retrying``): a test or a replay computes the same due.

A delivery that fails for good (attempts spent, a non-retryable class, no queue to hold the
retry, the sender gone) is ``failed`` and its sender hears ``error.communication``, as for any
failed delivery (``routes.delivering.fail``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from django.db import transaction

from routes import ledger, policies, registry
from routes.base import GiveUp, NotSent, RetryPolicy, RouteConfig, RouteMessage
from routes.models import DeliveryStatus, RouteDelivery
from routes.queue import TimerEntry, configured_queue
from statecharts.models import Execution
from statecharts.statuses import TimerRule, rules
from statecharts.stepper import database, lock

log = logging.getLogger("routes")

# Tests install a callable here to stop a real process at a phase of a retry ("not_sent": the
# route raised NotSent, nothing decided yet; "retry_scheduled": the retry committed). It is
# never set otherwise.
fault_hook: Callable[[str], None] | None = None


def policy_of(name: str) -> RetryPolicy:
    """The filled-in retry policy of the route ``name``: its own (``RETRY``, the class's
    ``retry_policy``), the ``ROUTE_*`` settings for what it leaves unset; the settings alone
    for a route not registered here."""
    known = registry.get(name)
    own = known.retry if known is not None else RetryPolicy()
    return own.filled(policies.defaults())


def error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def retryable(policy: RetryPolicy, exc: BaseException) -> bool:
    """Whether a ``NotSent`` may be retried under ``policy``: neither it nor the error it was
    raised from is an instance of a ``non_retryable`` class."""
    cause = exc.__cause__
    return policy.retryable(exc) and (cause is None or policy.retryable(cause))


def after_raise(
    delivery_id: int,
    config: RouteConfig,
    message: RouteMessage,
    key: str,
    exc: BaseException,
    now: datetime,
) -> str | None:
    """Decide what a raise of ``deliver`` costs the claimed key ``delivery_id``: None when a
    retry was scheduled (or someone else settled the key meanwhile), else the reason to fail
    it with (the caller then fails it and tells the sender: ``routes.delivering.fail``)."""
    error = error_text(exc)
    if not isinstance(exc, NotSent):
        return error  # ambiguous: at most once, never retried
    policy = policy_of(message.route)
    assert policy.max_attempts is not None
    if not retryable(policy, exc):
        cause = exc.__cause__
        named = type(cause if cause is not None and not policy.retryable(cause) else exc)
        return f"not sent: {named.__name__} is not retryable: {error}"
    if fault_hook is not None:
        fault_hook("not_sent")
    try:
        failed, due = _schedule_retry(delivery_id, config, message, key, policy, error, now)
    except Exception as problem:  # (the queue refused the entry: fail it, never leave it)
        log.exception("route %s: the retry of %s could not be scheduled", message.route, key)
        return f"not sent, and its retry could not be scheduled ({error_text(problem)}): {error}"
    if failed is not None or due is None:
        return failed
    log.info("route %s: delivery %s not sent, retry at %s: %s", message.route, key, due, error)
    if fault_hook is not None:
        fault_hook("retry_scheduled")
    return None


def _schedule_retry(
    delivery_id: int,
    config: RouteConfig,
    message: RouteMessage,
    key: str,
    policy: RetryPolicy,
    error: str,
    now: datetime,
) -> tuple[str | None, datetime | None]:
    """``after_raise``'s transaction: (the reason to fail the key with, None) or (None, the
    retry's due) once scheduled; (None, None) if the key was settled meanwhile. Lock order:
    the sender's execution, then the ledger row, then the route timer row (a step's order)."""
    assert policy.max_attempts is not None
    queue = configured_queue()
    with transaction.atomic(using=database()):
        try:
            sender: Execution | None = lock(message.execution_id)
        except Execution.DoesNotExist:
            sender = None
        attempts = (
            RouteDelivery.objects.using(database())
            .filter(pk=delivery_id, status=DeliveryStatus.CLAIMED)
            .values_list("attempts", flat=True)
            .first()
        )
        if attempts is None:
            return None, None  # settled meanwhile (an operator's mark): nothing to decide
        if attempts >= policy.max_attempts:
            if policy.max_attempts == 1:
                return error, None  # (no retry policy: the reason as it always was)
            return f"not sent after {attempts} attempts: {error}", None
        if queue is None:
            return f"not sent, and no route timer queue to retry it: {error}", None
        if sender is None or rules(sender.status).timers is TimerRule.DISCARD:
            return error, None  # nobody to deliver for any more (fail records it as discarded)
        due = now + timedelta(seconds=policy.backoff(attempts, key))
        reason = (
            f"not sent (attempt {attempts} of {policy.max_attempts}): {error}; "
            f"retry at {due.isoformat()}"
        )
        if not ledger.retry(delivery_id, due, reason):
            return None, None  # (settled meanwhile)
        queue.schedule(
            TimerEntry(
                scope=message.execution_id,
                send_id=message.send_id,
                key=key,
                route=message.route,
                config=config,
                message=message,
                due=due,
                created=now,
                scheduled_in=None,  # (a retry: no step scheduled it)
            )
        )
    return None, due


def given_up(answer: GiveUp) -> tuple[str, str]:
    """The ledger status and reason of a route's give-up answer (``Cancel``/``Discard``)."""
    status = (
        DeliveryStatus.CANCELLED
        if answer.status == DeliveryStatus.CANCELLED
        else DeliveryStatus.DISCARDED
    )
    said = f": {answer.reason}" if answer.reason else ""
    return status, f"{status} by the route{said}"
