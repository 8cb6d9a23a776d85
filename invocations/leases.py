"""Leases and fence tokens of handler starts: a start whose worker died is started again in
seconds, and a start that lost its claim writes nothing.

A handler's ``start`` (``invocations.tasks.run``) first **claims** its invocation row: one
conditional ``UPDATE`` that gives it a **lease** (``claimed_until``: now +
``INVOKE_HANDLER_LEASE_SECONDS``, 3 s) and a **fence token** (``claim_token``: a random number,
new at each claim), and counts the attempt. Only a claimable row can be claimed
(:func:`claimable`): a start never run yet, a retry that is due, or a start whose lease ran
out (its worker died: SIGKILL, OOM, a lost host; or it hung). Two claimers of one row: one
wins, the other's ``UPDATE`` matches nothing (the row lock, and the re-checked condition).

While the start runs, a **heartbeat** thread of its own (:func:`renewing`) renews the lease
every third of it, so a live start, however long, keeps its row; it stops renewing after
``INVOKE_HANDLER_START_TIMEOUT_SECONDS`` (a hung start then loses its lease like a dead one).
When the start ends, what it writes (its answer, a retry, a failure) needs the row to still
carry its token (:func:`holds`, :func:`release`): a start whose lease ran out and whose row
another start claimed meanwhile is **fenced**: its outcome is dropped, the newer start's
counts. The answer of a start is further fed once per key (``invocations.answers``), so of two
starts that both answered, the parent hears one answer.

What this does not give: **exactly once**. A start that was stuck, not dead (a stalled
process, a lost database connection, a start past its timeout), may have done its side
effect (charged the card) before its row was claimed again: handlers are at-least-once and
must be idempotent, with the invocation's ``id`` (stable across attempts) as their key.

The **sweepers** find what to start again (:func:`due`, ``invocations.tasks.recover``): the
timer workers' heartbeat runs the recovery of every app each beat (``statecharts.work``,
``WorkSource.recover``), so a dead start is started again within its lease plus a second,
also with ``INVOKE_HANDLER_QUEUE = "inline"`` (then the sweeper's process runs it, in a thread
of its own); the every-minute ``invocations`` schedule does the same, for a deployment whose
timer workers do not run.

Lock order: a claim, a renewal and a release each hold the invocation row alone, for one
statement; none waits for an execution's lock.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

from django.db import connections
from django.db.models import Q

from invocations.conf import invocation_settings
from invocations.models import Invocation, InvocationQuerySet, InvocationStatus
from statecharts import stepper

log = logging.getLogger("invocations")

BEATS_PER_LEASE = 3


def lease() -> timedelta:
    """A start's lease (``INVOKE_HANDLER_LEASE_SECONDS``)."""
    return timedelta(seconds=invocation_settings.INVOKE_HANDLER_LEASE_SECONDS)


def new_token() -> int:
    return secrets.randbits(62) + 1  # (never 0: a token is always truthy)


def handlers() -> InvocationQuerySet:
    """Open invocations of handlers (types other than SCXML)."""
    return Invocation.objects.using(stepper.database()).open().exclude(type="scxml")


def due(now: datetime) -> Q:
    """Rows a sweeper starts again at ``now``: a lease that ran out, a retry that is due."""
    return Q(claimed_until__lt=now) | Q(claimed_until__isnull=True, next_attempt_at__lte=now)


def claimable(now: datetime) -> Q:
    """Rows a start may claim at ``now``: those ``due``, and a start never run yet (handed to
    the queue by the parent's outbox message)."""
    never_run = Q(
        status=InvocationStatus.STARTING, claimed_until__isnull=True, next_attempt_at__isnull=True
    )
    return due(now) | never_run


def claim(
    invocation: Invocation, now: datetime, *, token: int | None = None, spend: bool = True
) -> int | None:
    """Claim ``invocation`` (as read: its attempts must not have moved since) for a start:
    ``active``, an attempt counted (``spend``), a lease and a new fence token, which is
    returned; None when the row is not claimable (or not held by ``token``, the reservation a
    sweeper handed over with it) any more."""
    allowed = claimable(now) if token is None else claimable(now) | Q(claim_token=token)
    mine = new_token()
    updated = (
        handlers()
        .filter(allowed, pk=invocation.pk, attempts=invocation.attempts)
        .update(
            status=InvocationStatus.ACTIVE,
            attempts=invocation.attempts + int(spend),
            next_attempt_at=None,
            claimed_until=now + lease(),
            claim_token=mine,
            updated=now,
        )
    )
    return mine if updated else None


def reserve(pk: int, now: datetime) -> int | None:
    """A sweeper's claim of a ``due`` row, before it hands the start over (to the queue, or to a
    thread): a lease and a token, no attempt counted; the start then claims the row with that
    token (``claim``). A reservation whose start never runs runs out like any lease. Returns
    the token, or None (not due any more: another sweeper reserved it)."""
    mine = new_token()
    updated = (
        handlers()
        .filter(due(now), pk=pk)
        .update(claimed_until=now + lease(), claim_token=mine, updated=now)
    )
    return mine if updated else None


def holds(pk: int, token: int) -> bool:
    """Whether the start of claim ``token`` still holds its row (open, its token)."""
    return handlers().filter(pk=pk, claim_token=token).exists()


def release(pk: int, token: int, **changes: object) -> bool:
    """End claim ``token``'s lease, writing ``changes`` with it, if the row still carries the
    token (the fence) and is open; whether it did. (A row the start's answer closed has its
    lease ended all the same, nothing else written.)"""
    if handlers().filter(pk=pk, claim_token=token).update(claimed_until=None, **changes):
        return True
    Invocation.objects.using(stepper.database()).filter(
        pk=pk, claim_token=token, claimed_until__isnull=False
    ).update(claimed_until=None)
    return False


def renew(pk: int, token: int, now: datetime) -> bool:
    """Extend claim ``token``'s lease to ``now`` + the lease, if the row still carries it and
    is still leased (not released by its start)."""
    return bool(
        handlers()
        .filter(pk=pk, claim_token=token, claimed_until__isnull=False)
        .update(claimed_until=now + lease())
    )


@contextmanager
def renewing(pk: int, token: int, *, enabled: bool = True) -> Iterator[None]:
    """While inside, a thread renews claim ``token``'s lease every third of it, until
    ``INVOKE_HANDLER_START_TIMEOUT_SECONDS`` have passed (then it lets the lease run out).
    ``enabled=False`` (a start run with an injected clock: tests, tools) renews nothing. The
    thread's first beat comes a third of a lease in: a quick start never touches the
    database from it."""
    if not enabled:
        yield
        return
    stop = threading.Event()
    interval = invocation_settings.INVOKE_HANDLER_LEASE_SECONDS / BEATS_PER_LEASE
    horizon = invocation_settings.INVOKE_HANDLER_START_TIMEOUT_SECONDS

    def beat() -> None:
        waited = 0.0
        try:
            while not stop.wait(interval):
                waited += interval
                if waited > horizon:
                    log.warning("invocation %s: its start outlived its timeout", pk)
                    return
                try:
                    if not renew(pk, token, invocation_settings.now()):
                        return  # fenced, or released: nothing more to keep
                except Exception:  # a lost connection: the next beat tries again
                    log.warning("invocation %s: renewing its lease failed", pk, exc_info=True)
                    connections[stepper.database()].close()
        finally:
            connections.close_all()

    thread = threading.Thread(target=beat, name=f"invocation-{pk}-lease", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(interval + 1)
