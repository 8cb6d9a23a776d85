"""The django-q2 tasks of invoke handlers, and the sweeper that retries and times them out.

``run`` calls a handler's ``start`` (at least once, under a lease and a fence token:
``invocations.leases``); ``cancel_task`` its ``cancel``; ``recover`` starts again what is due
(a start whose worker died, a retry), every beat of the timer workers' heartbeat; ``sweep`` (a
django-q2 schedule every minute, created on migrate) recovers too and fails what waited past
its deadline. Each works from the invocation row, the source of truth; the django-q2 queue is
only how work reaches a worker.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta
from typing import Any

from django.db import connections

from invocations import leases, policies
from invocations import telemetry as invocation_telemetry
from invocations.answers import answer, answer_of_start
from invocations.conf import invocation_settings
from invocations.handlers import Answer, HandlerInvocation, handler_for
from invocations.models import OPEN_STATUSES, Invocation
from statecharts.exceptions import InvalidInput
from statecharts.policies import codecs, refusals
from statecharts.policies.retrying import RetryPolicy
from statecharts.stepper import ensure_every_minute
from statecharts.work import WorkSource

log = logging.getLogger("invocations")

RUN = "invocations.tasks.run"
CANCEL = "invocations.tasks.cancel_task"
SWEEP = "invocations.tasks.sweep"
SCHEDULE_NAME = "statecharts invocations: sweep"


def enqueue(func: str, invocation_id: int, **kwargs: Any) -> None:
    """Hand a handler's work to the django-q2 cluster, or run it now when
    ``INVOKE_HANDLER_QUEUE`` is ``inline``."""
    if invocation_settings.INVOKE_HANDLER_QUEUE == "inline":
        from django.utils.module_loading import import_string

        import_string(func)(invocation_id, **kwargs)
        return
    from django_q.tasks import async_task

    async_task(func, invocation_id, ack_failure=True, **kwargs)


def _handler_view(invocation: Invocation, params: Any) -> HandlerInvocation:
    return HandlerInvocation(
        invocation.pk,
        invocation.invokeid,
        invocation.type,
        invocation.src,
        params,
        invocation.caller_context,
        invocation.attempts,
    )


def run(invocation_id: int, *, now: datetime | None = None, token: int | None = None) -> str:
    """Call the handler's ``start`` for one invocation; returns what happened.

    The start claims the row first (``invocations.leases``: a lease, renewed while it runs, and
    a fence token; ``token`` is a sweeper's reservation handed over with the task): a row
    another start holds, or one not due, is ``skipped``. What the start answers, raises or
    gives up is written only while the claim still holds the row (else ``fenced``). With an
    injected clock (``now``: tests, tools) nothing renews the lease."""
    renew = now is None
    now = now or invocation_settings.now()
    invocation = Invocation.objects.filter(pk=invocation_id).first()
    if invocation is None or invocation.status not in OPEN_STATUSES:
        return "skipped"  # cancelled (or answered) before it ran: it does nothing
    handler = handler_for(invocation.type)
    if handler is None:
        # A fact about this deployment (a host that lost the setting, a rolling deploy):
        # try again later without spending an attempt.
        return _snooze(invocation, now, token, "no handler registered here")
    try:  # the params as the payload codec wrote them (statecharts.policies.codecs)
        params = invocation.decoded_params()
    except codecs.CodecUnavailable as exc:  # a fact about this deployment, like the above
        return _snooze(invocation, now, token, f"{exc}: snoozed")
    except codecs.CorruptPayload as exc:  # a fact about the row: no retry makes it readable
        mine = leases.claim(invocation, now, token=token, spend=False)
        if mine is None:
            return "skipped"
        return fail(invocation, f"undecodable params: {exc}", token=mine)
    policy = policies.policy_of(handler)
    assert policy.max_attempts is not None
    exhausted = invocation.attempts >= policy.max_attempts
    mine = leases.claim(invocation, now, token=token, spend=not exhausted)
    if mine is None:
        return "skipped"  # another start holds it, or it is not due
    if exhausted:
        # Every attempt was spent, the last one never finished (its worker died, or it hung
        # past its lease): not started again.
        return fail(
            invocation,
            f"start did not finish: {invocation.attempts} attempts, the last one's worker "
            "died or hung",
            token=mine,
        )
    invocation.refresh_from_db()
    began = invocation_telemetry.begin()
    try:
        with leases.renewing(invocation.pk, mine, enabled=renew):
            reply = handler.start(_handler_view(invocation, params))
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        log.warning("invocation %s: start failed (%s)", invocation.pk, error)
        if not policy.retryable(exc):
            return fail(invocation, f"start failed, not retryable: {error}", token=mine)
        if invocation.attempts >= policy.max_attempts:
            return fail(
                invocation, f"start failed {invocation.attempts} times: {error}", token=mine
            )
        ended = invocation_settings.now() if renew else now  # (the backoff counts from here)
        outcome = _retry_later(invocation, ended, policy=policy, token=mine, error=error)
        if outcome == "retrying":
            invocation_telemetry.retried(invocation, error)
        return outcome
    if isinstance(reply, policies.GiveUp):
        # The handler gave up (Oban's {:cancel, reason}): failed now, no attempt spent.
        verb = "cancelled" if isinstance(reply, policies.Cancel) else "discarded"
        return fail(invocation, f"{verb} by its handler: {reply.reason}", token=mine)
    invocation_telemetry.started(invocation, began)
    if reply is not None:
        if not isinstance(reply, Answer):
            return fail(invocation, f"the handler answered {reply!r}, not an Answer", token=mine)
        try:
            if answer_of_start(invocation, reply, token=mine) is None:
                return "fenced"
        except InvalidInput as exc:
            # Data from outside that the platform cannot take (code-carrying tags, NaN, too
            # deep or too big, not JSON): a fact about the answer, which no retry changes.
            # Recorded as the refusal table words it (statecharts.policies.refusals).
            refused = refusals.refusal(exc)
            assert refused is not None
            return fail(invocation, refused.message("the handler's answer was refused"), token=mine)
    # Started (answered, or answering later): its lease ends. A row the answer closed is not
    # open any more, and nothing is left to release.
    leases.release(invocation.pk, mine)
    return "started"


def _snooze(invocation: Invocation, now: datetime, token: int | None, error: str) -> str:
    """Try again later without spending an attempt (the deployment lacks something): only a
    row this start could have claimed."""
    mine = leases.claim(invocation, now, token=token, spend=False)
    if mine is None:
        return "skipped"
    attempts = invocation.attempts + 1  # (the backoff of the attempt it would have been)
    backoff = policies.policy_of(None).backoff(attempts, _key(invocation))
    leases.release(
        invocation.pk,
        mine,
        status=invocation.status,  # (a start never run stays ``starting``)
        next_attempt_at=now + timedelta(seconds=backoff),
        last_error=error[:2000],
        updated=now,
    )
    return "snoozed"


def _retry_later(
    invocation: Invocation, now: datetime, *, policy: RetryPolicy, token: int, error: str
) -> str:
    backoff = policy.backoff(max(invocation.attempts, 1), _key(invocation))
    released = leases.release(
        invocation.pk,
        token,
        next_attempt_at=now + timedelta(seconds=backoff),
        last_error=_text(error),
        updated=now,
    )
    return "retrying" if released else "fenced"


def _key(invocation: Invocation) -> str:
    return policies.invocation_key(invocation.parent_id, invocation.ordinal)


def _text(reason: str) -> str:
    # (the reason may quote a handler's exception: no lone surrogate may reach a column)
    return reason[:2000].encode("utf-8", "replace").decode("utf-8")


def fail(
    invocation: Invocation,
    reason: str,
    event: invocation_telemetry.InvocationEvent = invocation_telemetry.InvocationEvent.FAILED,
    *,
    token: int | None = None,
) -> str:
    """The invocation failed: its row says why, and the parent gets
    ``error.communication.invoke.<id>`` (ignored if it cancelled the invocation meanwhile).
    With ``token`` (a start's claim), only while that claim holds the row. ``event``: how its
    telemetry reports the end (failed, timed out, cancelled by an operator). Returns
    ``failed``, or ``fenced`` (nothing written)."""
    reason = _text(reason)
    rows = Invocation.objects.filter(pk=invocation.pk, status__in=OPEN_STATUSES)
    if token is not None:
        rows = rows.filter(claim_token=token)
    written = rows.update(last_error=reason, next_attempt_at=None, claimed_until=None)
    if not written and token is not None:
        return "fenced"
    answer(invocation, Answer.failed(reason), key=invocation_telemetry.PLATFORM_FAILURE_KEY)
    if written:
        invocation_telemetry.ended(invocation, reason, event)
    return "failed"


def cancel_task(invocation_id: int) -> str:
    invocation = Invocation.objects.filter(pk=invocation_id).first()
    if invocation is None:
        return "skipped"
    handler = handler_for(invocation.type)
    if handler is not None:
        try:
            params = invocation.decoded_params()
        except (codecs.CodecUnavailable, codecs.CorruptPayload) as exc:
            # A cancel is not held back for its params: the handler gets none, and the log
            # says why.
            log.warning("invocation %s: cancelled without its params (%s)", invocation.pk, exc)
            params = None
        handler.cancel(_handler_view(invocation, params))
    return "cancelled"


def sweep(now: datetime | None = None, *, run_inline: bool = False) -> dict[str, int]:
    """Fail what has waited past its deadline; start again what is due (``recover``)."""
    now = now or invocation_settings.now()
    overdue = list(leases.handlers().filter(deadline__lt=now))
    for invocation in overdue:
        waited = invocation_settings.INVOKE_HANDLER_TIMEOUT_SECONDS
        fail(
            invocation,
            f"timed out: no answer within {waited} s",
            invocation_telemetry.InvocationEvent.TIMED_OUT,
        )
    return {"timed_out": len(overdue), "retried": recover(now, run_inline=run_inline)}


RECOVER_BATCH = 50  # starts one recovery hands over at most (the next beat takes the rest)


def recover(now: datetime | None = None, *, run_inline: bool = False) -> int:
    """Start again the handler starts due now: those whose lease ran out (their worker died,
    or they hung) and the retries that are due (``invocations.leases.due``). Each is reserved
    first (``leases.reserve``: one sweeper wins it), then handed over with its token: to the
    django-q2 queue, or (``INVOKE_HANDLER_QUEUE = "inline"``) to a thread of this process;
    ``run_inline`` (tools on an injected clock) runs it here and now. Returns how many.

    The timer workers' heartbeat calls it every beat (``WorkSource.recover``): it must stay
    quick, so it never runs a start in the caller's thread unless ``run_inline``."""
    now = now or invocation_settings.now()
    pks = list(
        leases.handlers()
        .filter(leases.due(now))
        .exclude(deadline__lt=now)  # (the sweep fails those)
        .order_by("pk")
        .values_list("pk", flat=True)[:RECOVER_BATCH]
    )
    handed = 0
    for pk in pks:
        token = leases.reserve(pk, now)
        if token is None:
            continue  # another sweeper reserved it first
        handed += 1
        if run_inline:
            run(pk, now=now, token=token)
        elif invocation_settings.INVOKE_HANDLER_QUEUE == "inline":
            threading.Thread(
                target=_run_in_thread, args=(pk, token), name=f"invocation-{pk}", daemon=True
            ).start()
        else:
            enqueue(RUN, pk, token=token)
    return handed


def _run_in_thread(pk: int, token: int) -> None:
    try:
        run(pk, token=token)
    except Exception:  # (a bug or a lost database: the lease runs out, the next sweep retries)
        log.exception("invocation %s: a recovered start failed", pk)
    finally:
        connections.close_all()


def _recover(now: datetime) -> int:
    return recover(now)


def ensure_schedule_after_migrate(sender: Any, using: str, **kwargs: Any) -> None:
    """``post_migrate`` receiver: the sweep's django-q2 schedule, once its tables exist."""
    ensure_every_minute(SCHEDULE_NAME, SWEEP, using=using)


def _next_due() -> datetime | None:
    handlers = leases.handlers()
    times = [
        handlers.exclude(**{column: None}).order_by(column).values_list(column, flat=True).first()
        for column in ("next_attempt_at", "claimed_until", "deadline")
    ]
    times = [t for t in times if t is not None]
    return min(times) if times else None


def _run_due(now: datetime) -> int:
    done = sweep(now, run_inline=True)
    return done["timed_out"] + done["retried"]


# Handlers to retry or time out, for tools that run pending work themselves (statecharts.work).
# (and what the timer workers' heartbeat recovers every beat: WorkSource.recover).
invocation_work = WorkSource("invocations", next_due=_next_due, run_due=_run_due, recover=_recover)
