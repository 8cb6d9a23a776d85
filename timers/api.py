"""The timers app's part of the REST API (registered in ``TimersConfig.ready()``).

- ``/api/timers/`` and ``/api/timers/{id}/``: timers, read-only, filtered by ``execution``
  and ``status`` (URL names ``statecharts_api:timer-list`` / ``timer-detail``);
- ``POST /api/timers/{id}/fire-now/``, ``.../cancel/``, ``.../reschedule/``: an operator's
  actions on a pending timer (``timers.operating``), each behind its own permission
  (``timers.fire_timer``, ``timers.cancel_timer``, ``timers.reschedule_timer``), with a
  ``reason`` (and ``due`` to reschedule); refused as the refusal table says;
- ``/api/route-timers/`` and ``/api/route-timers/{id}/``: waiting route timers, with the same
  three actions (``timers.fire_routetimer``, ...);
- ``pending_timers`` in the execution detail: the execution's pending timers, soonest first,
  read from the same read-model section as the admin's timers panel.

``statecharts.api`` knows none of this: it mounts what is registered
(``statecharts.extensions``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import django_filters
from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_view
from rest_framework import mixins, serializers
from rest_framework.response import Response

from statecharts.api.fields import JSONValueField
from statecharts.api.filters import IntegerFilter
from statecharts.api.operating import OperatorActions, operator_action
from statecharts.api.serializers import NAMESPACE, StrictInput, execution_view
from statecharts.api.views import APIViewSet
from statecharts.operations.inspection import Unreadable
from timers import operating
from timers.models import RouteTimer, Timer, TimerStatus


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
            "expires_at",
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


class OperatorActionSerializer(StrictInput):  # unknown top-level fields: a 400
    reason = serializers.CharField(
        max_length=operating.REASON_MAX_LENGTH,
        help_text="Why: recorded with the action in the execution's history.",
    )


class RescheduleSerializer(OperatorActionSerializer):
    due = serializers.DateTimeField(help_text="The new due time (with a time zone).")


class OperatorOutcomeSerializer(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.IntegerField()
    outcome = serializers.CharField(
        help_text="fired, discarded or snoozed (fire now: what the fire did), cancelled, "
        "rescheduled."
    )


# Each action needs its own permission: <app>.fire_<model>, cancel_..., reschedule_...
ACTION_PERMISSIONS = {
    "fire_now": ["%(app_label)s.fire_%(model_name)s"],
    "cancel": ["%(app_label)s.cancel_%(model_name)s"],
    "reschedule": ["%(app_label)s.reschedule_%(model_name)s"],
}


class OperatorActionsMixin(OperatorActions):
    """``fire-now``, ``cancel`` and ``reschedule`` on one row (``timers.operating``, the
    functions a viewset names in ``operations``), through the API's one operator-action path
    (``statecharts.api.operating``); a fire now whose delivery failed is a 502."""

    action_permissions = ACTION_PERMISSIONS
    operations: dict[str, Callable[..., str]] = {}

    def act(self, name: str, row_id: int, values: dict[str, Any], context: dict[str, Any]) -> str:
        args = (row_id, values["due"]) if name == "reschedule" else (row_id,)
        return self.operations[name](*args, reason=values["reason"], caller_context=context)

    def failed(self, error: Exception) -> Response | None:
        if isinstance(error, operating.FireFailed):
            return Response({"detail": str(error), "reason": "failed"}, status=502)
        return None

    fire_now = operator_action(
        "fire_now",
        url_path="fire-now",
        summary="Fire now (an operator's action)",
        body=OperatorActionSerializer,
        answer=OperatorOutcomeSerializer,
    )
    cancel = operator_action(
        "cancel",
        summary="Cancel (an operator's action)",
        body=OperatorActionSerializer,
        answer=OperatorOutcomeSerializer,
    )
    reschedule = operator_action(
        "reschedule",
        summary="Reschedule (an operator's action)",
        body=RescheduleSerializer,
        answer=OperatorOutcomeSerializer,
    )


@extend_schema_view(
    list=extend_schema(summary="List timers (delayed sends)"),
    retrieve=extend_schema(summary="A timer"),
)
class TimerViewSet(
    OperatorActionsMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, APIViewSet
):
    """Timers: one row per delayed send (see docs/timers.md); an operator may fire a pending
    one now, cancel or reschedule it."""

    queryset = Timer.objects.all()
    serializer_class = TimerSerializer
    filterset_class = TimerFilter
    operations = {
        "fire_now": operating.fire_now,
        "cancel": operating.cancel,
        "reschedule": operating.reschedule,
    }


class RouteTimerSerializer(serializers.ModelSerializer[RouteTimer]):
    url = serializers.HyperlinkedIdentityField(view_name=f"{NAMESPACE}:route-timer-detail")
    execution = serializers.IntegerField(source="execution_id", read_only=True)

    class Meta:
        model = RouteTimer
        fields = ["id", "url", "execution", "send_id", "key", "route", "due", "reason", "created"]
        read_only_fields = fields


class RouteTimerFilter(django_filters.FilterSet):
    execution = IntegerFilter(field_name="execution_id")

    class Meta:
        model = RouteTimer
        fields = ["execution", "route"]


@extend_schema_view(
    list=extend_schema(summary="List waiting route timers (delayed route sends)"),
    retrieve=extend_schema(summary="A waiting route timer"),
)
class RouteTimerViewSet(
    OperatorActionsMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, APIViewSet
):
    """Delayed route sends waiting (a row leaves when it fires, is cancelled or discarded:
    its fate is in the route deliveries); an operator may fire one now, cancel or reschedule
    it."""

    queryset = RouteTimer.objects.all()
    serializer_class = RouteTimerSerializer
    filterset_class = RouteTimerFilter
    operations = {
        "fire_now": operating.fire_route_now,
        "cancel": operating.cancel_route,
        "reschedule": operating.reschedule_route,
    }


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
