"""The durable stepper: the one public surface for driving executions stored as rows.

Everything an app, a view, a command or a worker does to an execution goes through these
names (``timers`` and ``invocations`` use nothing else of ``statecharts`` but the models and
the core's public names)::

    start(chart, *, data, business_key, metadata, session_id, now, caller_context)
    send(execution, name, data=None, *, now, caller_context, **fields)
    cancel(execution, *, now, caller_context)
    feed(execution, step_input, *, now, caller_context)        # any Input
    step_locked(execution, step_input, now, outbox, caller_context)
    lock(pk) / lock_many(pks)                                   # inside your transaction
    perform_delivery(execution, instruction, now, outbox, caller_context)
    deliver(message_ids) / deliver_pending() / retry_message(message_id)
    database()                                                  # the alias steps use
    register_performer(kind, performer)                         # in AppConfig.ready()
    register_invoke_types(types) / register_send_type(type, route)
    registered_types()                                          # this step's snapshot

``StepResult`` (execution, history entry, effects, instructions), ``StepContext`` (what a
performer gets), ``Input``, ``NoPerformer`` and the refusals (``StepRefused``,
``NeedsMigration``, ``BusinessKeyInUse``) come with it.

Concerns, one module each: ``transaction`` (one step, one transaction), ``performing``
(instructions and their performers), ``delivery`` (the outbox, exactly once), ``sweeper``
(django-q2 glue for crash leftovers), ``sql`` (the hand-compiled statements of the hot path).
The compiled-chart cache is ``statecharts.runtime`` (models use it too).

Lock order: one execution per step (``lock``); a batch (``lock_many``) takes its executions in
ascending id order before anything else; rows an execution owns (its timers, its outbox) are
only written under its lock, after it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from statecharts.core.datamodel import check_tagged
from statecharts.core.events import EXTERNAL, Event
from statecharts.drivers.durable import Input
from statecharts.exceptions import NeedsMigration, StepRefused
from statecharts.models import Chart, Execution
from statecharts.stepper.delivery import deliver, deliver_pending
from statecharts.stepper.delivery import retry as retry_message
from statecharts.stepper.performing import (
    EffectContext,
    NoPerformer,
    Performer,
    StepContext,
    register_invoke_types,
    register_performer,
    register_send_type,
    registered_types,
)
from statecharts.stepper.sql import database
from statecharts.stepper.transaction import (
    BusinessKeyInUse,
    StepResult,
    feed_step,
    lock,
    lock_many,
    perform_delivery,
    start_step,
    step_locked,
)


def start(
    chart: Chart,
    *,
    data: dict[str, Any] | None = None,
    business_key: str | None = None,
    metadata: dict[str, Any] | None = None,
    session_id: str | None = None,
    now: datetime | None = None,
    caller_context: dict[str, Any] | None = None,
    io_processors: dict[str, str] | None = None,
) -> Execution:
    """Create an execution of ``chart`` and run it to its first stable configuration (one
    transaction), then deliver what it sent to other executions."""
    outbox: list[int] = []
    result = start_step(
        chart,
        outbox,
        data=data,
        business_key=business_key,
        metadata=metadata,
        session_id=session_id,
        now=now,
        caller_context=caller_context,
        io_processors=io_processors,
    )
    deliver(outbox)
    return result.execution


def send(
    execution: Execution | int,
    name: str,
    data: Any = None,
    *,
    now: datetime | None = None,
    caller_context: dict[str, Any] | None = None,
    **fields: Any,
) -> StepResult:
    """Feed one external event named ``name`` (fields: sendid, origin, origintype, invokeid).

    ``caller_context`` is opaque JSON handed to performers (timer rows keep it).
    """
    check_tagged(data)  # ValueError names the bad path; nothing is written
    event = Event(name, EXTERNAL, data, **fields)
    return feed(execution, Input.external(event), now=now, caller_context=caller_context)


def cancel(
    execution: Execution | int,
    *,
    now: datetime | None = None,
    caller_context: dict[str, Any] | None = None,
) -> StepResult:
    """Stop an execution from outside: its onexit handlers run, then it is ``cancelled``."""
    return feed(execution, Input.cancel(), now=now, caller_context=caller_context)


def feed(
    execution: Execution | int,
    step_input: Input,
    *,
    now: datetime | None = None,
    caller_context: dict[str, Any] | None = None,
) -> StepResult:
    """Apply one input in one transaction, then deliver the outbox rows it wrote."""
    pk = execution.pk if isinstance(execution, Execution) else execution
    outbox: list[int] = []
    result = feed_step(pk, step_input, now, outbox, caller_context=caller_context)
    assert result is not None
    deliver(outbox)
    return result


__all__ = [
    "BusinessKeyInUse",
    "EffectContext",
    "Input",
    "NeedsMigration",
    "NoPerformer",
    "Performer",
    "StepContext",
    "StepRefused",
    "StepResult",
    "cancel",
    "database",
    "deliver",
    "deliver_pending",
    "feed",
    "lock",
    "lock_many",
    "perform_delivery",
    "register_invoke_types",
    "register_performer",
    "register_send_type",
    "registered_types",
    "retry_message",
    "send",
    "start",
    "step_locked",
]
