"""The performers the routes app registers, and the route checker the stepper asks.

Both performers run inside the step's transaction (the execution locked):

- ``deliver_route``: an outbox message of kind ``routes.deliver``, delivered after the commit
  (``routes.delivering``);
- ``schedule_route``: a :class:`~routes.queue.TimerEntry` handed to the configured route timer
  queue, with the route's configuration resolved under the scope now, when it is scheduled.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from routes import registry
from routes.base import RouteAnswer, RouteMessage, RouteVerdict
from routes.delivering import KIND, outbox_payload
from routes.queue import TimerEntry, configured_queue
from statecharts.core.plan import Instruction
from statecharts.exceptions import InvalidInput
from statecharts.models import Execution, OutboxMessage
from statecharts.stepper import StepContext, database


def check_route(
    execution: Execution, route: str, send_type: str, target: str | None
) -> RouteAnswer:
    """The stepper's route checker: the route's own answer under the execution's scope. A
    scope override the route refuses (settings changed since the start) is ``invalid``."""
    known = registry.get(route)
    if known is None:
        return RouteAnswer(RouteVerdict.UNREACHABLE, f"the route {route!r} is not registered")
    try:
        config = registry.resolve_config(route, execution.chart.name, execution.metadata)
    except registry.OverrideRefused as exc:
        return RouteAnswer(RouteVerdict.INVALID, str(exc))
    return known.route.check(config, send_type, target)


def check_start(chart: Any, metadata: dict[str, Any] | None) -> None:
    """Refuse a start whose ``metadata["routes"]`` names an unregistered route or overrides an
    option its route does not let a scope override (nothing is written)."""
    scoped = (metadata or {}).get(registry.METADATA_KEY)
    if scoped is None:
        return
    problems = registry.override_problems(scoped, registry.routes())
    if problems:
        raise InvalidInput.at(f"metadata.{registry.METADATA_KEY}", "; ".join(problems))


def route_message(context: StepContext, instruction: Instruction, *, delayed: bool) -> RouteMessage:
    assert instruction.target is not None and instruction.event is not None
    effect = instruction.effect
    data = effect.data if effect is not None else {}
    event = instruction.event
    return RouteMessage(
        route=instruction.target.route or "",
        type=instruction.target.type or "",
        target=instruction.target.address,
        name=event.name,
        data=event.data,
        payload=data.get("payload"),
        send_id=str(data.get("send_id") or event.sendid or ""),
        send_ordinal=int(data.get("send_ordinal") or 0),
        session_id=context.execution.session_id,
        execution_id=context.execution.pk,
        delayed=delayed,
    )


def _resolved(context: StepContext, message: RouteMessage) -> tuple[Any, str]:
    try:
        config = registry.resolve_config(
            message.route, context.execution.chart.name, context.execution.metadata
        )
    except registry.OverrideRefused as exc:
        return None, str(exc)
    return config, ""


def deliver_route(context: StepContext, instruction: Instruction) -> None:
    """``deliver_route``: the send waits in the outbox until the step commits."""
    message = route_message(context, instruction, delayed=False)
    known = registry.get(message.route)
    config, refused = _resolved(context, message)
    key = (
        known.route.idempotency_key(message)
        if known is not None
        else f"{message.session_id}:{message.send_ordinal}"
    )
    row = OutboxMessage.objects.using(database()).create(
        sender=context.execution,
        kind=KIND,
        target_session_id=context.execution.session_id,
        event=outbox_payload(message.route, config, message, key, refused),
        send_id=message.send_id[:200],
        caller_context=context.caller_context,  # (its delivery's telemetry: the step's trace)
        created=context.now,
    )
    context.outbox.append(row.pk)


def schedule_route(context: StepContext, instruction: Instruction) -> None:
    """``schedule_route``: the entry goes to the route timer queue (its two keys: the
    cancellation key (execution, send id) and the route's idempotency key)."""
    queue = configured_queue()
    if queue is None:  # (the core refuses these sends when there is no queue: settings moved)
        raise RuntimeError("no route timer queue (STATECHARTS['ROUTE_TIMER_QUEUE'])")
    message = route_message(context, instruction, delayed=True)
    known = registry.get(message.route)
    assert known is not None
    config, _ = _resolved(context, message)
    effect = instruction.effect
    assert effect is not None
    queue.schedule(
        TimerEntry(
            scope=context.execution.pk,
            send_id=message.send_id,
            key=known.route.idempotency_key(message),
            route=message.route,
            config=config or {},
            message=message,
            due=context.now + timedelta(milliseconds=effect.data["delay_ms"]),
            created=context.now,
            scheduled_in=context.seq,
            caller_context=context.caller_context,
        )
    )


def register() -> None:
    """(Re-)register what the settings say: the send types of the registered routes, and
    ``schedule_route`` only when a route timer queue is there (the core then knows delayed
    route sends are kept; without it they are error.communication)."""
    from statecharts.core.plan import InstructionKind
    from statecharts.stepper import register_performer, register_send_types

    register_send_types(registry.send_types(), owner="routes")
    register_performer(
        InstructionKind.SCHEDULE_ROUTE,
        schedule_route if configured_queue() is not None else None,  # type: ignore[arg-type]
    )
