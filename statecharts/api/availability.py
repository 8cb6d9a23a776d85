"""The execution detail's ``available_events`` and ``subject`` fields, and the 403 of a send
``statecharts.policies.authorization`` refuses. Registered as execution fields by the app's
``ready()``
(``statecharts.extensions``), like the fields other apps contribute."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from statecharts import extensions
from statecharts.policies import availability, subjects

_TRANSITION = {
    "type": "object",
    "properties": {
        "source": {"type": "string"},
        "targets": {"type": "array", "items": {"type": "string"}},
        "event": {"type": "string"},
        "cond": {"type": "string", "nullable": True},
        "guard": {
            "type": "string",
            "enum": ["none", "evaluated", "reads_event", "side_effects", "failed"],
        },
        "availability": {"type": "string", "enum": ["enabled", "conditional", "disabled"]},
        "reason": {"type": "string"},
    },
}
_EVENT = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "availability": {"type": "string", "enum": ["enabled", "conditional", "disabled"]},
        "any_name": {"type": "boolean"},
        "family": {"type": "boolean"},
        "truncated": {
            "type": "boolean",
            "description": "The transitions list is cut short: the answer's work budget "
            "ran out (the name and its availability are exact).",
        },
        "transitions": {"type": "array", "items": _TRANSITION},
    },
}


# The serializer context key of the request's guard time (statecharts.policies.availability).
_GUARD_TIME = "statecharts.available_events.guard_time"


@extend_schema_field({"type": "array", "items": _EVENT})
class AvailableEventsField(serializers.Field):  # type: ignore[type-arg]
    def __init__(self) -> None:
        super().__init__(
            source="*",
            read_only=True,
            help_text="The events that would enable a transition now, for the requesting "
            "user (events they may not send are left out): 'enabled' (no guard, or a "
            "side-effect-free guard that holds now), 'conditional' (a guard that reads "
            "_event or is not evaluated), 'disabled' (every guard is false now). A "
            "'truncated' event's transitions list is cut short by the read's work budget. "
            "docs/permissions-and-available-events.md.",
        )

    def to_representation(self, execution: Any) -> list[dict[str, Any]]:
        request = self.context.get("request")
        user = getattr(request, "user", None)
        # One guard time allowance per request: the rows of a list page share it.
        guards = self.context.get(_GUARD_TIME)
        if guards is None:
            guards = availability.guard_time()
            if isinstance(self.context, dict):
                self.context[_GUARD_TIME] = guards
        try:
            events = availability.available_events(execution, user=user, guards=guards)
        except availability.Unavailable:
            return []  # the detail's "unreadable" says why
        return [availability.as_json(event) for event in events]


@extend_schema_field(
    {
        "type": "object",
        "nullable": True,
        "properties": {
            "type": {"type": "string", "description": "app_label.model"},
            "id": {"type": "string"},
            "title": {"type": "string", "nullable": True},
        },
    }
)
class SubjectField(serializers.Field):  # type: ignore[type-arg]
    def __init__(self) -> None:
        super().__init__(
            source="*",
            read_only=True,
            help_text="The object this execution is about (set at start), or null; its "
            "title is null when the object was deleted since.",
        )

    def to_representation(self, execution: Any) -> dict[str, Any] | None:
        return subjects.describe(execution)


class SubjectInput(serializers.Serializer[Any]):
    """``{"type": "shop.order", "id": "42"}`` when starting an execution."""

    type = serializers.CharField(max_length=200)
    id = serializers.CharField(max_length=subjects.MAX_OBJECT_ID)


def register() -> None:
    extensions.register(
        extensions.ExecutionField(
            app="statecharts", name="available_events", field=AvailableEventsField
        ),
        extensions.ExecutionField(app="statecharts", name="subject", field=SubjectField),
    )
