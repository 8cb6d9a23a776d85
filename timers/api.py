"""The timers app's part of the REST API (registered in ``TimersConfig.ready()``).

- ``/api/timers/`` and ``/api/timers/{id}/``: timers, read-only, filtered by ``execution``
  and ``status`` (URL names ``statecharts_api:timer-list`` / ``timer-detail``);
- ``pending_timers`` in the execution detail: the execution's pending timers, soonest first,
  read from the same read-model section as the admin's timers panel.

``statecharts.api`` knows none of this: it mounts what is registered
(``statecharts.extensions``).
"""

from __future__ import annotations

from typing import Any

import django_filters
from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_view
from rest_framework import mixins, serializers

from statecharts.api.fields import JSONValueField
from statecharts.api.filters import IntegerFilter
from statecharts.api.serializers import NAMESPACE, execution_view
from statecharts.api.views import APIViewSet
from statecharts.operations.inspection import Unreadable
from timers.models import Timer, TimerStatus


class TimerSerializer(serializers.ModelSerializer[Timer]):
    url = serializers.HyperlinkedIdentityField(view_name=f"{NAMESPACE}:timer-detail")
    execution = serializers.IntegerField(source="execution_id", read_only=True)
    event = JSONValueField(read_only=True)
    target = JSONValueField(read_only=True)
    context = JSONValueField(read_only=True)
    cancelled_by = JSONValueField(read_only=True)

    class Meta:
        model = Timer
        fields = [
            "id",
            "url",
            "execution",
            "send_id",
            "event",
            "codec",
            "target",
            "due",
            "status",
            "attempts",
            "last_error",
            "reason",
            "owner",
            "context",
            "scheduled_in",
            "cancelled_by",
            "delivery",
            "fire_timeout_seconds",
            "claimed_until",
            "fire_deadline",
            "created",
            "settled",
        ]
        read_only_fields = fields


class TimerFilter(django_filters.FilterSet):
    # A number, not a choice among existing executions: a timer outlives a deleted
    # execution (timers.models), and its rows stay listable by the id it had.
    execution = IntegerFilter(field_name="execution_id")
    status = django_filters.ChoiceFilter(choices=TimerStatus.choices)

    class Meta:
        model = Timer
        fields = ["execution", "status"]


@extend_schema_view(
    list=extend_schema(summary="List timers (delayed sends)"),
    retrieve=extend_schema(summary="A timer"),
)
class TimerViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, APIViewSet):
    """Timers: one row per delayed send, read-only (see docs/timers.md)."""

    queryset = Timer.objects.all()
    serializer_class = TimerSerializer
    filterset_class = TimerFilter


@extend_schema_field(TimerSerializer(many=True))
class PendingTimersField(serializers.Field):  # type: ignore[type-arg]
    """The execution's pending timers, soonest first (the read model's timers section)."""

    def __init__(self) -> None:
        super().__init__(
            source="*",
            read_only=True,
            help_text="Delayed sends not yet settled, soonest first. When an execution "
            "finishes, its pending timers are discarded in that step, never delivered "
            "(docs/timers.md).",
        )

    def to_representation(self, execution: Any) -> list[dict[str, Any]]:
        section = execution_view(self, execution).sections.get("timers")
        if section is None or isinstance(section, Unreadable):
            return []  # the detail's "unreadable" says why
        timers = [row.timer for row in section.pending]
        return list(TimerSerializer(timers, many=True, context=self.context).data)
