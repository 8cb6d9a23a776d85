"""The timers app's part of an exported execution (``statecharts.operations.transfer``): its pending
timers, written again for the imported execution with the same due times, send ids and
ordinals (so a ``<cancel>`` finds them and the (execution, ordinal) key stays unique), in the
import's transaction."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils.dateparse import parse_datetime

from statecharts.models import Execution
from statecharts.operations.transfer import Part, redact_value, register_part
from statecharts.policies import codecs
from statecharts.stepper import ImportedRowRequest, admit, database
from timers.models import RouteTimer, Timer, TimerStatus, encode_route_message

_FIELDS = ("send_id", "ordinal", "event", "target", "macrostep", "microstep", "round",
           "content_index", "owner", "delivery", "fire_timeout_seconds")  # fmt: skip


def export_timers(execution: Execution, redact: bool) -> list[dict[str, Any]]:
    rows = (
        Timer.objects.using(database())
        .filter(execution=execution, status=TimerStatus.PENDING)
        .order_by("ordinal")
    )
    exported = []
    for timer in rows:
        item = {name: getattr(timer, name) for name in _FIELDS}
        # The document carries event data decoded (statecharts.policies.codecs): it is read by
        # another
        # deployment, with its own codec and keys. A codec or key not here is an error.
        item["event"] = codecs.decode_event(timer.event, timer.codec)
        item["due"] = timer.due.isoformat()
        item["expires_at"] = timer.expires_at.isoformat() if timer.expires_at else None
        item["context"] = timer.context
        if redact:
            event = dict(item["event"])
            if "data" in event:
                event["data"] = redact_value(event["data"])
            item["event"] = event
            item["context"] = redact_value(timer.context) if timer.context else timer.context
        exported.append(item)
    return exported


def _text(model: type[Timer] | type[RouteTimer], name: str, value: Any) -> str:
    """A text column's value from the document: checked like any text from outside, by the
    stepper's gate (an ``ImportedRowRequest``: fits the column, no NUL); an ``InvalidInput``
    is a ``ValueError``, which the import reports as the part's problem."""
    text = "" if value is None else str(value)
    checked: dict[str, str] = admit(ImportedRowRequest(model=model, texts={name: text}))
    return checked[name]


def _due(text: Any) -> datetime:
    due = parse_datetime(text) if isinstance(text, str) else None
    if due is None:
        raise ValueError(f"a timer's due time {text!r} is not a date and time")
    return due


def load_timers(execution: Execution, value: Any) -> None:
    if not isinstance(value, list):
        raise ValueError("the timers are not a list")
    rows = []
    for item in value:
        if not isinstance(item, dict) or not isinstance(item.get("event"), dict):
            raise ValueError("a timer is not an object with an event")
        event, codec = codecs.encode_event(item["event"])  # this deployment's codec
        rows.append(
            Timer(
                execution=execution,
                send_id=_text(Timer, "send_id", item["send_id"]),
                ordinal=int(item["ordinal"]),
                event=event,
                codec=codec,
                target=item["target"],
                due=_due(item.get("due")),
                expires_at=_due(item["expires_at"]) if item.get("expires_at") else None,
                macrostep=int(item["macrostep"]),
                microstep=int(item["microstep"]),
                round=int(item["round"]),
                content_index=item.get("content_index"),
                owner=_text(Timer, "owner", item.get("owner") or ""),
                context=item.get("context"),
                delivery=_text(Timer, "delivery", item.get("delivery") or "default"),
                fire_timeout_seconds=item.get("fire_timeout_seconds"),
                created=execution.updated,
            )
        )
    Timer.objects.using(database()).bulk_create(rows)


def export_route_timers(execution: Execution, redact: bool) -> list[dict[str, Any]]:
    """The delayed route sends still waiting (``RouteTimer``): their keys are kept (the
    session id travels with the execution), so a key decided before is never sent again."""
    rows = RouteTimer.objects.using(database()).filter(execution=execution).order_by("id")
    exported = []
    for row in rows:
        # Its data decoded, as a timer's event (a codec or key not here is an error).
        message = row.decoded_message()
        context = row.context  # (the scheduling step's caller context, as a timer's)
        if redact:
            message["data"] = redact_value(message.get("data"))
            context = redact_value(context) if context else context
        exported.append(
            {
                "send_id": row.send_id,
                "key": row.key,
                "route": row.route,
                "config": row.config,
                "message": message,
                "due": row.due.isoformat(),
                "context": context,
            }
        )
    return exported


def load_route_timers(execution: Execution, value: Any) -> None:
    if not isinstance(value, list):
        raise ValueError("the route timers are not a list")
    rows = []
    for item in value:
        if not isinstance(item, dict) or not isinstance(item.get("message"), dict):
            raise ValueError("a route timer is not an object with a message")
        message, codec = encode_route_message({**item["message"], "execution_id": execution.pk})
        rows.append(
            RouteTimer(
                execution=execution,
                send_id=_text(RouteTimer, "send_id", item["send_id"]),
                key=_text(RouteTimer, "key", item["key"]),
                route=_text(RouteTimer, "route", item["route"]),
                config=item.get("config") or {},
                message=message,
                codec=codec,
                due=_due(item.get("due")),
                context=item.get("context"),
                created=execution.updated,
            )
        )
    RouteTimer.objects.using(database()).bulk_create(rows)


def register() -> None:
    register_part(Part(app="timers", name="timers", export=export_timers, load=load_timers))
    register_part(
        Part(
            app="timers",
            name="route_timers",
            export=export_route_timers,
            load=load_route_timers,
        )
    )
