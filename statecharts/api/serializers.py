"""Serializers: the shapes the API reads and writes. Writes go through the stepper (views)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from django.core.validators import ProhibitNullCharactersValidator
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied
from rest_framework.utils.serializer_helpers import JSONBoundField
from rest_framework.validators import ProhibitSurrogateCharactersValidator

from statecharts import extensions, stepper
from statecharts.api.availability import AvailableEventsField, SubjectInput
from statecharts.api.fields import BlankJSON, InputJSONField, JSONValueField, json_safe
from statecharts.api.filters import LARGEST_ID
from statecharts.core.errors import ChartError, StatechartError
from statecharts.exceptions import InvalidInput, printable
from statecharts.models import Chart, Execution, ExecutionStatus, HistoryEntry
from statecharts.models.charts import source_hash
from statecharts.models.history import Disposition
from statecharts.operations.inspection import ExecutionView, Unreadable, inspect, shown_input
from statecharts.policies import subjects, validation
from statecharts.policies.lookups import LookupProblem, find_chart
from statecharts.runtime import check_source, compile_source, stored_warnings
from statecharts.versions import NoNextVersion, VersionError, VersionTaken

NAMESPACE = "statecharts_api"


def _view(name: str) -> str:
    return f"{NAMESPACE}:{name}"


# ---- charts ------------------------------------------------------------------------------------


# Top-level fields a request may carry besides its serializer's: Django's CSRF token, which
# a browser's form post (the browsable API's) adds.
IGNORED_FIELDS = frozenset({"csrfmiddlewaretoken"})


class GateText(serializers.CharField):
    """Text the stepper's gate checks (an event name, a business key): DRF's own NUL and
    surrogate validators are left out, so that every door refuses them in the gate's words."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.validators = [
            validator for validator in self.validators
            if not isinstance(
                validator, ProhibitNullCharactersValidator | ProhibitSurrogateCharactersValidator
            )
        ]  # fmt: skip


class StrictInput(serializers.Serializer[Any]):
    """A request body whose top-level fields must all be known: a typo (``busines_key``)
    is a 400 naming it, never a request applied without the field it meant to give."""

    def to_internal_value(self, data: Any) -> Any:
        if hasattr(data, "keys"):
            known = set(self.fields) | IGNORED_FIELDS
            unknown = sorted(str(name) for name in data if name not in known)
            if unknown:
                takes = ", ".join(sorted(self.fields))
                raise serializers.ValidationError(
                    {
                        printable(name[:80]): [f"not a field of this request (fields: {takes})"]
                        for name in unknown[:20]
                    }
                )
        return super().to_internal_value(data)

    def __getitem__(self, key: str) -> Any:
        # The browsable API's form: an unset JSON field shown empty, not "null" (the raw
        # JSON form keeps its null).
        bound = super().__getitem__(key)
        if isinstance(bound, JSONBoundField) and bound.value is None:
            return JSONBoundField(bound._field, BlankJSON(), bound.errors, bound._prefix)
        return bound


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
        fields = [*ChartSerializer.Meta.fields, "source", "datamodel", "warnings"]
        read_only_fields = fields

    def get_warnings(self, chart: Chart) -> list[str]:
        loaded: list[Any] | None = getattr(chart, "load_warnings", None)
        if loaded is not None:  # just loaded: what loading found (a stored datamodel too)
            return [str(problem) for problem in loaded]
        try:
            warnings = stored_warnings(chart)
        except ChartError as exc:  # a source edited in place to something invalid
            return [str(problem) for problem in [*exc.problems, *exc.warnings]]
        except StatechartError as exc:
            return [str(exc)]
        return [str(problem) for problem in warnings]


class ChartCreateSerializer(StrictInput, serializers.Serializer[Chart]):
    """Load an SCXML document. Loading a source already stored returns that chart."""

    source = serializers.CharField(
        trim_whitespace=False, help_text="The SCXML document, as text (UTF-8)."
    )
    name = serializers.CharField(
        max_length=200,
        required=False,
        allow_blank=True,
        default="",
        help_text="Defaults to the name attribute of the document's scxml element.",
    )
    version = serializers.CharField(
        max_length=100,
        required=False,
        allow_blank=True,
        default="",
        help_text="The version label (default: 1 for a new name, the next whole number for a "
        "new version).",
    )
    new_version = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Load a different source under a name a chart already has, as a new version "
        "of it (needs the permission statecharts.add_chart_version; 403 without it). Without "
        "it, such a load is refused (400).",
    )

    def validate_source(self, source: str) -> str:
        try:
            check_source(source)  # a posted chart has no folder: relative references refused
        except ChartError as exc:
            # Every problem, each as "line:column: message".
            raise serializers.ValidationError([str(problem) for problem in exc.problems]) from None
        return source

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        # The name defaults to the document's <scxml name>, which must fit the column too.
        name = attrs.get("name") or compile_source(attrs["source"]).name or ""
        try:
            stepper.admit(stepper.ChartLoadRequest(name=name))
        except InvalidInput as exc:
            message = exc.problems[0].message
            raise serializers.ValidationError({"name": [f"the chart's name {message}."]}) from None
        if not Chart.objects.filter(content_hash=source_hash(attrs["source"])).exists():
            self._check_version(name, attrs)
        return attrs

    def _check_version(self, name: str, attrs: dict[str, Any]) -> None:
        """The version rules (statecharts.versions): a new version of an existing name needs
        ``new_version`` and the permission to make one."""
        new_version = bool(attrs.get("new_version"))
        request = self.context.get("request")
        if new_version and not (
            request is not None and request.user.has_perm("statecharts.add_chart_version")
        ):
            raise PermissionDenied("You may not load new versions of existing charts.")
        try:
            Chart.objects.version_for(name, attrs.get("version") or "", new_version)
        except VersionError as exc:
            field = "version" if isinstance(exc, VersionTaken | NoNextVersion) else "new_version"
            raise serializers.ValidationError({field: [str(exc)]}) from None

    def create(self, validated_data: dict[str, Any]) -> Chart:
        try:
            return Chart.objects.load(
                validated_data["source"],
                name=validated_data.get("name", ""),
                version=validated_data.get("version", ""),
                new_version=validated_data.get("new_version", False),
            )
        except VersionError as exc:  # another request took the version in between
            raise serializers.ValidationError({"version": [str(exc)]}) from None


# ---- executions --------------------------------------------------------------------------------


class ListField(StrEnum):
    """The fields the executions list adds on request (``?fields=available_events``): each
    costs work per row that the plain list does not do, so none is there by default."""

    # About one interpreter step of CPU per row (benchmarks/JOURNAL.md#available-events).
    AVAILABLE_EVENTS = "available_events"


# The serializer context key the list view puts the requested ListFields under.
LIST_FIELDS = "list_fields"


class ExecutionSerializer(serializers.ModelSerializer[Execution]):
    """An execution as the list shows it; with ``context[LIST_FIELDS]`` (the list's
    ``?fields=``), the fields asked for too (only for the rows of the page serialized)."""

    url = serializers.HyperlinkedIdentityField(view_name=_view("execution-detail"))
    chart = serializers.PrimaryKeyRelatedField(read_only=True)
    # The chart's address too (the id stays: clients read it), a link in the browsable API.
    chart_url = serializers.HyperlinkedRelatedField(
        source="chart", view_name=_view("chart-detail"), read_only=True
    )

    def get_fields(self) -> dict[str, serializers.Field]:  # type: ignore[type-arg]
        fields = super().get_fields()
        for name in self.context.get(LIST_FIELDS, ()):
            if name == ListField.AVAILABLE_EVENTS and name not in fields:
                fields[name] = AvailableEventsField()
        return fields

    class Meta:
        model = Execution
        fields = [
            "id",
            "url",
            "chart",
            "chart_url",
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
            "erased",
            "tracing",
        ]
        read_only_fields = fields


def execution_view(field: serializers.Field, execution: Execution) -> ExecutionView:  # type: ignore[type-arg]
    """The read model of ``execution`` for a field of the execution detail (contributed
    fields too: ``statecharts.extensions.ExecutionField``): read once per execution, shared
    by every field, so the fields of one response cannot disagree."""
    owner: Any = field
    while owner is not None and not isinstance(owner, ExecutionDetailSerializer):
        owner = owner.parent
    if owner is None:
        return inspect(execution)
    return owner.view_of(execution)


class ExecutionDetailSerializer(ExecutionSerializer):
    """An execution as the read model (``statecharts.operations.inspection``) shows it, plus the
    fields
    installed apps contribute (``pending_timers`` from the timers app)."""

    active_states = serializers.SerializerMethodField(
        help_text="Every active state, compound and parallel ancestors included (document order)."
    )
    datamodel = serializers.SerializerMethodField(
        help_text="The datamodel as plain JSON (a read-only, lossy view; null if unreadable)."
    )
    donedata = JSONValueField(read_only=True)
    metadata = JSONValueField(read_only=True)
    unreadable = serializers.SerializerMethodField(
        help_text="What could not be read for display, by part (configuration, chart, "
        "datamodel, or a contributed section such as timers), with the reason; empty when "
        "the whole row reads."
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
            "unreadable",
            "history",
            "diagram",
        ]
        read_only_fields = fields

    def get_fields(self) -> dict[str, serializers.Field]:  # type: ignore[type-arg]
        declared = super().get_fields()
        contributed = {item.name: item.field() for item in extensions.execution_fields}
        # Contributed fields go before the links, where pending_timers always was.
        fields: dict[str, serializers.Field] = {}  # type: ignore[type-arg]
        for name, value in declared.items():
            if name == "history":
                fields.update((n, f) for n, f in contributed.items() if n not in declared)
            fields[name] = value
        return fields

    def view_of(self, execution: Execution) -> ExecutionView:
        view: ExecutionView | None = getattr(self, "_execution_view", None)
        if view is None or view.execution is not execution:
            view = inspect(execution)
            self._execution_view = view
        return view

    def get_active_states(self, execution: Execution) -> list[str]:
        return list(self.view_of(execution).active_states)

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_datamodel(self, execution: Execution) -> dict[str, Any] | None:
        values = self.view_of(execution).datamodel
        return None if isinstance(values, Unreadable) else json_safe(values)

    @extend_schema_field({"type": "object", "additionalProperties": {"type": "string"}})
    def get_unreadable(self, execution: Execution) -> dict[str, str]:
        return self.view_of(execution).unreadable


@extend_schema_field(
    {
        "oneOf": [{"type": "integer"}, {"type": "string"}],
        "description": "A chart id, a chart name (the latest version of the charts with "
        "that name, as manage.py statechart start chooses it) or NAME@VERSION.",
    }
)
class ChartReferenceField(serializers.PrimaryKeyRelatedField):  # type: ignore[type-arg]
    """A chart by id (a JSON integer) or by id or name (a string), the rule of
    ``statecharts.policies.lookups.find_chart``: a name means its latest version.

    A JSON number with a fraction or an exponent (``1.5``, ``1.0``, ``1e400``) is not an id:
    it is refused (400) rather than rounded to another chart's id or overflowing the
    lookup. A whole number outside the 64-bit id range is refused the same way."""

    def to_internal_value(self, data: Any) -> Chart:
        if isinstance(data, float):
            raise serializers.ValidationError(
                f"a chart id is an integer (such as 7), not the number {data!r}."
            )
        if isinstance(data, int) and not isinstance(data, bool) and abs(data) > LARGEST_ID:
            raise serializers.ValidationError(
                f"a chart id is at most {LARGEST_ID}; no chart has the id {data}."
            )
        if isinstance(data, str) and data.strip():
            try:
                # Looked up in text columns: it must be text they could hold.
                stepper.admit(stepper.ChartLookupRequest(reference=data))
            except InvalidInput as exc:
                raise serializers.ValidationError(exc.problems[0].message) from None
            try:
                return find_chart(data.strip())
            except LookupProblem as exc:
                raise serializers.ValidationError(str(exc)) from None
        chart: Chart = super().to_internal_value(data)
        return chart


class ExecutionCreateSerializer(StrictInput, serializers.Serializer[Execution]):
    chart = ChartReferenceField(
        queryset=Chart.objects.all(),
        help_text="A chart id, a chart name (its latest version, compared as dotted "
        "numbers; refused when that is not one chart) or NAME@VERSION.",
    )
    data = InputJSONField(
        required=False,
        allow_null=True,
        default=None,
        help_text="Initial values of the chart's top-level data elements, by id (a JSON "
        "object of data ids to values, in the tagged encoding: docs/admin-and-api.md).",
    )
    business_key = GateText(
        max_length=200,
        required=False,
        allow_null=True,
        default=None,
        help_text="Unique among the executions of one chart (409 if in use).",
    )
    metadata = InputJSONField(
        required=False,
        default=dict,
        initial=dict,
        help_text="Opaque JSON object kept with the execution.",
    )
    subject = SubjectInput(
        required=False,
        allow_null=True,
        default=None,
        help_text="The object this execution is about: {'type': 'app_label.model', 'id': "
        "'42'}, a model listed in STATECHARTS['SUBJECT_MODELS'] and an existing object.",
    )

    def validate_subject(self, value: dict[str, Any] | None) -> Any:
        if value is None:
            return None
        try:
            return subjects.resolve(value["type"], value["id"])
        except InvalidInput as exc:
            raise serializers.ValidationError([p.message for p in exc.problems]) from None

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        chart: Chart = attrs["chart"]
        try:
            chart.compiled()
        except StatechartError as exc:
            raise serializers.ValidationError(
                {"chart": [f"chart {chart.pk} cannot be started: {exc}"]}
            ) from None
        return attrs


class EventSerializer(StrictInput, serializers.Serializer[Any]):
    name = GateText(
        max_length=validation.EVENT_NAME_MAX_LENGTH,
        trim_whitespace=False,
        help_text="The event name: non-empty, no whitespace (e.g. 'order.paid'); names under "
        "a reserved prefix (error.*, done.*) are the platform's own and refused.",
    )
    data = InputJSONField(
        required=False,
        allow_null=True,
        default=None,
        help_text="_event.data: any JSON value (the tagged encoding: docs/admin-and-api.md).",
    )
    strict = serializers.BooleanField(
        required=False,
        allow_null=True,
        default=None,
        help_text="true: refuse the event (409, reason 'unhandled', nothing kept) when no "
        "transition takes it; false: consume it (handled: false); absent or null: the "
        "STRICT_EVENTS setting.",
    )


class StepResultSerializer(serializers.Serializer[Any]):
    """What one input did: how it was recorded, and the execution after it."""

    execution = serializers.IntegerField()
    url = serializers.URLField()
    seq = serializers.IntegerField(help_text="The history entry recording this input.")
    disposition = serializers.ChoiceField(choices=Disposition.choices)
    status = serializers.ChoiceField(choices=ExecutionStatus.choices)
    configuration = serializers.ListField(child=serializers.CharField())
    donedata = JSONValueField(allow_null=True)
    handled = serializers.BooleanField(
        allow_null=True,
        help_text="An event: false when no transition was selected for it (SCXML consumes it: "
        "_event was bound, <finalize> ran, autoforwarding happened; the history entry's reason "
        "says 'unhandled'). null for a cancel.",
    )
    repeated = serializers.BooleanField(
        default=False,
        help_text="True when the Idempotency-Key repeated an earlier request's: nothing was "
        "applied, seq and disposition are that request's.",
    )


class HistoryEntrySerializer(serializers.ModelSerializer[HistoryEntry]):
    input = JSONValueField(read_only=True)
    effects = JSONValueField(read_only=True)
    reachability = JSONValueField(read_only=True)
    caller_context = JSONValueField(
        read_only=True, help_text="Who or what fed the input (request id, trace, user)."
    )
    cause = JSONValueField(
        read_only=True, help_text="What caused it: a timer (and the step that scheduled it)."
    )

    def to_representation(self, instance: HistoryEntry) -> dict[str, Any]:
        shown: dict[str, Any] = super().to_representation(instance)
        shown["input"] = shown_input(shown["input"])  # I/O processor addresses hidden
        return shown

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
            "caller_context",
            "cause",
            "idempotency_key",
            "created",
        ]
        read_only_fields = fields
