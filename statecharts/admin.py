"""The admin: charts (add by pasting SCXML; read-only afterwards), executions (read-only, with
their diagram, datamodel, history, the panels other apps contribute, and actions that go
through the stepper), and the machine-owned rows (history, outbox) read-only.

No model form ever changes an execution: sending an event, cancelling and starting go through
``statecharts.stepper``, exactly like the API and the management command. What an execution
page shows is the read model (``statecharts.inspection``), the one the API and
``statechart show`` display; other apps add panels to it through ``statecharts.extensions``
(the timers app adds its timers panel), so this module imports none of them.
"""

from __future__ import annotations

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

from statecharts import extensions, stepper
from statecharts.core import StatechartError
from statecharts.core.model import Chart as CompiledChart
from statecharts.forms import ChartUploadForm, SendEventForm, StartExecutionForm
from statecharts.inspection import (
    Unreadable,
    chart_hints,
    compiled_chart_of,
    history_row,
    inspect,
    json_text,
    where,
)
from statecharts.lookups import version_key
from statecharts.models import Chart, Execution, HistoryEntry, OutboxMessage


def diagram(
    compiled: CompiledChart | Unreadable,
    active: tuple[str, ...] = (),
    invoking: tuple[str, ...] = (),
) -> SafeString:
    """The chart's SVG diagram (the renderer escapes every text it draws)."""
    from statecharts.diagram import render_svg

    if isinstance(compiled, Unreadable):
        return format_html("<p class='errornote'>no diagram: {}</p>", compiled.reason)
    return mark_safe(render_svg(compiled, active=active, invoking=invoking))


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
    list_display = ["label", "version_label", "short_hash", "execution_count", "created"]
    list_display_links = ["label"]
    search_fields = ["name", "version", "content_hash"]
    list_filter = ["name"]
    form = ChartUploadForm

    def get_queryset(self, request: HttpRequest) -> QuerySet[Chart]:
        return super().get_queryset(request).annotate(execution_total=Count("executions"))

    def get_list_display(self, request: HttpRequest) -> list[str]:
        # A version column where no chart has a version is a column of dashes.
        if Chart.objects.exclude(version="").exists():
            return list(self.list_display)
        return [name for name in self.list_display if name != "version_label"]

    @admin.display(description="chart", ordering="name")
    def label(self, chart: Chart) -> str:
        return chart.name or f"(unnamed) {chart.content_hash[:12]}"

    @admin.display(description="version", ordering="version")
    def version_label(self, chart: Chart) -> str:
        return chart.version or "(none)"

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
        # The source is shown numbered below; a version left blank is not a field of dashes.
        return ["name", *(["version"] if obj.version else []), "content_hash", "created"]

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
        compiled = compiled_chart_of(chart)
        if isinstance(compiled, Unreadable):
            warnings, hints = [compiled.reason], None
        else:
            warnings, hints = [str(w) for w in compiled.warnings], chart_hints(compiled)
        counts = dict(
            chart.executions.values_list("status")
            .annotate(n=Count("id"))
            .values_list("status", "n")
        )
        context = {
            "subtitle": str(chart),
            "diagram": diagram(compiled),
            "numbered_source": [(i, line) for i, line in enumerate(lines, 1)],
            "warnings": warnings,
            "status_counts": sorted(counts.items()),
            "start_form": StartExecutionForm(hints=hints),
            "can_start": request.user.has_perm("statecharts.add_execution"),
            "other_versions": self._other_versions(chart),
        }
        return super().change_view(
            request, object_id, form_url, {**context, **(extra_context or {})}
        )

    @staticmethod
    def _other_versions(chart: Chart) -> list[Chart]:
        """The other charts with this name, latest version first."""
        if not chart.name:
            return []
        others = list(Chart.objects.filter(name=chart.name).exclude(pk=chart.pk))
        return sorted(others, key=lambda c: (version_key(c.version), c.pk), reverse=True)

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
        view = inspect(execution)
        messages.success(request, f"Started {view.title} ({view.where})")
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
        "in_states",
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

    @admin.display(description="in states")
    def in_states(self, execution: Execution) -> str:
        configuration = execution.configuration
        return ", ".join(configuration) if isinstance(configuration, list) else ""

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
        view = inspect(execution)  # what the API and `statechart show` display too
        hints = None if isinstance(view.compiled, Unreadable) else chart_hints(view.compiled)
        events = hints.events if hints is not None else ()
        accepted = hints.accepted_in(view.active_states) if hints is not None else ()
        panels = [
            (panel, view.sections.get(panel.section, Unreadable("the section was not read")))
            for panel in extensions.ordered_panels()
        ]
        context = {
            "view": view,
            "subtitle": view.title,
            "diagram": diagram(view.compiled, view.active_states, view.invoking_states),
            "datamodel_text": (
                None
                if isinstance(view.datamodel, Unreadable)
                else json_text(view.datamodel, indent=2)
            ),
            "donedata_text": json_text(view.donedata),
            "history_page": view.history_page(request.GET.get("history", 1)),
            "panels": panels,
            "outbox": execution.outbox.order_by("-id")[:50],
            "send_form": SendEventForm(events=events, accepted=accepted),
            "accepted_events": accepted,
            "event_hints": {hint.name: hint.data_example for hint in events},
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
        # "Sent ..." first: the admin capitalises a message's first letter, and an event
        # name must read as it is spelled.
        messages.add_message(
            request,
            level,
            f"Sent {form.cleaned_data['name']}: {result.disposition} "
            f"({where(execution.status, execution.configuration)})",
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
        execution = result.execution
        messages.success(
            request,
            f"Cancel: {result.disposition} ({where(execution.status, execution.configuration)})",
        )
        return self._back(execution_id)


@admin.register(HistoryEntry)
class HistoryEntryAdmin(ReadOnlyAdmin):
    list_display = ["execution", "seq", "summary", "disposition", "status_after", "created"]
    list_filter = ["disposition", "status_after"]
    search_fields = ["execution__session_id", "execution__business_key"]
    list_select_related = ["execution"]

    @admin.display(description="input")
    def summary(self, entry: HistoryEntry) -> str:
        return f"#{entry.seq} {history_row(entry).input}"  # never fails on a damaged row


@admin.register(OutboxMessage)
class OutboxMessageAdmin(ReadOnlyAdmin):
    list_display = ["id", "sender", "target_session_id", "event_name", "status", "created"]
    list_filter = ["status"]
    search_fields = ["target_session_id", "sender__session_id"]

    @admin.display(description="event")
    def event_name(self, message: OutboxMessage) -> str:
        return str(message.event.get("name", ""))
