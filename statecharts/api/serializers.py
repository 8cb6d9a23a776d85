"""Serializers: the shapes the API reads and writes. Writes go through the stepper (views)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from statecharts.api.fields import JSONValueField, json_safe
from statecharts.api.inspection import active_states_of, datamodel_of
from statecharts.api.validators import validate_chart_value, validate_event_name
from statecharts.core.errors import ChartError, StatechartError
from statecharts.models import Chart, Execution, ExecutionStatus, HistoryEntry
from statecharts.models.history import Disposition
from statecharts.runtime import compile_source
from timers.models import Timer

NAMESPACE = "statecharts_api"


def _view(name: str) -> str:
    return f"{NAMESPACE}:{name}"


# ---- charts ------------------------------------------------------------------------------------


class ChartSerializer(serializers.ModelSerializer[Chart]):
    url = serializers.HyperlinkedIdentityField(view_name=_view("chart-detail"))
    diagram = serializers.HyperlinkedIdentityField(view_name=_view("chart-diagram"))

    class Meta:
        model = Chart
        fields = ["id", "url", "name", "version", "content_hash", "created", "diagram"]
        read_only_fields = fields


class ChartDetailSerializer(ChartSerializer):
    warnings = serializers.SerializerMethodField(
        help_text="What the validator reported without refusing the chart, as line:column: text."
    )

    class Meta(ChartSerializer.Meta):
        fields = [*ChartSerializer.Meta.fields, "source", "warnings"]
        read_only_fields = fields

    def get_warnings(self, chart: Chart) -> list[str]:
        try:
            compiled = chart.compiled()
        except ChartError as exc:  # a source edited in place to something invalid
            return [str(problem) for problem in [*exc.problems, *exc.warnings]]
        except StatechartError as exc:
            return [str(exc)]
        return [str(problem) for problem in compiled.warnings]


class ChartCreateSerializer(serializers.Serializer[Chart]):
    """Load an SCXML document. Loading a source already stored returns that chart."""

    source = serializers.CharField(
        trim_whitespace=False, help_text="The SCXML document, as text (UTF-8)."
    )
    name = serializers.CharField(
        max_length=200,
        required=False,
        allow_blank=True,
        default="",
        help_text="Defaults to the <scxml name> attribute.",
    )
    version = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")

    def validate_source(self, source: str) -> str:
        try:
            compile_source(source)
        except ChartError as exc:
            # Every problem, each as "line:column: message".
            raise serializers.ValidationError([str(problem) for problem in exc.problems]) from None
        return source

    def create(self, validated_data: dict[str, Any]) -> Chart:
        return Chart.objects.load(
            validated_data["source"],
            name=validated_data.get("name", ""),
            version=validated_data.get("version", ""),
        )


# ---- timers ------------------------------------------------------------------------------------


class TimerSerializer(serializers.ModelSerializer[Timer]):
    url = serializers.HyperlinkedIdentityField(view_name=_view("timer-detail"))
    execution = serializers.IntegerField(source="execution_id", read_only=True)
    event = JSONValueField(read_only=True)
    target = JSONValueField(read_only=True)
    context = JSONValueField(read_only=True)

    class Meta:
        model = Timer
        fields = [
            "id",
            "url",
            "execution",
            "send_id",
            "event",
            "target",
            "due",
            "status",
            "attempts",
            "last_error",
            "reason",
            "owner",
            "context",
            "created",
            "settled",
        ]
        read_only_fields = fields


# ---- executions --------------------------------------------------------------------------------


class ExecutionSerializer(serializers.ModelSerializer[Execution]):
    url = serializers.HyperlinkedIdentityField(view_name=_view("execution-detail"))
    chart = serializers.PrimaryKeyRelatedField(read_only=True)

    class Meta:
        model = Execution
        fields = [
            "id",
            "url",
            "chart",
            "session_id",
            "business_key",
            "status",
            "configuration",
            "steps",
            "outcome",
            "failure_reason",
            "created",
            "updated",
            "ended",
        ]
        read_only_fields = fields


class ExecutionDetailSerializer(ExecutionSerializer):
    active_states = serializers.SerializerMethodField(
        help_text="Every active state, compound and parallel ancestors included (document order)."
    )
    datamodel = serializers.SerializerMethodField(
        help_text="The datamodel as plain JSON (a read-only, lossy view; null if unreadable)."
    )
    donedata = JSONValueField(read_only=True)
    metadata = JSONValueField(read_only=True)
    pending_timers = serializers.SerializerMethodField(
        help_text="Delayed sends not yet settled, soonest first. When an execution finishes, "
        "its pending timers are discarded in that step, never delivered (docs/timers.md)."
    )
    history = serializers.HyperlinkedIdentityField(view_name=_view("execution-history"))
    diagram = serializers.HyperlinkedIdentityField(view_name=_view("execution-diagram"))

    class Meta(ExecutionSerializer.Meta):
        fields = [
            *ExecutionSerializer.Meta.fields,
            "active_states",
            "datamodel",
            "donedata",
            "metadata",
            "pending_timers",
            "history",
            "diagram",
        ]
        read_only_fields = fields

    def get_active_states(self, execution: Execution) -> list[str]:
        return active_states_of(execution)

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_datamodel(self, execution: Execution) -> dict[str, Any] | None:
        values = datamodel_of(execution)
        return None if values is None else json_safe(values)

    @extend_schema_field(TimerSerializer(many=True))
    def get_pending_timers(self, execution: Execution) -> list[dict[str, Any]]:
        timers = Timer.objects.for_execution(execution).pending().order_by("due", "id")
        return list(TimerSerializer(timers, many=True, context=self.context).data)


class ExecutionCreateSerializer(serializers.Serializer[Execution]):
    chart = serializers.PrimaryKeyRelatedField(queryset=Chart.objects.all())
    data = serializers.JSONField(
        required=False,
        allow_null=True,
        default=None,
        help_text="Initial values of the chart's top-level <data>, by id (a JSON object).",
    )
    business_key = serializers.CharField(
        max_length=200,
        required=False,
        allow_null=True,
        default=None,
        help_text="Unique among the executions of one chart (409 if in use).",
    )
    metadata = serializers.JSONField(
        required=False, default=dict, help_text="Opaque JSON object kept with the execution."
    )

    def validate_data(self, data: Any) -> dict[str, Any] | None:
        if data is None:
            return None
        if not isinstance(data, dict):
            raise serializers.ValidationError(
                "Must be a JSON object of <data> ids to initial values."
            )
        validate_chart_value(data)
        return data

    def validate_metadata(self, metadata: Any) -> dict[str, Any]:
        if not isinstance(metadata, dict):
            raise serializers.ValidationError("Must be a JSON object.")
        return metadata

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        chart: Chart = attrs["chart"]
        try:
            compiled = chart.compiled()
        except StatechartError as exc:
            raise serializers.ValidationError(
                {"chart": [f"chart {chart.pk} cannot be started: {exc}"]}
            ) from None
        data = attrs.get("data")
        if data:
            declared = [data_item.id for data_item in compiled.root.datas]
            unknown = sorted(set(data) - set(declared))
            if unknown:
                known = ", ".join(declared) if declared else "none"
                raise serializers.ValidationError(
                    {
                        "data": [
                            f"not a top-level <data> id of chart {chart.pk}: {', '.join(unknown)} "
                            f"(declared: {known})."
                        ]
                    }
                )
        return attrs


class EventSerializer(serializers.Serializer[Any]):
    name = serializers.CharField(
        max_length=200,
        trim_whitespace=False,
        validators=[validate_event_name],
        help_text="The event name: non-empty, no whitespace (e.g. 'order.paid').",
    )
    data = serializers.JSONField(
        required=False, allow_null=True, default=None, help_text="_event.data: any JSON value."
    )

    def validate_data(self, data: Any) -> Any:
        return validate_chart_value(data)


class StepResultSerializer(serializers.Serializer[Any]):
    """What one input did: how it was recorded, and the execution after it."""

    execution = serializers.IntegerField()
    url = serializers.URLField()
    seq = serializers.IntegerField(help_text="The history entry recording this input.")
    disposition = serializers.ChoiceField(choices=Disposition.choices)
    status = serializers.ChoiceField(choices=ExecutionStatus.choices)
    configuration = serializers.ListField(child=serializers.CharField())
    donedata = JSONValueField(allow_null=True)


class HistoryEntrySerializer(serializers.ModelSerializer[HistoryEntry]):
    input = JSONValueField(read_only=True)
    effects = JSONValueField(read_only=True)
    reachability = JSONValueField(read_only=True)

    class Meta:
        model = HistoryEntry
        fields = [
            "seq",
            "input",
            "disposition",
            "status_after",
            "configuration_after",
            "effects",
            "reachability",
            "position_sha256",
            "created",
        ]
        read_only_fields = fields
