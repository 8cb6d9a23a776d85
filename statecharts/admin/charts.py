"""Charts in the admin: added by pasting SCXML (checked by the core, every problem listed),
read-only afterwards (a chart's source is its identity: load a new version instead), shown
with their numbered source, their diagram and their other versions; an execution is started
from a chart's page, through the stepper."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db.models import Count, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from statecharts import stepper
from statecharts.admin.bases import TextOnlyQueries
from statecharts.admin.forms import ChartUploadForm, StartExecutionForm
from statecharts.admin.steps import caller_context, report_form_errors, report_refusal
from statecharts.core.model import Chart as CompiledChart
from statecharts.models import Chart
from statecharts.operations.inspection import Unreadable, chart_hints, compiled_chart_of, inspect
from statecharts.policies import authorization
from statecharts.policies.lookups import version_key
from statecharts.runtime import stored_warnings


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



@admin.register(Chart)
class ChartAdmin(TextOnlyQueries):
    list_display = ["label", "version_label", "short_hash", "execution_count", "created"]
    list_display_links = ["label"]
    search_fields = ["name", "version", "content_hash"]
    list_filter = ["name"]
    form = ChartUploadForm

    def get_queryset(self, request: HttpRequest) -> QuerySet[Chart]:
        return super().get_queryset(request).annotate(execution_total=Count("executions"))

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> Any:
        form = super().get_form(request, obj, change, **kwargs)
        form.may_add_version = request.user.has_perm("statecharts.add_chart_version")
        return form

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
            return ["source", "name", "version", "new_version"]
        # The source is shown numbered below; a version left blank is not a field of dashes.
        return ["name", *(["version"] if obj.version else []), "content_hash", "created"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return ["content_hash", "created"] if obj is not None else []

    def save_model(self, request: HttpRequest, obj: Chart, form: Any, change: bool) -> None:
        # The same source twice is the same chart: load() returns the stored one.
        stored = Chart.objects.load(
            obj.source,
            name=obj.name,
            version=obj.version,
            new_version=bool(form.cleaned_data.get("new_version")) and form.may_add_version,
        )
        obj.pk, obj.created, obj.content_hash = stored.pk, stored.created, stored.content_hash
        obj.name, obj.version = stored.name, stored.version
        for problem in stored.load_warnings:  # syntax errors in its code, a stored datamodel
            messages.warning(request, f"line {problem.line}:{problem.column}: {problem.message}")

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
        chart = self.get_object(request, unquote(object_id))
        if chart is None:  # no such chart, or an id that is not one: the admin's own answer
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)
        lines = chart.source.splitlines()
        compiled = compiled_chart_of(chart)
        if isinstance(compiled, Unreadable):
            warnings, hints = [compiled.reason], None
        else:
            warnings, hints = [str(w) for w in stored_warnings(chart)], chart_hints(compiled)
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
            # statecharts.add_execution and START_PERMISSIONS (the start itself checks again)
            "can_start": authorization.may_start(request.user, chart),
            "other_versions": self._other_versions(chart),
            "latest_version": Chart.objects.latest_version(chart.name) if chart.name else None,
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
        compiled = compiled_chart_of(chart)
        hints = None if isinstance(compiled, Unreadable) else chart_hints(compiled)
        form = StartExecutionForm(request.POST, hints=hints)
        back = reverse("admin:statecharts_chart_change", args=[chart.pk])
        if not form.is_valid():
            report_form_errors(request, form)
            return HttpResponseRedirect(back)
        try:
            start = stepper.StartRequest(
                chart=chart,
                data=form.cleaned_data["data"],
                business_key=form.cleaned_data["business_key"] or None,
                caller_context=caller_context(request),
                idempotency_key=form.cleaned_data["idempotency_token"],
                user=request.user,
                declared_only=True,
            )
            result = stepper.submit(start)
        except Exception as exc:  # the refusal table says what each refusal answers
            report_refusal(request, exc, "Not started")
            return HttpResponseRedirect(back)
        execution = result.execution
        view = inspect(execution)
        if result.repeated:
            messages.info(request, f"This form was already posted: {view.title} ({view.where})")
        else:
            messages.success(request, f"Started {view.title} ({view.where})")
        return HttpResponseRedirect(
            reverse("admin:statecharts_execution_change", args=[execution.pk])
        )

