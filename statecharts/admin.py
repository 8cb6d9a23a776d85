"""The admin: charts (add by pasting SCXML; read-only afterwards), executions (read-only, with
their diagram, datamodel, history, timers, and actions that go through the stepper), and the
machine-owned rows (history, outbox) read-only.

No model form ever changes an execution: sending an event, cancelling and starting go through
``statecharts.stepper``, exactly like the API and the management command.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count, QuerySet
from django.forms import Form
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_POST

from statecharts import stepper
from statecharts.core import StatechartError
from statecharts.core.datamodel import plain
from statecharts.core.position import PositionError, decode
from statecharts.forms import ChartUploadForm, SendEventForm, StartExecutionForm
from statecharts.models import Chart, Execution, HistoryEntry, OutboxMessage


def diagram(chart: Chart, active: list[str] | tuple[str, ...] = ()) -> SafeString:
    """The chart's SVG diagram (the renderer escapes every text it draws)."""
    from statecharts.diagram import render_svg

    try:
        compiled = chart.compiled()
    except (StatechartError, PositionError) as exc:
        return format_html("<p class='errornote'>no diagram: {}</p>", exc)
    return mark_safe(render_svg(compiled, active=tuple(active)))


def report_form_errors(request: HttpRequest, form: Form) -> None:
    """An action's form lives on another page: its errors come back as messages."""
    for field, errors in form.errors.items():
        messages.error(request, f"{field}: {' '.join(errors)}")


class ReadOnlyAdmin(admin.ModelAdmin):
    """Machine-owned rows: viewable, never edited or deleted by hand."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


# ---- charts ----------------------------------------------------------------------------------


@admin.register(Chart)
class ChartAdmin(admin.ModelAdmin):
    list_display = ["__str__", "name", "version", "short_hash", "execution_count", "created"]
    search_fields = ["name", "version", "content_hash"]
    list_filter = ["name"]
    form = ChartUploadForm

    def get_queryset(self, request: HttpRequest) -> QuerySet[Chart]:
        return super().get_queryset(request).annotate(execution_total=Count("executions"))

    @admin.display(description="sha256")
    def short_hash(self, chart: Chart) -> str:
        return chart.content_hash[:12]

    @admin.display(description="executions", ordering="execution_total")
    def execution_count(self, chart: Chart) -> int:
        return getattr(chart, "execution_total", chart.executions.count())

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a chart's source is its identity: load a new version instead

    def get_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        if obj is None:
            return ["source", "name", "version"]
        return ["name", "version", "content_hash", "created"]  # the source is shown numbered

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return ["content_hash", "created"] if obj is not None else []

    def save_model(self, request: HttpRequest, obj: Chart, form: Any, change: bool) -> None:
        # The same source twice is the same chart: load() returns the stored one.
        stored = Chart.objects.load(obj.source, name=obj.name, version=obj.version)
        obj.pk, obj.created, obj.content_hash = stored.pk, stored.created, stored.content_hash
        obj.name, obj.version = stored.name, stored.version

    def get_urls(self) -> list[URLPattern]:
        urls = [
            path(
                "<int:chart_id>/start/",
                self.admin_site.admin_view(self.start_view),
                name="statecharts_chart_start",
            )
        ]
        return urls + super().get_urls()

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        chart = get_object_or_404(Chart, pk=object_id)
        lines = chart.source.splitlines()
        try:
            warnings = [str(w) for w in chart.compiled().warnings]
        except (StatechartError, PositionError) as exc:
            warnings = [str(exc)]
        counts = dict(
            chart.executions.values_list("status")
            .annotate(n=Count("id"))
            .values_list("status", "n")
        )
        context = {
            "diagram": diagram(chart),
            "numbered_source": [(i, line) for i, line in enumerate(lines, 1)],
            "warnings": warnings,
            "status_counts": sorted(counts.items()),
            "start_form": StartExecutionForm(),
            "can_start": request.user.has_perm("statecharts.add_execution"),
        }
        return super().change_view(
            request, object_id, form_url, {**context, **(extra_context or {})}
        )

    def start_view(self, request: HttpRequest, chart_id: int) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseRedirect(reverse("admin:statecharts_chart_change", args=[chart_id]))
        if not request.user.has_perm("statecharts.add_execution"):
            raise PermissionDenied
        chart = get_object_or_404(Chart, pk=chart_id)
        form = StartExecutionForm(request.POST)
        back = reverse("admin:statecharts_chart_change", args=[chart.pk])
        if not form.is_valid():
            report_form_errors(request, form)
            return HttpResponseRedirect(back)
        try:
            execution = stepper.start(
                chart,
                data=form.cleaned_data["data"],
                business_key=form.cleaned_data["business_key"] or None,
            )
        except StatechartError as exc:
            messages.error(request, str(exc))
            return HttpResponseRedirect(back)
        messages.success(request, f"started execution {execution.pk}: {execution.status}")
        return HttpResponseRedirect(
            reverse("admin:statecharts_execution_change", args=[execution.pk])
        )


# ---- executions ------------------------------------------------------------------------------


@admin.register(Execution)
class ExecutionAdmin(ReadOnlyAdmin):
    list_display = [
        "id",
        "session_id",
        "chart",
        "business_key",
        "status",
        "where",
        "steps",
        "updated",
    ]
    list_filter = ["status", "chart", "created", "updated"]
    search_fields = ["=id", "session_id", "business_key"]
    date_hierarchy = "created"
    list_select_related = ["chart"]
    exclude = ["position"]
    readonly_fields = [
        "chart",
        "status",
        "session_id",
        "business_key",
        "configuration",
        "steps",
        "donedata",
        "outcome",
        "failure_reason",
        "metadata",
        "created",
        "updated",
        "ended",
    ]

    @admin.display(description="configuration")
    def where(self, execution: Execution) -> str:
        return ", ".join(execution.configuration)

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view
        urls = [
            path(
                "<int:execution_id>/send/",
                view(require_POST(self.send_view)),
                name="statecharts_execution_send",
            ),
            path(
                "<int:execution_id>/cancel/",
                view(require_POST(self.cancel_view)),
                name="statecharts_execution_cancel",
            ),
        ]
        return urls + super().get_urls()

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        execution = get_object_or_404(Execution.objects.select_related("chart"), pk=object_id)
        try:
            datamodel = plain(decode(bytes(execution.position)).state.datamodel)
            datamodel_text = json.dumps(datamodel, indent=2, sort_keys=True, ensure_ascii=False)
        except PositionError as exc:
            datamodel_text = f"(the position cannot be read: {exc})"
        from timers.models import Timer

        timers = Timer.objects.for_execution(execution).order_by("-status", "due", "id")
        context = {
            "diagram": diagram(execution.chart, execution.configuration),
            "datamodel_text": datamodel_text,
            "history": execution.history.order_by("-seq")[:200],
            "pending_timers": [t for t in timers if t.status == "pending"],
            "past_timers": [t for t in timers if t.status != "pending"][:100],
            "outbox": execution.outbox.order_by("-id")[:50],
            "send_form": SendEventForm(),
            "can_act": request.user.has_perm("statecharts.change_execution")
            and execution.status == "active",
        }
        return super().change_view(
            request, object_id, form_url, {**context, **(extra_context or {})}
        )

    def _back(self, execution_id: int) -> HttpResponseRedirect:
        return HttpResponseRedirect(
            reverse("admin:statecharts_execution_change", args=[execution_id])
        )

    def send_view(self, request: HttpRequest, execution_id: int) -> HttpResponse:
        if not request.user.has_perm("statecharts.change_execution"):
            raise PermissionDenied
        get_object_or_404(Execution, pk=execution_id)
        form = SendEventForm(request.POST)
        if not form.is_valid():
            report_form_errors(request, form)
            return self._back(execution_id)
        try:
            result = stepper.send(
                execution_id, form.cleaned_data["name"], form.cleaned_data["data"]
            )
        except StatechartError as exc:
            messages.error(request, str(exc))
            return self._back(execution_id)
        execution = result.execution
        level = messages.SUCCESS if result.applied else messages.WARNING
        messages.add_message(
            request,
            level,
            f"{form.cleaned_data['name']}: {result.disposition}; now {execution.status} in "
            f"{', '.join(execution.configuration) or '-'}",
        )
        return self._back(execution_id)

    def cancel_view(self, request: HttpRequest, execution_id: int) -> HttpResponse:
        if not request.user.has_perm("statecharts.change_execution"):
            raise PermissionDenied
        get_object_or_404(Execution, pk=execution_id)
        try:
            result = stepper.cancel(execution_id)
        except StatechartError as exc:
            messages.error(request, str(exc))
            return self._back(execution_id)
        messages.success(request, f"cancel: {result.disposition}; now {result.execution.status}")
        return self._back(execution_id)


@admin.register(HistoryEntry)
class HistoryEntryAdmin(ReadOnlyAdmin):
    list_display = ["execution", "seq", "summary", "disposition", "status_after", "created"]
    list_filter = ["disposition", "status_after"]
    search_fields = ["execution__session_id", "execution__business_key"]
    list_select_related = ["execution"]

    @admin.display(description="input")
    def summary(self, entry: HistoryEntry) -> str:
        return str(entry)


@admin.register(OutboxMessage)
class OutboxMessageAdmin(ReadOnlyAdmin):
    list_display = ["id", "sender", "target_session_id", "event_name", "status", "created"]
    list_filter = ["status"]
    search_fields = ["target_session_id", "sender__session_id"]

    @admin.display(description="event")
    def event_name(self, message: OutboxMessage) -> str:
        return str(message.event.get("name", ""))
