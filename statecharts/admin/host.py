"""The admin of a host's own model with a ``StatechartField`` (``statecharts.fields``): its
change page shows each field's execution, its diagram with the active states, and a button
for each event this user can send it now (``statecharts.policies.availability``)::

    from statecharts.admin import StatechartFieldAdminMixin

    @admin.register(Order)
    class OrderAdmin(StatechartFieldAdminMixin, admin.ModelAdmin):
        pass

A button is one step of the execution (``stepper.submit`` of an ``EventRequest``, with the
user and the admin's caller context recorded), posted to ``<object id>/statechart/<field>/
send/``; the user needs the change permission on the object, and the stepper asks
``statecharts.policies.authorization`` as for every send; a refusal comes back as the refusal
table's message (``steps.report_refusal``). Deleting an object whose field protects a live
execution lists it as protected on the confirmation page.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_POST

from statecharts import stepper
from statecharts.admin.charts import diagram
from statecharts.admin.steps import caller_context, report_refusal, said_sent
from statecharts.fields import PROTECT, StatechartField, statechart_fields
from statecharts.operations.inspection import where
from statecharts.policies import idempotency
from statecharts.policies.availability import Unavailable
from statecharts.statuses import LIVE_STATUSES

EVENT = "statechart_event"  # the pressed button's name (its value: the event)
TOKEN = "statechart_token"  # the page's idempotency token: a re-posted page applies once


class StatechartFieldAdminMixin:
    """Diagram and event buttons on the change page of a model with a StatechartField (the
    module docstring). Put it before ``admin.ModelAdmin`` in the bases."""

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = list(super().get_readonly_fields(request, obj))  # type: ignore[misc]
        if obj is None:
            return fields
        return [*fields, *(self._panel(request, field) for field in self._fields())]

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        fieldsets = list(super().get_fieldsets(request, obj))  # type: ignore[misc]
        if obj is None or not getattr(self, "fieldsets", None):
            return fieldsets  # (without declared fieldsets the readonly fields are listed)
        panels = [self._panel(request, field) for field in self._fields()]
        return [*fieldsets, ("Statechart", {"fields": panels})]

    def get_urls(self) -> list[URLPattern]:
        view = require_POST(self.statechart_send_view)
        # Outside ATOMIC_REQUESTS: the stepper commits each step itself.
        view._non_atomic_requests = set(settings.DATABASES)  # type: ignore[attr-defined]
        opts = self.model._meta  # type: ignore[attr-defined]
        urls = [
            path(
                "<path:object_id>/statechart/<str:field_name>/send/",
                self.admin_site.admin_view(view),  # type: ignore[attr-defined]
                name=f"{opts.app_label}_{opts.model_name}_statechart_send",
            )
        ]
        return urls + super().get_urls()  # type: ignore[misc]

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> Any:
        deleted, counts, perms_needed, protected = super().get_deleted_objects(  # type: ignore[misc]
            objs, request
        )
        from statecharts.models import Execution

        for obj in objs:
            for field in self._fields():
                execution_id = getattr(obj, field.attname)
                if field.on_instance_delete != PROTECT or execution_id is None:
                    continue
                execution = Execution.objects.filter(pk=execution_id).first()
                if execution is not None and execution.status in LIVE_STATUSES:
                    protected = [
                        *protected,
                        f"{obj}: its {field.name} execution {execution.pk} is {execution.status}",
                    ]
        return deleted, counts, perms_needed, protected

    # ---- the panel and the view -------------------------------------------------------

    def _fields(self) -> list[StatechartField]:
        return statechart_fields(self.model)  # type: ignore[attr-defined]

    def _panel(self, request: HttpRequest, field: StatechartField) -> Callable[[Any], Any]:
        """The readonly "field" showing ``field``'s panel: one callable per request and field
        (the admin's form factory matches the readonly fields it excludes by identity)."""
        made: dict[str, Callable[[Any], Any]] = request.__dict__.setdefault(
            "_statechart_panels", {}
        )
        if field.name in made:
            return made[field.name]

        def panel(obj: Any) -> SafeString | str:
            return self.statechart_panel(request, obj, field)

        panel.short_description = field.verbose_name  # type: ignore[attr-defined]
        panel.__name__ = f"statechart_{field.name}"
        made[field.name] = panel
        return panel

    def statechart_panel(self, request: HttpRequest, obj: Any, field: StatechartField) -> Any:
        """Where the execution stands, its diagram, and a button per event this user can send
        it now (none for a finished one)."""
        from statecharts.operations.inspection import inspect

        execution = getattr(obj, field.name)  # (a lazy field starts it here)
        if execution is None:
            return "(not started)"
        view = inspect(execution)
        opts = self.model._meta  # type: ignore[attr-defined]
        url = reverse(
            f"{self.admin_site.name}:{opts.app_label}_{opts.model_name}_statechart_send",  # type: ignore[attr-defined]
            args=[obj.pk, field.name],
        )
        try:
            available = execution.available_events(user=request.user)
        except Unavailable:
            available = ()
        names = [event.name for event in available if "*" not in event.name]
        can_change = self.has_change_permission(request, obj)  # type: ignore[attr-defined]
        buttons = (
            format_html_join(
                " ",
                '<button type="submit" class="button" formaction="{}" formnovalidate '
                'name="{}" value="{}">{}</button>',
                ((url, EVENT, name, name) for name in names),
            )
            if can_change and names
            else ""
        )
        execution_url = reverse(
            f"{self.admin_site.name}:statecharts_execution_change",  # type: ignore[attr-defined]
            args=[execution.pk],
        )
        html = format_html(
            '<div class="statechart-field"><p><a href="{}">execution {}</a>: {}</p>'
            '<input type="hidden" name="{}" value="{}">'
            '<p class="statechart-events">{}</p><div class="statechart-diagram">{}</div></div>',
            execution_url,
            execution.pk,
            where(execution.status, execution.configuration),
            TOKEN,
            idempotency.issue_token(),
            buttons or ("(no event to send now)" if can_change else ""),
            diagram(view.compiled, view.active_states, view.invoking_states),
        )
        # The admin turns a readonly value's newlines into <br>: none inside the SVG.
        return mark_safe(html.replace("\n", " "))

    def statechart_send_view(
        self, request: HttpRequest, object_id: str, field_name: str
    ) -> HttpResponse:
        """One button: one step of the object's execution, with the user recorded."""
        obj = self.get_object(request, object_id)  # type: ignore[attr-defined]
        fields = {field.name: field for field in self._fields()}
        if obj is None or field_name not in fields:
            raise Http404
        if not self.has_change_permission(request, obj):  # type: ignore[attr-defined]
            raise PermissionDenied
        opts = self.model._meta  # type: ignore[attr-defined]
        back = HttpResponseRedirect(
            reverse(
                f"{self.admin_site.name}:{opts.app_label}_{opts.model_name}_change",  # type: ignore[attr-defined]
                args=[obj.pk],
            )
        )
        execution = getattr(obj, field_name)
        name = request.POST.get(EVENT, "")
        if execution is None or not name:
            messages.error(request, "Not sent: no execution or no event.")
            return back
        try:
            result = stepper.submit(
                stepper.EventRequest(
                    execution=execution.pk,
                    name=name,
                    caller_context=caller_context(request),
                    idempotency_key=request.POST.get(TOKEN) or None,
                    user=request.user,
                )
            )
        except Exception as exc:  # the refusal table says what each refusal answers
            report_refusal(request, exc, "Not sent")
            return back
        if result.repeated:
            messages.info(request, f"This page was already posted (step {result.entry.seq}).")
            return back
        level, text = said_sent(result, {"name": name})
        messages.add_message(request, level, text)
        return back


__all__ = ["StatechartFieldAdminMixin"]
