"""A start: the execution's INSERT and its first step (to its first stable configuration), in
one transaction, once per idempotency key and business key.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction

from statecharts.conf import statecharts_settings
from statecharts.core.datamodel import check_tagged
from statecharts.drivers.durable import Input
from statecharts.exceptions import BusinessKeyInUse
from statecharts.models import Chart, Execution, HistoryEntry
from statecharts.policies import idempotency
from statecharts.runtime import compiled_chart
from statecharts.stepper import observing, sql
from statecharts.stepper.applying import _apply
from statecharts.stepper.transaction import StepResult, phase


def start_step(
    chart: Chart,
    outbox: list[int],
    *,
    data: dict[str, Any] | None = None,
    business_key: str | None = None,
    metadata: dict[str, Any] | None = None,
    session_id: str | None = None,
    now: datetime | None = None,
    caller_context: dict[str, Any] | None = None,
    io_processors: dict[str, str] | None = None,
    parent: Execution | None = None,
    invokeid: str | None = None,
    invoke_ordinal: int | None = None,
    subject: Any = None,
    idempotency_key: str | None = None,
    tracing: bool = False,
    sender: dict[str, Any] | None = None,
    joined: bool = False,
) -> StepResult:
    """Create an execution of ``chart`` and run it to its first stable configuration, in one
    transaction; the outbox ids it wrote are appended to ``outbox``. ``parent``, ``invokeid``
    and ``invoke_ordinal`` start the child of an ``<invoke>`` (``_event`` of what it sends to
    ``#_parent`` carries the invoke id; one child per (parent, ordinal)).

    ``idempotency_key``: unique per chart *name* (``statecharts.policies.idempotency``); a start
    that
    repeats one returns the execution the first started (``repeated``), starting nothing,
    and one that asked for something else raises ``IdempotencyConflict``.

    ``joined``: the start may run inside the caller's transaction (a savepoint of it: its rows
    commit or roll back with the caller's); otherwise it is a durable transaction of its own."""
    observing.step_started()
    compiled = compiled_chart(chart)
    if data is not None:
        check_tagged(data)  # ValueError names the bad path; nothing is written
    asked = idempotency.start_content(data, business_key, metadata, session_id)
    session_id = session_id or uuid.uuid4().hex
    database = sql.database()
    written = len(outbox)
    try:
        with transaction.atomic(using=database, durable=not joined):
            if idempotency_key is not None:
                earlier = idempotency.earlier_start(chart, idempotency_key, asked, using=database)
                if earlier is not None:
                    return StepResult(earlier[0], earlier[1], (), (), repeated=True)
            if (
                business_key is not None
                and Execution.objects.using(database)
                .filter(chart=chart, business_key=business_key)
                .exists()
            ):
                raise IntegrityError("business key in use")
            now = now or statecharts_settings.now()
            execution = Execution(
                chart=chart,
                session_id=session_id,
                business_key=business_key,
                metadata=metadata or {},
                parent=parent,
                invoke_ordinal=invoke_ordinal,
                invokeid=invokeid or "",
                tracing=tracing,
                created=now,
            )
            if subject is not None:
                execution.subject = subject  # (statecharts.policies.subjects checked it)
            start_input = Input.start(
                session_id,
                data,
                io_processors,
                parent_session_id=parent.session_id if parent is not None else None,
                invokeid=invokeid,
                sender=sender,  # who started it, when a door checked (recorded with it)
            )
            result, _ = _apply(
                execution, compiled, None, start_input, now, outbox, caller_context
            )
            if idempotency_key is not None:
                idempotency.remember_start(execution, idempotency_key, asked, now, using=database)
                HistoryEntry.objects.using(database).filter(pk=result.entry.pk).update(
                    idempotency_key=idempotency_key
                )
                result.entry.idempotency_key = idempotency_key
            phase("before_commit")
    except IntegrityError:
        # Checked first for a clear error; the unique constraints settle a concurrent race:
        # the same idempotency key first (the other attempt won: its result is this one's).
        if idempotency_key is not None:
            earlier = idempotency.earlier_start(chart, idempotency_key, asked, using=database)
            if earlier is not None:
                del outbox[written:]  # nothing of this attempt was committed
                return StepResult(earlier[0], earlier[1], (), (), repeated=True)
        if business_key is not None and (
            Execution.objects.using(database)
            .filter(chart=chart, business_key=business_key)
            .exists()
        ):
            raise BusinessKeyInUse(
                f"chart {chart} already has an execution with business key {business_key!r}"
            ) from None
        raise
    phase("committed")
    return result
