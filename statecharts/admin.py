"""The admin: charts (add by pasting SCXML; read-only afterwards), executions (read-only, with
their diagram, datamodel, history, the panels other apps contribute, and actions that go
through the stepper), and the machine-owned rows (history, outbox) read-only.

No model form ever changes an execution: sending an event, cancelling and starting go through
``statecharts.stepper``, exactly like the API and the management command. What an execution
page shows is the read model (``statecharts.operations.inspection``), the one the API and
``statechart show`` display; other apps add panels to it through ``statecharts.extensions``
(the timers app adds its timers panel), so this module imports none of them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Exists, OuterRef, QuerySet
from django.forms import Form
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_POST

from statecharts import extensions, stepper
from statecharts.core import StatechartError
from statecharts.core.model import Chart as CompiledChart
from statecharts.forms import CancelForm, ChartUploadForm, SendEventForm, StartExecutionForm
from statecharts.models import Chart, Execution, HistoryEntry, OutboxMessage
from statecharts.models.outbox import OutboxStatus
from statecharts.operations import retention
from statecharts.operations.chart_migration import (
    MigrationPlan,
    PlanError,
    Verdict,
    dry_run,
    migrate,
)
from statecharts.operations.chart_migration.applying import registered_transforms
from statecharts.operations.inspection import (
    Unreadable,
    chart_hints,
    compiled_chart_of,
    history_row,
    inspect,
    json_text,
    shown_input,
    title_of,
    where,
)
from statecharts.policies import attribution, authorization, refusals
from statecharts.policies.availability import AvailableEvent, Unavailable, available_events
from statecharts.policies.lookups import version_key
from statecharts.runtime import stored_warnings
from statecharts.subjects_admin import subject_link


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


def caller_context(request: HttpRequest) -> dict[str, Any]:
    """Who acts in the admin (``statecharts.policies.attribution``): the user, the request's id and
    trace context, and an X-Caller-Context header if a proxy sends one. Raises
    ``InvalidInput`` for a bad header (reported as a message; nothing is applied)."""
    user = getattr(request, "user", None)
    door = attribution.Door.ADMIN
    asked = stepper.CallerContextRequest(door=door, headers=request.headers, user=user)
    context: dict[str, Any] = stepper.admit(asked)
    return context


def report_refusal(request: HttpRequest, error: BaseException, doing: str) -> None:
    """A refusal as the admin answers it (``statecharts.policies.refusals``): the form's errors, one
    message per field, each problem with its path; or one line (``"Not sent: ..."`` when the
    user may not). Re-raises what no row names (a bug: a 500, logged)."""
    refused = refusals.refusal(error)
    if refused is None:
        raise error
    if refused.problems:
        for problems in refused.by_field().values():
            messages.error(request, "; ".join(problems))
        return
    not_permitted = refused.reason is refusals.Reason.NOT_PERMITTED
    messages.error(request, refused.message(doing if not_permitted else None))


def report_form_errors(request: HttpRequest, form: Form) -> None:
    """An action's form lives on another page: its errors come back as messages."""
    for field, errors in form.errors.items():
        messages.error(request, f"{field}: {' '.join(errors)}")


# ---- bulk actions with a confirmation page ---------------------------------------------------

# Rows one bulk action takes at most: each is a step (or a short transaction) of its own, done
# within the request.
MAX_BULK_ROWS = 500


@dataclass(frozen=True, slots=True)
class ConfirmRow:
    label: str
    note: str = ""


def confirmed(request: HttpRequest) -> bool:
    """Whether this is the confirmation page's own post (not the changelist's first one)."""
    return request.POST.get("post") == "yes"


def confirm_action(
    model_admin: admin.ModelAdmin,  # type: ignore[type-arg]
    request: HttpRequest,
    *,
    action: str,
    title: str,
    summary: str,
    rows: Sequence[ConfirmRow],
    pks: Sequence[int],
    button: str,
    form: Form | None = None,
    warning: str = "",
) -> TemplateResponse:
    """The confirmation page of the bulk action ``action``: nothing is done until it is posted
    back (with ``post=yes``, the same selected ``pks`` and the form's fields)."""
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.model._meta,
        "title": title,
        "subtitle": None,
        "summary": summary,
        "warning": warning,
        "rows": rows,
        "pks": pks,
        "actionable": bool(pks),
        "action": action,
        "button": button,
        "form": form,
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        "media": model_admin.media,
    }
    request.current_app = model_admin.admin_site.name
    return TemplateResponse(request, "admin/statecharts/confirm_action.html", context)


def too_many(model_admin: admin.ModelAdmin, request: HttpRequest, rows: Sequence[Any]) -> bool:  # type: ignore[type-arg]
    if len(rows) <= MAX_BULK_ROWS:
        return False
    model_admin.message_user(
        request,
        f"Select at most {MAX_BULK_ROWS} rows for this action (each is done on its own): "
        "narrow the list with its filters.",
        messages.ERROR,
    )
    return True


class EraseForm(forms.Form):
    reason = forms.CharField(
        max_length=1000,
        required=False,
        label="Reason",
        help_text="Recorded in each execution's history (e.g. the request's reference).",
    )
    cancel_running = forms.BooleanField(
        required=False,
        label="Cancel those still running first",
        help_text="Each is cancelled in its own step (its onexit handlers run), then erased.",
    )


class MigrateForm(forms.Form):
    """The admin's migration of selected executions (statecharts.operations.chart_migration): a
    target
    version of their chart, renames, a registered transform; a preview (dry run) until
    "Preview only" is unchecked."""

    target = forms.ModelChoiceField(queryset=Chart.objects.none(), label="Target version")
    renames = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 40}),
        label="Renamed states",
        help_text="One OLD=NEW per line, for states with another id in the target (every "
        "other state keeps its id).",
    )
    transform = forms.ChoiceField(required=False, label="Datamodel transform")
    preview = forms.BooleanField(
        required=False,
        initial=True,
        label="Preview only",
        help_text="Uncheck it to migrate (each execution in a transaction of its own).",
    )

    def __init__(self, *args: Any, name: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        versions = Chart.objects.filter(origin="loaded", name=name)
        target = self.fields["target"]
        assert isinstance(target, forms.ModelChoiceField)
        target.queryset = versions
        target.initial = Chart.objects.latest_version(name)
        transform = self.fields["transform"]
        assert isinstance(transform, forms.ChoiceField)
        transform.choices = [("", "none")] + [(n, n) for n in sorted(registered_transforms())]
        self.plan: MigrationPlan | None = None

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        renames: dict[str, str] = {}
        for line in (cleaned.get("renames") or "").splitlines():
            if not line.strip():
                continue
            old, sep, new = line.partition("=")
            if not sep or not old.strip() or not new.strip():
                self.add_error("renames", f"{line.strip()!r} is not OLD=NEW")
                return cleaned
            renames[old.strip()] = new.strip()
        if cleaned.get("target") is not None:
            try:
                self.plan = MigrationPlan.make(
                    cleaned["target"], renames, cleaned.get("transform") or None
                )
            except PlanError as exc:
                self.add_error(None, str(exc))
        return cleaned


class TextOnlyQueries(admin.ModelAdmin):
    """A changelist whose search or filters hold a NUL character drops them, with a message:
    no text column of PostgreSQL can hold one, and Django's admin would send it to the
    database (a server error) instead of answering the person who typed it.

    Every view of these admins is outside ``ATOMIC_REQUESTS``' per-request transaction: their
    forms and actions step executions, and the stepper commits each step itself
    (``transaction.atomic(durable=True)``), which cannot nest in another transaction."""

    @property
    def urls(self) -> list[URLPattern]:
        patterns = self.get_urls()
        for pattern in patterns:
            pattern.callback._non_atomic_requests = set(settings.DATABASES)  # type: ignore[attr-defined]
        return patterns

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        bad = [
            key
            for key, values in request.GET.lists()
            if "\x00" in key or any("\x00" in value for value in values)
        ]
        if not bad:
            return super().changelist_view(request, extra_context)
        kept = request.GET.copy()
        for key in bad:
            del kept[key]
        names = ", ".join(repr(key.replace("\x00", "\\0")[:40]) for key in bad)
        messages.error(request, f"Ignored {names}: a search or filter cannot hold a NUL character.")
        return HttpResponseRedirect(f"{request.path}?{kept.urlencode()}")


class ReadOnlyAdmin(TextOnlyQueries):
    """Machine-owned rows: viewable, never edited or deleted by hand."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


# ---- charts ----------------------------------------------------------------------------------


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


# ---- executions ------------------------------------------------------------------------------


class InStateFilter(admin.SimpleListFilter):
    """"In state": executions where a state is active now (``Execution.objects.in_state``,
    indexed on PostgreSQL), atomic or any compound or parallel ancestor of the active ones.

    The choices are the states of the chart chosen in the chart filter, in document order
    ("every order waiting for payment": chart ``order``, then ``awaiting_payment``); with no
    chart chosen, the states of the charts that have executions, while there are at most
    :attr:`MAX_CHARTS` of them (else choose a chart first). ``?in_state=ID`` in the URL works
    whatever the choices are."""

    title = "in state"
    parameter_name = "in_state"
    MAX_CHARTS = 20
    CHART_PARAMETER = "chart__id__exact"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        chosen = request.GET.get(self.CHART_PARAMETER, "")
        if chosen.isdigit():
            charts = list(Chart.objects.filter(pk=int(chosen)))
        else:
            used = Execution.objects.filter(chart=OuterRef("pk"))
            charts = list(Chart.objects.filter(Exists(used)).order_by("-pk")[: self.MAX_CHARTS + 1])
            if len(charts) > self.MAX_CHARTS:
                charts = []
        ids: dict[str, None] = {}
        for chart in charts:
            compiled = compiled_chart_of(chart)
            if not isinstance(compiled, Unreadable):
                ids.update(dict.fromkeys(state.id for state in compiled.states[1:]))
        value = self.value()
        if value and value not in ids:
            ids[value] = None  # chosen by URL: shown, so the list says what it is filtered by
        return [(state_id, state_id) for state_id in ids]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Execution]) -> QuerySet[Execution]:
        value = self.value()
        return queryset.in_state(value) if value else queryset  # type: ignore[attr-defined]


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
    list_filter = [
        "status",
        "chart",
        InStateFilter,
        # (the models executions are about, only those some execution has)
        ("subject_content_type", admin.RelatedOnlyFieldListFilter),
        "created",
        "updated",
    ]
    search_fields = ["=id", "session_id", "business_key"]
    date_hierarchy = "created"
    list_select_related = ["chart"]
    actions = [
        "cancel_selected",
        "migrate_selected",
        "erase_selected",
        "trace_selected",
        "untrace_selected",
    ]
    # (shown as *_json below; the subject's two columns as one link)
    exclude = [
        "position", "configuration", "donedata", "metadata", "subject_content_type",
        "subject_object_id",
    ]
    readonly_fields = [
        "chart",
        "subject_link",
        "status",
        "session_id",
        "business_key",
        "configuration_json",
        "steps",
        "donedata_json",
        "outcome",
        "failure_reason",
        "metadata_json",
        "created",
        "updated",
        "ended",
        "erased",
        "tracing",
    ]

    # The JSON columns shown through the read model's json_text: bounded, never failing on a
    # value nested too deeply (Django's own display would recurse into it).
    @admin.display(description="configuration")
    def configuration_json(self, execution: Execution) -> str:
        return json_text(execution.configuration)

    @admin.display(description="donedata")
    def donedata_json(self, execution: Execution) -> str:
        return json_text(execution.donedata)

    @admin.display(description="metadata")
    def metadata_json(self, execution: Execution) -> str:
        return json_text(execution.metadata)

    @admin.display(description="about")
    def subject_link(self, execution: Execution) -> str:
        return subject_link(execution)

    @admin.display(description="in states")
    def in_states(self, execution: Execution) -> str:
        configuration = execution.configuration
        return ", ".join(configuration) if isinstance(configuration, list) else ""

    # ---- bulk actions (a confirmation page each; every cancel is a step of its own) ----

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("statecharts.change_execution"))

    def has_migrate_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("statecharts.change_execution"))

    @admin.action(
        description="Migrate the selected executions to another version of their chart",
        permissions=["migrate"],
    )
    def migrate_selected(
        self, request: HttpRequest, queryset: QuerySet[Execution]
    ) -> HttpResponse | None:
        executions = list(queryset.select_related("chart").order_by("pk")[: MAX_BULK_ROWS + 1])
        if too_many(self, request, executions):
            return None
        names = {e.chart.name for e in executions}
        if len(names) != 1 or "" in names:
            self.message_user(
                request,
                "Select executions of one named chart to migrate them to another of its "
                "versions.",
                messages.ERROR,
            )
            return None
        form = MigrateForm(request.POST if confirmed(request) else None, name=names.pop())
        valid = form.is_bound and form.is_valid()
        if valid and form.plan is not None and not form.cleaned_data.get("preview"):
            counts: Counter[str] = Counter()
            for report in migrate(form.plan, [e.pk for e in executions]):
                counts[report.verdict.value] += 1
                if report.verdict is Verdict.REFUSED:
                    self.message_user(
                        request, f"Execution {report.execution_id}: {report.reason}", messages.ERROR
                    )
            said = ", ".join(f"{n} {verdict}" for verdict, n in sorted(counts.items()))
            self.message_user(request, f"Migrate to {form.plan.target}: {said}.")
            return None
        plan = form.plan if valid else None
        if plan is None and not form.is_bound:
            latest = Chart.objects.latest_version(executions[0].chart.name)
            try:
                plan = MigrationPlan.make(latest) if latest is not None else None
            except PlanError:
                plan = None
        rows = [ConfirmRow(title_of(e), where(e.status, e.configuration)) for e in executions]
        if plan is not None:
            notes = {
                r.execution_id: (
                    f"refused: {r.reason}"
                    if r.verdict is Verdict.REFUSED
                    else f"{r.verdict.value} -> {', '.join(r.configuration)}"
                )
                for r in dry_run(plan, executions)
            }
            rows = [ConfirmRow(title_of(e), notes.get(e.pk, "")) for e in executions]
        return confirm_action(
            self,
            request,
            action="migrate_selected",
            title="Migrate executions",
            summary=f"Migrate {len(executions)} execution(s)"
            + (f" to {plan.target}" if plan is not None else "")
            + "? The list is a preview (a dry run): nothing has changed yet. No chart code "
            "runs; pending timers stay; each migration is recorded in the history.",
            rows=rows,
            pks=[e.pk for e in executions],
            button="Continue",
            form=form,
        )

    def has_erase_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("statecharts.erase_execution"))

    @admin.action(description="Cancel the selected executions", permissions=["cancel"])
    def cancel_selected(
        self, request: HttpRequest, queryset: QuerySet[Execution]
    ) -> HttpResponse | None:
        executions = list(queryset.select_related("chart").order_by("pk")[: MAX_BULK_ROWS + 1])
        if too_many(self, request, executions):
            return None
        running = [e for e in executions if not e.is_terminal]
        if not confirmed(request):
            rows = [ConfirmRow(title_of(e), where(e.status, e.configuration)) for e in running]
            rows += [
                ConfirmRow(title_of(e), f"{e.status}: nothing to cancel")
                for e in executions
                if e.is_terminal
            ]
            return confirm_action(
                self,
                request,
                action="cancel_selected",
                title="Cancel executions",
                summary=f"Cancel {len(running)} execution(s)? Each is cancelled in a step of "
                "its own: its onexit handlers run, its pending timers are discarded and its "
                "invoked children cancelled.",
                rows=rows,
                pks=[e.pk for e in running],
                button=f"Yes, cancel {len(running)}",
                form=CancelForm(),
            )
        form = CancelForm(request.POST)
        token = form.cleaned_data["idempotency_token"] if form.is_valid() else None
        try:
            context = caller_context(request)
        except StatechartError as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return None
        outcomes: Counter[str] = Counter()
        for execution in running:
            try:
                result = stepper.cancel(
                    execution,
                    caller_context=context,
                    # One key per execution from the confirmation page's one token.
                    idempotency_key=f"{token}:{execution.pk}" if token else None,
                    user=request.user,
                )
            except Exception as exc:  # the refusal table says what each refusal answers
                refused = refusals.refusal(exc)
                if refused is None:
                    raise
                # CANCEL_PERMISSIONS: left as it is
                if refused.reason is refusals.Reason.NOT_PERMITTED:
                    outcomes["not permitted"] += 1
                    doing = "not cancelled"
                else:
                    doing = None
                self.message_user(
                    request, f"{title_of(execution)}: {refused.message(doing)}", messages.ERROR
                )
                continue
            outcomes["already done" if result.repeated else result.disposition] += 1
        said = ", ".join(f"{n} {disposition}" for disposition, n in sorted(outcomes.items()))
        self.message_user(request, f"Cancel: {said or 'nothing was cancelled'}.")
        return None

    @admin.action(description="Trace the steps of the selected executions", permissions=["cancel"])
    def trace_selected(self, request: HttpRequest, queryset: QuerySet[Execution]) -> None:
        self._trace(request, queryset, on=True)

    @admin.action(description="Stop tracing the selected executions", permissions=["cancel"])
    def untrace_selected(self, request: HttpRequest, queryset: QuerySet[Execution]) -> None:
        self._trace(request, queryset, on=False)

    def _trace(self, request: HttpRequest, queryset: QuerySet[Execution], *, on: bool) -> None:
        """Turn tracing on or off (``stepper.trace``, each under its execution's lock): from
        their next step, their timelines show the core's trace. Changes nothing they do."""
        ids = list(queryset.order_by("pk").values_list("pk", flat=True)[: MAX_BULK_ROWS + 1])
        if too_many(self, request, ids):
            return
        changed = sum(1 for pk in ids if stepper.trace(pk, on))
        what = "on" if on else "off"
        self.message_user(
            request, f"Tracing {what}: {changed} changed, {len(ids) - changed} already {what}."
        )

    @admin.action(
        description="Erase the personal data of the selected executions", permissions=["erase"]
    )
    def erase_selected(
        self, request: HttpRequest, queryset: QuerySet[Execution]
    ) -> HttpResponse | None:
        ids = list(queryset.order_by("pk").values_list("pk", flat=True)[: MAX_BULK_ROWS + 1])
        if too_many(self, request, ids):
            return None
        form = EraseForm(request.POST if confirmed(request) else None)
        if not confirmed(request) or not form.is_valid():
            everything = retention.family(ids)
            found = Execution.objects.filter(pk__in=everything).select_related("chart")
            rows = [
                ConfirmRow(
                    title_of(e),
                    ("invoked child; " if e.pk not in ids else "")
                    + (e.status if e.is_terminal else f"{e.status}: still running"),
                )
                for e in found.order_by("pk")
            ]
            running = sum(1 for e in found if not e.is_terminal)
            warning = (
                "This cannot be undone. Their datamodel, donedata, metadata and business "
                "keys, and the data of every input, message, timer and invocation of theirs "
                "are removed; each gets an 'erased' entry in its history."
            )
            if running:
                warning += (
                    f" {running} of them are still running: they are erased only if you "
                    "choose to cancel them first."
                )
            return confirm_action(
                self,
                request,
                action="erase_selected",
                title="Erase personal data",
                summary=f"Erase the personal data of {len(everything)} execution(s) "
                f"({len(everything) - len(ids)} of them invoked by the selected ones)?",
                rows=rows,
                pks=ids,
                button="Yes, erase",
                form=form,
                warning=warning,
            )
        try:
            report = retention.erase(
                ids,
                reason=form.cleaned_data["reason"],
                cancel=form.cleaned_data["cancel_running"],
                requested_by=request.user.get_username(),
            )
        except retention.ErasureRefused as exc:
            self.message_user(request, f"Nothing was erased: {exc}", messages.ERROR)
            return None
        self.message_user(request, f"Erasure: {report}.")
        return None

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
        execution = self.get_object(request, unquote(object_id))
        if execution is None:  # no such execution, or an id that is not one
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)
        view = inspect(execution)  # what the API and `statechart show` display too
        hints = None if isinstance(view.compiled, Unreadable) else chart_hints(view.compiled)
        events = hints.events if hints is not None else ()
        accepted = hints.accepted_in(view.active_states) if hints is not None else ()
        try:  # what this user can send now (statecharts.policies.availability)
            available: tuple[AvailableEvent, ...] | None = available_events(
                execution, user=request.user
            )
        except Unavailable:
            available = None
        if available is not None:  # the buttons offer only what this user can send now
            names = {event.name for event in available}
            accepted = tuple(hint for hint in accepted if hint.name in names)
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
            "send_form": SendEventForm(events=events, accepted=accepted, available=available),
            "cancel_form": CancelForm(),
            "accepted_events": accepted,
            "available_events": available or (),
            "subject_link": subject_link(execution),
            "event_hints": {hint.name: hint.data_example for hint in events},
            "can_act": request.user.has_perm("statecharts.change_execution")
            and execution.status == "active",
            # CANCEL_PERMISSIONS too (the cancel itself checks again)
            "can_cancel": execution.status == "active"
            and authorization.may_cancel(request.user, execution),
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
            send = stepper.EventRequest(
                execution=execution_id,
                name=form.cleaned_data["name"],
                data=form.cleaned_data["data"],
                caller_context=caller_context(request),
                idempotency_key=form.cleaned_data["idempotency_token"],
                user=request.user,
            )
            result = stepper.submit(send)
        except Exception as exc:  # the refusal table says what each refusal answers
            report_refusal(request, exc, "Not sent")
            return self._back(execution_id)
        execution = result.execution
        if result.repeated:
            messages.info(request, f"This form was already posted (step {result.entry.seq}).")
            return self._back(execution_id)
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
        form = CancelForm(request.POST)
        if not form.is_valid():
            report_form_errors(request, form)
            return self._back(execution_id)
        try:
            cancel = stepper.CancelRequest(
                execution=execution_id,
                caller_context=caller_context(request),
                idempotency_key=form.cleaned_data["idempotency_token"],
                user=request.user,
            )
            result = stepper.submit(cancel)
        except Exception as exc:  # the refusal table says what each refusal answers
            report_refusal(request, exc, "Not cancelled")
            return self._back(execution_id)
        execution = result.execution
        if result.repeated:
            messages.info(request, f"This form was already posted (step {result.entry.seq}).")
            return self._back(execution_id)
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

    # The stored input, with Event I/O processor addresses (capabilities) hidden.
    exclude = ["input"]
    readonly_fields = ["input_shown"]

    @admin.display(description="input")
    def input_shown(self, entry: HistoryEntry) -> str:
        return json_text(shown_input(entry.input), indent=2)


@admin.register(OutboxMessage)
class OutboxMessageAdmin(ReadOnlyAdmin):
    list_display = ["id", "sender", "target_session_id", "event_name", "status", "created"]
    list_filter = ["status"]
    search_fields = ["target_session_id", "sender__session_id"]
    actions = ["retry_selected"]

    def has_retry_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("statecharts.change_outboxmessage"))

    @admin.action(
        description="Retry delivering the selected undeliverable messages", permissions=["retry"]
    )
    def retry_selected(
        self, request: HttpRequest, queryset: QuerySet[OutboxMessage]
    ) -> HttpResponse | None:
        chosen = list(queryset.order_by("pk")[: MAX_BULK_ROWS + 1])
        if too_many(self, request, chosen):
            return None
        retryable = [m for m in chosen if m.status == OutboxStatus.UNDELIVERABLE]
        if not confirmed(request):
            rows = [ConfirmRow(str(m), m.reason) for m in retryable]
            rows += [
                ConfirmRow(str(m), "only undeliverable messages are retried")
                for m in chosen
                if m.status != OutboxStatus.UNDELIVERABLE
            ]
            return confirm_action(
                self,
                request,
                action="retry_selected",
                title="Retry undeliverable messages",
                summary=f"Deliver {len(retryable)} undeliverable message(s) again? Their "
                "senders were told error.communication when they failed; a message that "
                "fails again is not told twice.",
                rows=rows,
                pks=[m.pk for m in retryable],
                button=f"Yes, retry {len(retryable)}",
            )
        for message in retryable:
            stepper.retry_message(message.pk)
        # Counted from the rows: a message its target had applied after all is delivered.
        delivered = OutboxMessage.objects.filter(
            pk__in=[m.pk for m in retryable], status=OutboxStatus.DELIVERED
        ).count()
        self.message_user(
            request,
            f"Retried {len(retryable)} message(s): {delivered} delivered, "
            f"{len(retryable) - delivered} still undeliverable.",
        )
        return None

    @admin.display(description="event")
    def event_name(self, message: OutboxMessage) -> str:
        return str(message.event.get("name", ""))
