"""Executions in the admin: a list filtered by status, chart, active state and subject, with
bulk actions (cancel, migrate, erase, trace: one module each); a read-only page showing what
the read model shows (``statecharts.operations.inspection``, the one the API and ``statechart
show`` display): the diagram with the active states, the datamodel, the history, the panels
other apps contribute (``statecharts.extensions``: the timers app adds its timers panel, so
this module imports none of them) and forms that go through the stepper (``steps``).

No model form ever changes an execution."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.db.models import Exists, OuterRef, QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils.safestring import SafeString

from statecharts import extensions
from statecharts.admin.bases import ReadOnlyAdmin
from statecharts.admin.cancelling import CancelActions
from statecharts.admin.charts import diagram
from statecharts.admin.display import compact_date, json_tokens, short_session_id
from statecharts.admin.erasure import EraseAction
from statecharts.admin.forms import CancelForm, SendEventForm
from statecharts.admin.migration import MigrateAction
from statecharts.admin.steps import StepViews
from statecharts.admin.subjects import subject_link
from statecharts.models import Chart, Execution
from statecharts.operations.inspection import (
    Unreadable,
    chart_hints,
    compiled_chart_of,
    inspect,
    json_text,
)
from statecharts.policies import authorization
from statecharts.policies.availability import (
    AvailableEvent,
    Unavailable,
    available_events,
    offered,
)


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
class ExecutionAdmin(StepViews, CancelActions, MigrateAction, EraseAction, ReadOnlyAdmin):
    list_display = [
        "session",
        "chart",
        "business_key",
        "status",
        "in_states",
        "updated_at",
    ]
    list_display_links = ["session"]
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
    # The read-only field list shows what "Where it stands" above it does not (the status,
    # the configuration, the donedata and the failure reason are there); the invocation's
    # fields and the donedata error only on an execution that has them.
    FIELDS = [
        "chart",
        "subject_link",
        "session_id",
        "business_key",
        "steps",
        "outcome",
        "metadata_json",
        "created",
        "updated",
        "ended",
        "erased",
        "tracing",
    ]
    readonly_fields = [
        *FIELDS, "parent", "invokeid", "invoke_ordinal", "donedata_error", "status",
        "configuration_json", "donedata_json", "failure_reason",
    ]

    def get_fields(self, request: HttpRequest, obj: Execution | None = None) -> list[str]:
        fields = list(self.FIELDS)
        if obj is not None and obj.parent_id is not None:
            fields += ["parent", "invokeid", "invoke_ordinal"]
        if obj is not None and obj.donedata_error:
            fields.append("donedata_error")
        return fields

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
        return subject_link(execution) or self.get_empty_value_display()  # "-", as other blanks

    # Shortened, the whole in the title: a 32-character id would push the columns after it
    # out of a 1280 px window.
    @admin.display(description="session id", ordering="session_id")
    def session(self, execution: Execution) -> SafeString:
        return short_session_id(execution.session_id)

    @admin.display(description="updated", ordering="updated")
    def updated_at(self, execution: Execution) -> SafeString | None:
        return compact_date(execution.updated)

    @admin.display(description="in states")
    def in_states(self, execution: Execution) -> str:
        configuration = execution.configuration
        return ", ".join(configuration) if isinstance(configuration, list) else ""

    # The bulk actions (a confirmation page each) come from CancelActions, MigrateAction and
    # EraseAction; the page's send and cancel views from StepViews.

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
        if hints is not None:  # not the events it only sends itself (issue 36)
            events = tuple(e for e in events if offered(view.compiled, e.name, request.user))
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
        history = view.history_page(request.GET.get("history", 1))
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
            "history_page": history,
            # each row with its data as JSON tokens a line never breaks
            "history_rows": [(row, json_tokens(row.data)) for row in history.rows],
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
