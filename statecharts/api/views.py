"""Views: thin wrappers over ``statecharts.stepper`` and the models. No step logic here."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import mixins, status, viewsets
from rest_framework import serializers as rest_serializers
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, ErrorDetail, NotFound, ValidationError
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.serializers import BaseSerializer

from statecharts import stepper
from statecharts.api import filters, serializers
from statecharts.api.erasure import ErasureAnswerSerializer, ErasureRequestSerializer
from statecharts.api.erasure import run as run_erasure
from statecharts.api.exceptions import Conflict, DiagramUnavailable, Refused, refused
from statecharts.api.migration import MigrationRequestSerializer
from statecharts.api.migration import run as run_migration
from statecharts.api.operating import OutsideRequestTransactions, api_caller_context
from statecharts.api.pagination import PageNumberPagination
from statecharts.api.parsers import JSONParser
from statecharts.api.permissions import CHANGE, VIEW, ModelPermissions
from statecharts.api.renderers import SVGRenderer
from statecharts.api.tracing import TraceAnswerSerializer, TraceRequestSerializer
from statecharts.core.errors import StatechartError
from statecharts.core.model import Chart as CompiledChart
from statecharts.exceptions import InvalidInput, NeedsMigration, StepRefused, printable
from statecharts.models import Chart, Execution, ExecutionStatus
from statecharts.models.charts import source_hash
from statecharts.models.history import Disposition
from statecharts.operations.inspection import history_entries, inspect
from statecharts.policies import refusals

ERRORS = {
    400: OpenApiResponse(description="Invalid input: the reasons, by field."),
    404: OpenApiResponse(description="No such object."),
}
CONFLICT = OpenApiResponse(
    description="The execution is finished (the input was recorded as discarded), needs "
    "migration, is halted, or (a strict send: reason 'unhandled') no transition takes the "
    "event: recorded as refused, nothing kept."
)
IDEMPOTENT = {
    422: OpenApiResponse(
        description="The Idempotency-Key was used before for a request with other content: "
        "nothing was applied."
    ),
}
# The header a client names its request with, to retry it safely (the draft IETF standard's
# name); a replayed answer carries IDEMPOTENT_REPLAYED: true.
IDEMPOTENCY_KEY_HEADER = "Idempotency-Key"
IDEMPOTENT_REPLAYED = "Idempotent-Replayed"
# The headers every input takes (statecharts.policies.attribution,
# statecharts.policies.idempotency).
INPUT_HEADERS = [
    OpenApiParameter(
        IDEMPOTENCY_KEY_HEADER,
        str,
        OpenApiParameter.HEADER,
        description="Your name for this request: a retry with the same key applies nothing "
        "again and answers as the first did (Idempotent-Replayed: true); the same key with "
        "other content is a 422. At most 200 characters.",
    ),
    OpenApiParameter(
        "X-Caller-Context",
        str,
        OpenApiParameter.HEADER,
        description="A JSON object recorded with the input (under caller_context.given), "
        "e.g. a ticket or a trace id; at most 4096 bytes. X-Request-ID and traceparent are "
        "recorded too.",
    ),
]
FORBIDDEN_EVENT = OpenApiResponse(
    description="No permission to change executions, or STATECHARTS['EVENT_PERMISSIONS'] "
    "refuses this event to this user: 'reasons' lists why (nothing was recorded)."
)
FORBIDDEN_START = OpenApiResponse(
    description="No permission to add executions, or STATECHARTS['START_PERMISSIONS'] "
    "refuses this chart to this user: 'reasons' lists why (nothing was started)."
)
FORBIDDEN_ERASE = OpenApiResponse(
    description="No permission to erase executions (statecharts.erase_execution): nothing "
    "was erased."
)
FORBIDDEN_TRACE = OpenApiResponse(
    description="No permission to change executions (statecharts.change_execution)."
)
STILL_RUNNING = OpenApiResponse(
    description="Some of the executions may still step and cancel was not asked for (reason "
    "'refused'): nothing was erased."
)
FORBIDDEN_CANCEL = OpenApiResponse(
    description="No permission to change executions, or STATECHARTS['CANCEL_PERMISSIONS'] "
    "refuses this execution to this user: 'reasons' lists why (nothing was recorded)."
)
SVG = {
    200: OpenApiResponse(OpenApiTypes.BINARY, description="An SVG document (image/svg+xml)."),
    404: ERRORS[404],
    409: OpenApiResponse(description="The chart's stored source no longer compiles."),
    501: OpenApiResponse(description="The diagram renderer (statecharts.diagram) is missing."),
}


class NoInput(rest_serializers.Serializer[Any]):
    """An input with no fields (a cancel): the browsable API draws its POST as a button."""


class APIViewSet(viewsets.GenericViewSet):  # type: ignore[type-arg]
    """What every view of this API shares: model permissions, pages, filters, strict JSON."""

    permission_classes = [ModelPermissions]
    pagination_class = PageNumberPagination
    filter_backends = [DjangoFilterBackend]
    parser_classes = [JSONParser, FormParser, MultiPartParser]

    serializer_classes: dict[str, type[BaseSerializer[Any]]] = {}

    def get_serializer_class(self) -> type[BaseSerializer[Any]]:
        # By the action the route maps the request's method to, so that the forms DRF draws
        # for another method (the browsable API's POST form on a list page, OPTIONS) show the
        # serializer that method takes.
        action = self.action
        method = getattr(getattr(self, "request", None), "method", None)
        if method is not None:
            action = (getattr(self, "action_map", None) or {}).get(method.lower(), action)
        return self.serializer_classes.get(action or "", self.serializer_class)

    def handle_exception(self, exc: Exception) -> Response:
        # An error's detail may quote the request (a field's name, a dict key): made
        # printable before it is rendered (a lone surrogate cannot be UTF-8: never a 500).
        if isinstance(exc, APIException):
            exc.detail = _printable(exc.detail)
        return super().handle_exception(exc)

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        # An error from a view that renders SVG (a 404, a 403, a 406 for an Accept it cannot
        # meet) is still a DRF error body: render it as JSON, not as a broken image.
        if getattr(response, "exception", False) and all(
            issubclass(renderer, SVGRenderer) for renderer in self.renderer_classes
        ):
            request.accepted_renderer = JSONRenderer()
            request.accepted_media_type = JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)


def _printable(detail: Any) -> Any:
    """An error detail (strings, lists and dicts of them) with every string and key printable
    (``statecharts.exceptions.printable``); DRF's ``ErrorDetail`` codes kept."""
    if isinstance(detail, dict):
        return {printable(str(key)): _printable(value) for key, value in detail.items()}
    if isinstance(detail, list):
        return [_printable(item) for item in detail]
    if isinstance(detail, ErrorDetail):
        return ErrorDetail(printable(str(detail)), code=detail.code)
    if isinstance(detail, str):
        return printable(detail)
    return detail


def _render_svg(
    compiled: CompiledChart, active: Iterable[str] = (), invoking: Iterable[str] = ()
) -> str:
    """Draw a chart with ``statecharts.diagram``, imported when first asked for."""
    try:
        from statecharts.diagram import render_svg
    except ImportError as exc:
        # Only the renderer itself missing is "unavailable"; a broken renderer is a bug.
        if exc.name != "statecharts.diagram":
            raise
        raise DiagramUnavailable() from None
    svg: str = render_svg(compiled, active=tuple(active), invoking=tuple(invoking))
    return svg


def _caller(request: Request) -> tuple[dict[str, Any], str | None]:
    """The request's caller context (``statecharts.policies.attribution``) and its Idempotency-Key
    (checked by the stepper's gate with the rest of the request); a 400 naming the header
    when the caller context is bad."""
    try:
        context = api_caller_context(request)
    except InvalidInput as exc:
        raise _refused(exc) from None
    return context, request.headers.get(IDEMPOTENCY_KEY_HEADER)


def _refused(error: BaseException, **extra: Any) -> Exception:
    """The API's answer to a refusal (the refusal table's ``api`` column), or ``error``."""
    answer = refused(error, **extra)
    return error if answer is None else answer


def _compiled(chart: Chart) -> CompiledChart:
    try:
        return chart.compiled()
    except StatechartError as exc:
        raise Conflict(f"chart {chart.pk} cannot be compiled from its source: {exc}") from None


# ---- charts ------------------------------------------------------------------------------------


@extend_schema_view(
    list=extend_schema(summary="List charts"),
    retrieve=extend_schema(summary="A chart, with its SCXML source"),
)
class ChartViewSet(
    mixins.CreateModelMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, APIViewSet
):
    # The docstrings of these viewsets are the browsable API's page descriptions and the
    # schema's: plain text, no reStructuredText markup.
    """SCXML charts. A chart is identified by the sha256 of its source and never edited: load
    an edited document as a new chart (give it a version)."""

    queryset = Chart.objects.all()
    filterset_class = filters.ChartFilter

    serializer_class = serializers.ChartSerializer
    serializer_classes = {
        "create": serializers.ChartCreateSerializer,
        "retrieve": serializers.ChartDetailSerializer,
    }

    @extend_schema(
        summary="Load a chart from its SCXML source",
        request=serializers.ChartCreateSerializer,
        responses={
            201: serializers.ChartDetailSerializer,
            200: OpenApiResponse(
                serializers.ChartDetailSerializer,
                description="This source was already loaded: the chart stored with it.",
            ),
            400: OpenApiResponse(
                description="Invalid SCXML: every problem, as line:column: message, under source."
            ),
        },
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        existed = Chart.objects.filter(
            content_hash=source_hash(serializer.validated_data["source"])
        ).exists()
        chart = serializer.save()
        body = serializers.ChartDetailSerializer(chart, context=self.get_serializer_context())
        location = reverse(
            f"{serializers.NAMESPACE}:chart-detail", kwargs={"pk": chart.pk}, request=request
        )
        return Response(
            body.data,
            status=status.HTTP_200_OK if existed else status.HTTP_201_CREATED,
            headers={"Location": location},
        )

    @extend_schema(operation_id="charts_diagram", summary="The chart drawn as SVG", responses=SVG)
    def diagram(self, request: Request, pk: str | None = None) -> Response:
        chart = self.get_object()
        return Response(_render_svg(_compiled(chart)), content_type=SVGRenderer.media_type)


# ---- executions --------------------------------------------------------------------------------


# ?fields=: at most this many characters (a handful of names, comma-separated).
LIST_FIELDS_MAX_LENGTH = 200
LIST_FIELDS_PARAMETER = OpenApiParameter(
    "fields",
    str,
    OpenApiParameter.QUERY,
    description="Extra fields for each execution of the page, comma-separated: "
    "'available_events' (what the detail shows: the events that would enable a transition "
    "now, for the requesting user). Computed for the rows of the page only, at about one "
    "interpreter step of CPU per row; absent by default. An unknown name is a 400.",
    enum=[field.value for field in serializers.ListField],
)


@extend_schema_view(
    list=extend_schema(summary="List executions", parameters=[LIST_FIELDS_PARAMETER]),
    retrieve=extend_schema(
        summary="An execution: status, configuration, datamodel (and what apps add: timers)"
    ),
)
class ExecutionViewSet(
    # The stepper commits each step itself: never inside ATOMIC_REQUESTS' transaction.
    OutsideRequestTransactions,
    mixins.CreateModelMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    APIViewSet,
):
    """Executions: one durable run of a chart each. Every input (start, event, cancel) is one
    step of the stepper, one database transaction, recorded in the execution's history.
    Start one with a chart id or a chart name (its latest version). An operator may also
    migrate executions to another version of their chart, erase their personal data and
    trace their steps: the admin's actions on executions, each here too."""

    queryset = Execution.objects.all()
    filterset_class = filters.ExecutionFilter
    action_permissions = {
        "send": [CHANGE],
        "cancel": [CHANGE],
        "migrate": [CHANGE],
        "erase": ["%(app_label)s.erase_%(model_name)s"],
        "trace": [CHANGE],
        "history": [VIEW],
        "diagram": [VIEW],
    }

    def get_queryset(self) -> Any:
        queryset = super().get_queryset()
        if self.action == "list" and self.list_fields():
            # The extra fields read each row's chart (its compiled form is cached).
            queryset = queryset.select_related("chart")
        return queryset

    def get_serializer_context(self) -> dict[str, Any]:
        context = super().get_serializer_context()
        if self.action == "list":
            context[serializers.LIST_FIELDS] = self.list_fields()
        return context

    def list_fields(self) -> tuple[serializers.ListField, ...]:
        """The list's ``?fields=`` (repeated or comma-separated), checked: a 400 names an
        unknown one."""
        cached: tuple[serializers.ListField, ...] | None = getattr(self, "_list_fields", None)
        if cached is not None:
            return cached
        request = getattr(self, "request", None)
        given = request.query_params.getlist("fields") if request is not None else []
        if sum(len(value) for value in given) > LIST_FIELDS_MAX_LENGTH:
            raise ValidationError({"fields": [f"at most {LIST_FIELDS_MAX_LENGTH} characters"]})
        known = {field.value: field for field in serializers.ListField}
        asked: dict[serializers.ListField, None] = {}
        for value in given:
            for name in (part.strip() for part in value.split(",")):
                if not name:
                    continue
                if name not in known:
                    shown = name[:40].replace("\x00", "\\0")
                    raise ValidationError(
                        {
                            "fields": [
                                f"{shown!r} is not a field the list adds; one of: "
                                + ", ".join(sorted(known))
                            ]
                        }
                    )
                asked[known[name]] = None
        self._list_fields = tuple(asked)
        return self._list_fields

    serializer_class = serializers.ExecutionSerializer
    serializer_classes = {
        "create": serializers.ExecutionCreateSerializer,
        "retrieve": serializers.ExecutionDetailSerializer,
        "send": serializers.EventSerializer,
        "cancel": NoInput,
        "migrate": MigrationRequestSerializer,
        "erase": ErasureRequestSerializer,
        "trace": TraceRequestSerializer,
        "history": serializers.HistoryEntrySerializer,
    }

    @extend_schema(
        summary="Start an execution of a chart",
        request=serializers.ExecutionCreateSerializer,
        parameters=INPUT_HEADERS,
        responses={
            201: serializers.ExecutionDetailSerializer,
            200: OpenApiResponse(
                serializers.ExecutionDetailSerializer,
                description="The Idempotency-Key repeated an earlier start of this chart "
                "name: nothing was started; the execution it started.",
            ),
            400: ERRORS[400],
            403: FORBIDDEN_START,
            409: OpenApiResponse(description="The business key is in use for this chart."),
            **IDEMPOTENT,
        },
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        context, key = _caller(request)
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        attrs = serializer.validated_data
        start = stepper.StartRequest(
            chart=attrs["chart"],
            data=attrs.get("data"),
            business_key=attrs.get("business_key"),
            metadata=attrs.get("metadata") or {},
            caller_context=context,
            idempotency_key=key,
            subject=attrs.get("subject"),
            user=request.user,
            declared_only=True,
        )
        try:
            result = stepper.submit(start)
        except Exception as exc:  # the refusal table says what each refusal answers
            raise _refused(exc) from None
        execution = result.execution
        body = serializers.ExecutionDetailSerializer(
            execution, context=self.get_serializer_context()
        )
        location = reverse(
            f"{serializers.NAMESPACE}:execution-detail",
            kwargs={"pk": execution.pk},
            request=request,
        )
        headers = {"Location": location}
        if result.repeated:
            headers[IDEMPOTENT_REPLAYED] = "true"
        answer = status.HTTP_200_OK if result.repeated else status.HTTP_201_CREATED
        return Response(body.data, status=answer, headers=headers)

    @extend_schema(
        summary="Send an event",
        request=serializers.EventSerializer,
        parameters=INPUT_HEADERS,
        responses={
            200: serializers.StepResultSerializer,
            **ERRORS,
            403: FORBIDDEN_EVENT,
            409: CONFLICT,
            **IDEMPOTENT,
        },
    )
    @extend_schema(methods=["GET"], exclude=True)  # the browsable API's page, not an operation
    @action(detail=True, methods=["get", "post"])
    def send(self, request: Request, pk: str | None = None) -> Response:
        """Send an event to this execution: POST ``{"name": EVENT, "data": ANY}`` (data
        optional). The event is applied in one step of the stepper and recorded in the
        execution's history; the answer says whether it was applied and where the execution
        stands. A GET describes this (the browsable API shows its form under it)."""
        execution = self.get_object()
        if request.method == "GET":
            return self._describe(request, execution, "send")
        context, key = _caller(request)
        event = serializers.EventSerializer(data=request.data)
        event.is_valid(raise_exception=True)
        send = stepper.EventRequest(
            execution=execution,
            name=event.validated_data["name"],
            data=event.validated_data["data"],
            user=request.user,
            caller_context=context,
            idempotency_key=key,
            strict=event.validated_data["strict"],
        )
        return self._step(request, send)

    @extend_schema(
        summary="Cancel an execution (its onexit handlers run)",
        request=None,
        parameters=INPUT_HEADERS,
        responses={
            200: serializers.StepResultSerializer,
            400: ERRORS[400],
            403: FORBIDDEN_CANCEL,
            404: ERRORS[404],
            409: CONFLICT,
            **IDEMPOTENT,
        },
    )
    @extend_schema(methods=["GET"], exclude=True)  # the browsable API's page, not an operation
    @action(detail=True, methods=["get", "post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        """Cancel this execution: POST with no body. Its onexit handlers run and it ends as
        cancelled, in one step recorded in its history. A GET describes this (the browsable
        API shows its button under it)."""
        execution = self.get_object()
        if request.method == "GET":
            return self._describe(request, execution, "cancel")
        context, key = _caller(request)
        cancel = stepper.CancelRequest(
            execution=execution, caller_context=context, idempotency_key=key, user=request.user
        )
        return self._step(request, cancel)

    def _describe(self, request: Request, execution: Execution, name: str) -> Response:
        """What a GET of the send or cancel address answers: which execution, where it
        stands and how to act on it (the POST does it)."""
        view = inspect(execution)
        url = reverse(
            f"{serializers.NAMESPACE}:execution-detail",
            kwargs={"pk": execution.pk},
            request=request,
        )
        how = {
            "send": 'POST {"name": EVENT, "data": ANY} (data optional) to this address',
            "cancel": "POST to this address, with no body",
        }[name]
        return Response({"execution": url, "title": view.title, "where": view.where, "how": how})

    @extend_schema(
        summary="Migrate executions to another version of their chart (or a dry run)",
        request=MigrationRequestSerializer,
        responses={200: OpenApiTypes.OBJECT, 400: ERRORS[400]},
    )
    @action(detail=False, methods=["post"], filter_backends=[])
    def migrate(self, request: Request) -> Response:
        """Each execution is migrated in its own transaction (docs/versions-and-migration.md);
        the answer has the counts and one result per execution (its verdict and reason)."""
        body = MigrationRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return Response(run_migration(body.validated_data))

    @extend_schema(
        summary="Erase the personal data of executions (or a dry run)",
        request=ErasureRequestSerializer,
        responses={
            200: ErasureAnswerSerializer,
            400: ERRORS[400],
            403: FORBIDDEN_ERASE,
            409: STILL_RUNNING,
        },
    )
    @action(detail=False, methods=["post"], filter_backends=[])
    def erase(self, request: Request) -> Response:
        """Erase the personal data of executions, given by id or by business key, and of the
        children they invoked: their datamodel, donedata, metadata and business key, and the
        data of every input, message, timer and invocation of theirs. It cannot be undone;
        each gets an 'erased' entry in its history with your username and the reason.
        Executions still running are refused unless cancel is true. dry_run says what would
        be erased."""
        body = ErasureRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        context = api_caller_context(request)
        return Response(
            run_erasure(
                body.validated_data,
                requested_by=request.user.get_username(),
                caller_context=context,
            )
        )

    @extend_schema(
        summary="Trace an execution's next steps, or stop (on: false)",
        request=TraceRequestSerializer,
        responses={
            200: TraceAnswerSerializer,
            400: ERRORS[400],
            403: FORBIDDEN_TRACE,
            404: ERRORS[404],
        },
    )
    @action(detail=True, methods=["post"], filter_backends=[])
    def trace(self, request: Request, pk: str | None = None) -> Response:
        """Keep the core's trace of this execution's next steps in its history (the
        transitions each microstep selected, the states exited and entered, the guards
        evaluated, the events raised), or stop with on: false. Taken under the execution's
        lock; it changes what is recorded, never what the chart does."""
        execution = self.get_object()
        body = TraceRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        on = body.validated_data["on"]
        try:
            changed = stepper.trace(execution.pk, on)
        except Exception as exc:  # the refusal table says what each refusal answers
            raise _refused(exc) from None
        return Response({"execution": execution.pk, "tracing": on, "changed": changed})

    @extend_schema(
        summary="The execution's input history (oldest first)",
        responses={200: serializers.HistoryEntrySerializer(many=True), 404: ERRORS[404]},
    )
    @action(detail=True, methods=["get"], filter_backends=[])
    def history(self, request: Request, pk: str | None = None) -> Response:
        execution = self.get_object()  # 404 for an unknown execution, not an empty page
        page = self.paginate_queryset(history_entries(execution))
        serializer = self.get_serializer(page, many=True)
        return self.get_paginated_response(serializer.data)

    @extend_schema(
        operation_id="executions_diagram",
        summary="The chart drawn as SVG, the active states highlighted",
        responses=SVG,
    )
    def diagram(self, request: Request, pk: str | None = None) -> Response:
        execution = self.get_object()
        view = inspect(execution)
        svg = _render_svg(_compiled(execution.chart), view.active_states, view.invoking_states)
        return Response(svg, content_type=SVGRenderer.media_type)

    def _step(self, request: Request, step: stepper.Request) -> Response:
        try:
            result = stepper.submit(step)
        except StepRefused as exc:  # recorded as refused, never a 500; the status it has now
            if isinstance(exc, NeedsMigration):
                now = ExecutionStatus.NEEDS_MIGRATION
            else:
                rows = Execution.objects.filter(pk=self.kwargs.get("pk")).values_list("status")
                now = next(iter(rows), ("",))[0]
            raise _refused(exc, status=now, disposition=Disposition.REFUSED) from None
        except Execution.DoesNotExist:  # deleted since get_object()
            raise NotFound() from None
        except Exception as exc:  # the refusal table says what each refusal answers
            raise _refused(exc) from None
        execution = result.execution
        if result.repeated and result.disposition == Disposition.REFUSED:
            # A replay answers as the first request was answered: a refusal, again.
            raise Conflict(
                {
                    "detail": f"execution {execution.pk} refused this input (history entry "
                    f"{result.entry.seq}): {result.entry.reason}",
                    "disposition": result.disposition,
                    "status": execution.status,
                }
            )
        if result.disposition == Disposition.DISCARDED:
            finished = refusals.discarded(
                f"execution {execution.pk} is {execution.status}: "
                f"the input was discarded (history entry {result.entry.seq}).",
                execution.status,
            )
            raise Refused(finished, disposition=result.disposition)
        body = serializers.StepResultSerializer(
            {
                "execution": execution.pk,
                "url": reverse(
                    f"{serializers.NAMESPACE}:execution-detail",
                    kwargs={"pk": execution.pk},
                    request=request,
                ),
                "seq": result.entry.seq,
                "disposition": result.disposition,
                "status": execution.status,
                "configuration": execution.configuration,
                "donedata": execution.donedata,
                "handled": result.handled if isinstance(step, stepper.EventRequest) else None,
                "repeated": result.repeated,
            }
        )
        return Response(body.data, headers={IDEMPOTENT_REPLAYED: "true"} if result.repeated else {})
