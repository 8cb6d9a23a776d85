"""SCXML children: what invoking a chart does, durably.

The parent's step writes the ``Invocation`` row and an outbox message of kind
``invocations.start``; delivering that message (after the parent's commit, or by the outbox
sweeper after a crash) resolves the child chart and starts the child in a transaction of its
own. The child's session id is derived from (parent session id, invocation ordinal), so a
delivery that runs twice finds the child already there and starts nothing: one child per
invocation, whatever crashes. Cancelling is the same shape: the parent's step marks the row
and writes an ``invocations.cancel`` message; its delivery cancels the child (its ``<onexit>``
runs, its timers are discarded) with the outcome ``cancelled_by_parent``.

Lock order: every transaction here locks one execution (the parent's step, or the child's);
the parent and its child never wait for each other.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction

from invocations import telemetry as invocation_telemetry
from invocations.conf import invocation_settings
from invocations.models import Invocation, InvocationStatus
from invocations.tree import lineage
from statecharts import stepper
from statecharts.core.errors import ChartError, ResolveError, StatechartError
from statecharts.core.events import PLATFORM, Event, error_data
from statecharts.models import Chart, Execution, OutboxMessage
from statecharts.models.outbox import OutboxStatus
from statecharts.policies import codecs
from statecharts.statuses import TERMINAL_STATUSES
from statecharts.stepper import CANCELLED_BY_PARENT, this_call

START = "invocations.start"
CANCEL = "invocations.cancel"
RUN_HANDLER = "invocations.run"  # a handler's start, on the django-q2 cluster
CANCEL_HANDLER = "invocations.handler_cancel"
CHART_SCHEME = "chart:"
_NAMESPACE = uuid.UUID("5d0f6a7e-3c1b-4c55-9a52-1c6f2f0b7d11")


def child_session_id(parent_session_id: str, ordinal: int) -> str:
    """The child's ``_sessionid``: the same for the same invocation, every time."""
    return uuid.uuid5(_NAMESPACE, f"{parent_session_id}/{ordinal}").hex


def write_message(
    parent: Execution, kind: str, invocation: Invocation, now: datetime, outbox: list[int]
) -> None:
    """An outbox row of the parent's for its child (written in the parent's step)."""
    message = OutboxMessage.objects.using(stepper.database()).create(
        sender=parent,
        kind=kind,
        target_session_id=child_session_id(parent.session_id, invocation.ordinal),
        event={"invocation": invocation.pk},
        created=now,
    )
    outbox.append(message.pk)


class ChildRefused(Exception):
    """The child chart cannot be had: the parent gets error.execution (spec 6.4)."""


# ---- delivering invocations.start -----------------------------------------------------------


def deliver_start(message: OutboxMessage, more: list[int]) -> bool:
    """Create and start the child of one invocation (idempotent); True when handled."""
    database = stepper.database()
    invocation = (
        Invocation.objects.using(database)
        .select_related("parent", "parent__chart")
        .filter(pk=message.event.get("invocation"))
        .first()
    )
    if invocation is None or invocation.status != InvocationStatus.STARTING:
        return True  # cancelled before it started, or started by an earlier delivery
    parent = invocation.parent
    session_id = child_session_id(parent.session_id, invocation.ordinal)
    child = Execution.objects.using(database).filter(session_id=session_id).first()
    if child is None:
        try:
            refuse_unnameable(invocation)
        except ChildRefused as exc:
            _fail(invocation, str(exc), more)
            return True
        if not _room_in_this_call(invocation, parent):
            return False  # pending, no attempt spent: the sweeper's next call starts it
        try:
            within_bounds(invocation, parent)
        except ChildRefused as exc:  # (its siblings would be refused too: one step for all)
            _fail(invocation, str(exc), more, with_siblings=True)
            return True
        _count_in_this_call(invocation, parent)
        try:
            chart = resolve_chart(invocation, parent)
        except ChildRefused as exc:
            _fail(invocation, str(exc), more)
            return True
        try:
            params = invocation.decoded_params()
        except codecs.CodecUnavailable as exc:
            # A fact about this deployment (a key not here yet): the message stays pending,
            # no attempt spent, the reason in its last_error; the sweeper tries again.
            OutboxMessage.objects.using(database).filter(pk=message.pk).update(
                last_error=f"{exc}: waiting"[:2000]
            )
            return False
        except codecs.CorruptPayload as exc:  # a fact about the row: it can never start
            _fail(invocation, f"undecodable params: {exc}", more)
            return True
        data = params if isinstance(params, dict) else None
        began = invocation_telemetry.begin()
        try:
            child = stepper.start_internal(
                stepper.StartRequest(
                    chart=chart,
                    data=data,
                    session_id=session_id,
                    caller_context=invocation.caller_context,
                ),
                parent=parent,
                invokeid=invocation.invokeid,
                invoke_ordinal=invocation.ordinal,
                outbox=more,  # delivered after the bookkeeping below, by the caller's loop
            ).execution
            invocation_telemetry.started(invocation, began, child_execution_id=child.pk)
        except IntegrityError:  # started meanwhile by another delivery of this message
            child = Execution.objects.using(database).get(session_id=session_id)
        except stepper.StepRefused as exc:  # e.g. it ran away while starting
            _fail(invocation, f"the child could not start: {exc}", more)
            return True
    # Bookkeeping on the parent's row (its step already decided to invoke): which child, and,
    # unless the parent has moved on meanwhile, that it is active.
    rows = Invocation.objects.using(database).filter(pk=invocation.pk)
    rows.update(child=child, chart_id=child.chart_id)
    rows.filter(status=InvocationStatus.STARTING).update(status=InvocationStatus.ACTIVE)
    invocation.refresh_from_db(fields=["status"])
    if invocation.status == InvocationStatus.CANCELLED and child.status not in TERMINAL_STATUSES:
        stepper.cancel(child, reason=CANCELLED_BY_PARENT)  # cancelled while it was starting
    return True


def _fail(
    invocation: Invocation, reason: str, more: list[int], *, with_siblings: bool = False
) -> None:
    """In the parent's step: the invocation failed, and the parent is told error.execution
    (with ``invokeid`` set, as for any error about an invocation).

    ``with_siblings`` (a bound refused it): the other invocations of the same type that the
    same step of the parent started and that have not started yet are refused with it, for
    the same reason, in this one step: the parent gets one ``error.execution`` (this one's),
    not one each, so a chart that starts thousands of invokes at once past a bound costs one
    step of its own, not thousands (docs/invocations.md, "Bounds").
    """
    database = stepper.database()
    with transaction.atomic(using=database, durable=True):
        parent = stepper.lock(invocation.parent_id)
        updated = (
            Invocation.objects.using(database)
            .filter(pk=invocation.pk, status=InvocationStatus.STARTING)
            .update(status=InvocationStatus.FAILED, reason=reason[:2000])
        )
        if not updated:
            return
        ordinals: list[int] = []  # (the siblings refused with it)
        if with_siblings:
            siblings = Invocation.objects.using(database).filter(
                parent_id=invocation.parent_id,
                started_in=invocation.started_in,
                type=invocation.type,
                status=InvocationStatus.STARTING,
                child__isnull=True,
            )
            ordinals = list(siblings.values_list("ordinal", flat=True))
            siblings.update(
                status=InvocationStatus.FAILED,
                reason=f"{reason} (refused with {invocation.invokeid!r})"[:2000],
            )
            # Their start messages (the parent's rows) have nothing left to do.
            OutboxMessage.objects.using(database).filter(
                sender_id=invocation.parent_id,
                kind=START,
                status=OutboxStatus.PENDING,
                target_session_id__in=[child_session_id(parent.session_id, o) for o in ordinals],
            ).update(status=OutboxStatus.DELIVERED, delivered=invocation_settings.now())
        invocation_telemetry.ended(invocation, reason, count=1 + len(ordinals))
        line, column = _invoke_position(parent, invocation)
        error = Event(
            "error.execution",
            PLATFORM,
            error_data(reason, tagname="invoke", line=line, column=column),
            invokeid=invocation.invokeid,
        )
        stepper.step_locked(
            parent,
            stepper.Input.internal(error),
            invocation_settings.now(),
            more,
            invocation.caller_context,
            cause={"invocation": invocation.ordinal, "failed": True},
        )


def refuse_unnameable(invocation: Invocation) -> None:
    """A ``src`` (or ``srcexpr`` value) or ``<content expr>`` holding a NUL character names no
    chart, file or task, and can be looked up nowhere (PostgreSQL's text cannot hold one)."""
    for what, value in (("src", invocation.src), ("content", invocation.content)):
        if "\x00" in value:
            raise ChildRefused(f"the invoke's {what} contains a NUL character")


def within_bounds(invocation: Invocation, parent: Execution) -> None:
    """Refuse a child chart that would go past ``INVOKE_MAX_DEPTH``, its parent's
    ``INVOKE_MAX_CHILDREN`` or its tree's ``INVOKE_MAX_DESCENDANTS`` (docs/invocations.md,
    "Bounds"), so a chart that invokes itself cannot grow without end.

    Children count while they run (a child that finished, failed or was cancelled no longer
    does). Read when the child is about to start, without a lock on the tree: deliveries
    running at the same moment in several processes can each see room for one more, so a tree
    can pass a bound by at most the number of processes delivering into it at once.
    """
    limits = invocation_settings
    depth = invocation.depth
    if depth is None:  # (a row written before depths were)
        depth = lineage(parent)[0] + 1
    if depth > limits.INVOKE_MAX_DEPTH:
        raise ChildRefused(
            f"the child would be at invoke depth {depth}, over INVOKE_MAX_DEPTH "
            f"({limits.INVOKE_MAX_DEPTH})"
        )
    database = stepper.database()
    live = (
        Execution.objects.using(database)
        .filter(parent_id=parent.pk)
        .exclude(status__in=TERMINAL_STATUSES)
        .count()
    )
    if live >= limits.INVOKE_MAX_CHILDREN:
        raise ChildRefused(
            f"this execution already has {live} running child charts "
            f"(INVOKE_MAX_CHILDREN: {limits.INVOKE_MAX_CHILDREN})"
        )
    root = invocation.root_id if invocation.root_id is not None else parent.pk
    in_tree = (
        Invocation.objects.using(database)
        .filter(root_id=root, status=InvocationStatus.ACTIVE, type="scxml")
        .exclude(child__status__in=TERMINAL_STATUSES)
        .count()
    )
    if in_tree >= limits.INVOKE_MAX_DESCENDANTS:
        raise ChildRefused(
            f"its tree already has {in_tree} running child charts "
            f"(INVOKE_MAX_DESCENDANTS: {limits.INVOKE_MAX_DESCENDANTS})"
        )


def _room_in_this_call(invocation: Invocation, parent: Execution) -> bool:
    """Whether this delivery call may start one more child chart in the invocation's tree
    (``INVOKE_STARTS_PER_DELIVERY``): children start inline, in the loop that delivers what
    their parent's step sent, and each child's own invokes join that loop, so without this
    one ``start`` or ``send`` could go on starting charts for as long as the tree has room.
    Past it the message waits, pending (its invocation ``starting``), for the sweeper's next
    call; nothing is written, so waiting costs a delivery loop reads only."""
    limit = invocation_settings.INVOKE_STARTS_PER_DELIVERY
    return this_call().get(_tree_key(invocation, parent), 0) < limit


def _count_in_this_call(invocation: Invocation, parent: Execution) -> None:
    counts, key = this_call(), _tree_key(invocation, parent)
    counts[key] = counts.get(key, 0) + 1


def _tree_key(invocation: Invocation, parent: Execution) -> str:
    root = invocation.root_id if invocation.root_id is not None else parent.pk
    return f"invocations.start:{root}"


def _invoke_position(parent: Execution, invocation: Invocation) -> tuple[int, int]:
    """Where the parent chart writes the ``<invoke>`` of ``invocation``: the one in its
    state with that id, or the state's only one; (0, 0) when that cannot be told."""
    try:
        compiled = parent.chart.compiled()
        state = compiled.state(invocation.state)
    except (StatechartError, KeyError):
        return 0, 0
    invokes = [i for i in state.invokes if i.id == invocation.invokeid] or list(state.invokes)
    return (invokes[0].line, invokes[0].column) if len(invokes) == 1 else (0, 0)


def resolve_chart(invocation: Invocation, parent: Execution) -> Chart:
    """The child's chart, stored by content hash (outside the name/version namespace).

    Inline ``<content>`` is the chart; a static ``src`` was read when the parent chart was
    loaded (``Chart.resources``) or names a stored chart (``chart:NAME`` for the latest
    version, ``chart:NAME@VERSION``); a chart defined at run time (``<content expr>``, or a
    ``srcexpr`` value not among the resources) is resolved now, through the configured
    ``RESOLVER`` against the folder the parent chart was loaded from, if run-time charts are
    allowed, and counted against the parent's budget. What it resolved to is stored by hash
    and recorded on the invocation row, so replay never reads a file again.
    """
    parent_chart = parent.chart
    resources = parent_chart.resources or {}
    source = invocation.content
    src = invocation.src
    if not source:
        if not src:
            raise ChildRefused("<invoke> has neither src nor content")
        if src.startswith(CHART_SCHEME):
            return _named_chart(src[len(CHART_SCHEME) :])
        if src in resources:
            source = resources[src]
        else:
            source = _resolve_at_run_time(src, parent_chart.folder or None, invocation)
    elif invocation.defined_at_run_time:
        _allow_run_time_chart(f"<content expr> of {invocation.invokeid!r}", invocation)
    limit = invocation_settings.INVOKE_CHART_MAX_BYTES
    if len(source.encode("utf-8")) > limit:
        raise ChildRefused(f"the child chart is larger than {limit} bytes")
    try:
        return Chart.objects.load(
            source,
            resources=dict(resources) or None,
            folder=parent_chart.folder,
            origin="invoked",
        )
    except (ChartError, ValueError) as exc:
        raise ChildRefused(f"the child chart is invalid: {exc}") from None


def _resolve_at_run_time(src: str, folder: str | None, invocation: Invocation) -> str:
    _allow_run_time_chart(repr(src), invocation)
    from django.utils.module_loading import import_string

    resolver: Any = invocation_settings.RESOLVER
    if isinstance(resolver, str):
        resolver = import_string(resolver)
    try:
        text: str = resolver(src, folder)
    except ResolveError as exc:
        raise ChildRefused(str(exc)) from None
    return text


def _allow_run_time_chart(what: str, invocation: Invocation) -> None:
    """Charts defined at run time let event data define code that runs in the sandbox: they
    can be switched off, and each parent may start a bounded number of them."""
    if not invocation_settings.INVOKE_RUNTIME_CHARTS:
        raise ChildRefused(
            f"{what}: child charts defined at run time are disabled (INVOKE_RUNTIME_CHARTS)"
        )
    limit = invocation_settings.INVOKE_RUNTIME_CHARTS_PER_EXECUTION
    used = (
        Invocation.objects.using(stepper.database())
        .filter(parent_id=invocation.parent_id, defined_at_run_time=True, chart__isnull=False)
        .count()
    )
    if used >= limit:
        raise ChildRefused(f"{what}: this execution has started {used} run-time child charts")


def _named_chart(ref: str) -> Chart:
    """``chart:NAME`` (its latest version) or ``chart:NAME@VERSION``: the one rule of
    ``statecharts.policies.lookups.find_chart``, as ``statechart start`` and the API apply it."""
    from statecharts.policies.lookups import LookupProblem, find_chart

    try:
        return find_chart(ref)
    except LookupProblem as exc:
        raise ChildRefused(f"chart:{ref}: {exc}") from None


# ---- delivering invocations.cancel ----------------------------------------------------------


def deliver_cancel(message: OutboxMessage, more: list[int]) -> bool:
    """Cancel the child (its onexit runs, its timers are discarded); idempotent."""
    child = (
        Execution.objects.using(stepper.database())
        .filter(session_id=message.target_session_id)
        .first()
    )
    if child is not None and child.status not in TERMINAL_STATUSES:
        stepper.cancel(child, reason=CANCELLED_BY_PARENT)
    return True


# ---- handlers (other types): the messages only hand the work to the django-q2 cluster -------


def deliver_run(message: OutboxMessage, more: list[int]) -> bool:
    from invocations.tasks import RUN, enqueue

    invocation = (
        Invocation.objects.using(stepper.database())
        .filter(pk=message.event.get("invocation"), status=InvocationStatus.STARTING)
        .first()
    )
    if invocation is not None:
        try:
            refuse_unnameable(invocation)
        except ChildRefused as exc:  # never handed to the handler: it could name nothing
            _fail(invocation, str(exc), more)
            return True
    enqueue(RUN, int(message.event["invocation"]))
    return True


def deliver_handler_cancel(message: OutboxMessage, more: list[int]) -> bool:
    from invocations.tasks import CANCEL as CANCEL_TASK
    from invocations.tasks import enqueue

    enqueue(CANCEL_TASK, int(message.event["invocation"]))
    return True
