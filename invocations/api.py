"""The invocations app's part of the REST API (registered in ``InvocationsConfig.ready()``).

- ``/api/invocations/`` and ``/api/invocations/{id}/``: invocation rows, read-only, filtered
  by ``parent`` and ``status``;
- ``POST /api/invocations/{id}/retry-now/`` and ``.../cancel/`` (``{"reason": ...}``): an
  operator's actions on a handler's invocation (``invocations.operating``;
  ``invocations.retry_invocation``, ``invocations.cancel_invocation``);
- ``invocations`` in the execution detail: its invocations, read from the same read-model
  section as the admin's panel.
"""

from __future__ import annotations

from typing import Any

import django_filters
from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_view
from rest_framework import mixins, serializers

from invocations import operating
from invocations.models import Invocation, InvocationStatus
from statecharts.api.fields import JSONValueField
from statecharts.api.filters import IntegerFilter
from statecharts.api.operating import OperatorActions, operator_action
from statecharts.api.serializers import NAMESPACE, StrictInput, execution_view
from statecharts.api.views import APIViewSet
from statecharts.operations.inspection import Unreadable


class InvocationSerializer(serializers.ModelSerializer[Invocation]):
    url = serializers.HyperlinkedIdentityField(view_name=f"{NAMESPACE}:invocation-detail")
    parent = serializers.IntegerField(source="parent_id", read_only=True)
    child = serializers.IntegerField(source="child_id", read_only=True, allow_null=True)
    chart = serializers.IntegerField(source="chart_id", read_only=True, allow_null=True)
    params = JSONValueField(
        source="shown_params.value",
        read_only=True,
        help_text="The params, decoded with the row's payload codec (as stored when they "
        "cannot be decoded here: see params_unreadable).",
    )
    params_unreadable = serializers.CharField(
        source="shown_params.unreadable",
        read_only=True,
        help_text="Why the params are shown as stored (empty: decoded).",
    )

    class Meta:
        model = Invocation
        fields = [
            "id", "url", "parent", "ordinal", "invokeid", "type", "state", "src", "params",
            "params_unreadable", "codec", "autoforward", "status", "reason", "chart", "child",
            "attempts", "last_error", "created", "updated",
        ]  # fmt: skip
        read_only_fields = fields


class InvocationFilter(django_filters.FilterSet):
    parent = IntegerFilter(field_name="parent_id")
    status = django_filters.ChoiceFilter(choices=InvocationStatus.choices)

    class Meta:
        model = Invocation
        fields = ["parent", "status"]


class InvocationActionSerializer(StrictInput):  # unknown top-level fields: a 400
    reason = serializers.CharField(
        max_length=operating.REASON_MAX_LENGTH,
        help_text="Why: recorded with the action in the parent's history.",
    )


class InvocationOutcomeSerializer(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.IntegerField()
    outcome = serializers.CharField(help_text="what the start did (retry now), cancelled")


@extend_schema_view(
    list=extend_schema(summary="List invocations (<invoke>s started by executions)"),
    retrieve=extend_schema(summary="An invocation"),
)
class InvocationViewSet(
    OperatorActions, mixins.ListModelMixin, mixins.RetrieveModelMixin, APIViewSet
):
    """Invocations: one row per <invoke> started, read-only (see docs/invocations.md)."""

    queryset = Invocation.objects.all()
    serializer_class = InvocationSerializer
    filterset_class = InvocationFilter
    action_permissions = {name: [perm] for name, perm in operating.PERMISSIONS.items()}

    def act(self, name: str, row_id: int, values: dict[str, Any], context: dict[str, Any]) -> str:
        do = operating.retry_now if name == "retry_now" else operating.cancel
        return do(row_id, reason=values["reason"], caller_context=context)

    retry_now = operator_action(
        "retry_now",
        url_path="retry-now",
        summary="Retry a waiting handler start now (an operator's action)",
        body=InvocationActionSerializer,
        answer=InvocationOutcomeSerializer,
    )
    cancel = operator_action(
        "cancel",
        summary="Cancel an open handler invocation (an operator's action)",
        body=InvocationActionSerializer,
        answer=InvocationOutcomeSerializer,
    )


@extend_schema_field(InvocationSerializer(many=True))
class InvocationsField(serializers.Field):  # type: ignore[type-arg]
    """The execution's invocations, in the order they were started."""

    def __init__(self) -> None:
        super().__init__(
            source="*",
            read_only=True,
            help_text="The <invoke>s this execution started, oldest first (docs/invocations.md).",
        )

    def to_representation(self, execution: Any) -> list[dict[str, Any]]:
        section = execution_view(self, execution).sections.get("invocations")
        if section is None or isinstance(section, Unreadable):
            return []
        rows = [row.invocation for row in section.rows]
        return list(InvocationSerializer(rows, many=True, context=self.context).data)
