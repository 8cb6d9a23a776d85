"""The django-q2 tasks of invoke handlers, and the sweeper that retries and times them out.

``run`` calls a handler's ``start`` (at least once); ``cancel_task`` its ``cancel``; ``sweep``
(a django-q2 schedule every minute, created on migrate) starts again what is due for a retry
and fails what waited past its deadline. Each works from the invocation row, the source of
truth; the django-q2 queue is only how work reaches a worker.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.db.models import F, Q

from invocations import telemetry as invocation_telemetry
from invocations.answers import answer
from invocations.conf import invocation_settings
from invocations.handlers import Answer, HandlerInvocation, handler_for
from invocations.models import OPEN_STATUSES, Invocation, InvocationStatus
from statecharts.exceptions import InvalidInput
from statecharts.policies import codecs, refusals
from statecharts.stepper import ensure_every_minute
from statecharts.work import WorkSource

log = logging.getLogger("invocations")

RUN = "invocations.tasks.run"
CANCEL = "invocations.tasks.cancel_task"
SWEEP = "invocations.tasks.sweep"
SCHEDULE_NAME = "statecharts invocations: sweep"


def enqueue(func: str, invocation_id: int) -> None:
    """Hand a handler's work to the django-q2 cluster, or run it now when
    ``INVOKE_HANDLER_QUEUE`` is ``inline``."""
    if invocation_settings.INVOKE_HANDLER_QUEUE == "inline":
        from django.utils.module_loading import import_string

        import_string(func)(invocation_id)
        return
    from django_q.tasks import async_task

    async_task(func, invocation_id, ack_failure=True)


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


def run(invocation_id: int, *, now: datetime | None = None) -> str:
    """Call the handler's ``start`` for one invocation; returns what happened."""
    now = now or invocation_settings.now()
    invocation = Invocation.objects.filter(pk=invocation_id).first()
    if invocation is None or invocation.status not in OPEN_STATUSES:
        return "skipped"  # cancelled (or answered) before it ran: it does nothing
    handler = handler_for(invocation.type)
    if handler is None:
        # A fact about this deployment (a host that lost the setting, a rolling deploy):
        # try again later without spending an attempt.
        _retry_later(invocation, now, spend=False, error="no handler registered here")
        return "snoozed"
    try:  # the params as the payload codec wrote them (statecharts.policies.codecs)
        params = invocation.decoded_params()
    except codecs.CodecUnavailable as exc:  # a fact about this deployment, like the above
        _retry_later(invocation, now, spend=False, error=f"{exc}: snoozed")
        return "snoozed"
    except codecs.CorruptPayload as exc:  # a fact about the row: no retry makes it readable
        fail(invocation, f"undecodable params: {exc}")
        return "failed"
    Invocation.objects.filter(pk=invocation.pk).update(
        status=InvocationStatus.ACTIVE,
        attempts=F("attempts") + 1,
        next_attempt_at=None,
        updated=now,
    )
    invocation.refresh_from_db()
    began = invocation_telemetry.begin()
    try:
        reply = handler.start(_handler_view(invocation, params))
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        log.warning("invocation %s: start failed (%s)", invocation.pk, error)
        if invocation.attempts >= invocation_settings.INVOKE_HANDLER_MAX_ATTEMPTS:
            fail(invocation, f"start failed {invocation.attempts} times: {error}")
            return "failed"
        _retry_later(invocation, now, spend=True, error=error)
        invocation_telemetry.retried(invocation, error)
        return "retrying"
    invocation_telemetry.started(invocation, began)
    if reply is not None:
        if not isinstance(reply, Answer):
            fail(invocation, f"the handler answered {reply!r}, not an Answer")
            return "failed"
        try:
            answer(invocation, reply, key="start")
        except InvalidInput as exc:
            # Data from outside that the platform cannot take (code-carrying tags, NaN, too
            # deep or too big, not JSON): a fact about the answer, which no retry changes.
            # Recorded as the refusal table words it (statecharts.policies.refusals).
            refused = refusals.refusal(exc)
            assert refused is not None
            fail(invocation, refused.message("the handler's answer was refused"))
            return "failed"
    return "started"


def _retry_later(invocation: Invocation, now: datetime, *, spend: bool, error: str) -> None:
    attempts = max(invocation.attempts, 1) if spend else max(invocation.attempts, 0) + 1
    backoff = invocation_settings.INVOKE_HANDLER_RETRY_SECONDS * 2 ** (attempts - 1)
    Invocation.objects.filter(pk=invocation.pk, status__in=OPEN_STATUSES).update(
        next_attempt_at=now + timedelta(seconds=backoff), last_error=error[:2000], updated=now
    )


def fail(
    invocation: Invocation,
    reason: str,
    event: invocation_telemetry.InvocationEvent = invocation_telemetry.InvocationEvent.FAILED,
) -> None:
    """The invocation failed: its row says why, and the parent gets
    ``error.communication.invoke.<id>`` (ignored if it cancelled the invocation meanwhile).
    ``event``: how its telemetry reports the end (failed, timed out, cancelled by an operator)."""
    # (the reason may quote a handler's exception: no lone surrogate may reach a column)
    reason = reason[:2000].encode("utf-8", "replace").decode("utf-8")
    was_open = Invocation.objects.filter(pk=invocation.pk, status__in=OPEN_STATUSES).update(
        last_error=reason, next_attempt_at=None
    )
    answer(invocation, Answer.failed(reason), key=invocation_telemetry.PLATFORM_FAILURE_KEY)
    if was_open:
        invocation_telemetry.ended(invocation, reason, event)


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
    """Start again what is due for a retry; fail what has waited past its deadline."""
    now = now or invocation_settings.now()
    handlers = Invocation.objects.open().exclude(type="scxml")
    overdue = list(handlers.filter(deadline__lt=now))
    for invocation in overdue:
        waited = invocation_settings.INVOKE_HANDLER_TIMEOUT_SECONDS
        fail(
            invocation,
            f"timed out: no answer within {waited} s",
            invocation_telemetry.InvocationEvent.TIMED_OUT,
        )
    due = list(handlers.filter(Q(next_attempt_at__lte=now)).exclude(pk__in=[i.pk for i in overdue]))
    for invocation in due:
        if run_inline:
            run(invocation.pk, now=now)
        else:
            enqueue(RUN, invocation.pk)
    return {"timed_out": len(overdue), "retried": len(due)}


def ensure_schedule_after_migrate(sender: Any, using: str, **kwargs: Any) -> None:
    """``post_migrate`` receiver: the sweep's django-q2 schedule, once its tables exist."""
    ensure_every_minute(SCHEDULE_NAME, SWEEP, using=using)


def _next_due() -> datetime | None:
    handlers = Invocation.objects.open().exclude(type="scxml")
    times = [
        t
        for t in (
            handlers.order_by("next_attempt_at")
            .values_list("next_attempt_at", flat=True)
            .exclude(next_attempt_at=None)
            .first(),
            handlers.order_by("deadline")
            .values_list("deadline", flat=True)
            .exclude(deadline=None)
            .first(),
        )
        if t is not None
    ]
    return min(times) if times else None


def _run_due(now: datetime) -> int:
    done = sweep(now, run_inline=True)
    return done["timed_out"] + done["retried"]


# Handlers to retry or time out, for tools that run pending work themselves (statecharts.work).
invocation_work = WorkSource("invocations", next_due=_next_due, run_due=_run_due)
