"""Timers in the admin: read-only (machine-owned rows), linked to their execution. Actions,
each after a confirmation page: retrying failed timers (``timers.retrying``); an operator's
fire now, cancel and reschedule of pending timers and waiting route timers
(``timers.operating``: a reason to type, one permission per action, a result per row)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from statecharts.admin import (
    MAX_BULK_ROWS,
    ConfirmRow,
    ReadOnlyAdmin,
    caller_context,
    compact_date,
    confirm_action,
    confirmed,
    too_many,
)
from statecharts.policies import refusals
from timers import operating
from timers.models import RouteTimer, Timer, TimerStatus
from timers.retrying import retry


class OperatorForm(forms.Form):
    """What an operator's action asks: why (recorded in the execution's history)."""

    reason = forms.CharField(
        max_length=operating.REASON_MAX_LENGTH,
        help_text="Why: recorded with the action in each execution's history.",
    )


class RescheduleForm(OperatorForm):
    due = forms.DateTimeField(help_text="The new due time (the site's time zone).")


# One action of timers.operating on one row: (pk, the form's data, the caller context) ->
# the outcome.
Run = Callable[[int, dict[str, Any], dict[str, Any]], str]


class OperatorActions(admin.ModelAdmin):  # type: ignore[type-arg]
    """The operator's actions of a timers list: each behind its own permission
    (``timers.operating.PERMISSIONS``), confirmed with a reason, done row by row (each its
    own transaction under its execution's lock), answered with a count per outcome and one
    message per refused row in the refusal table's words."""

    permission_names: dict[operating.Action, str] = operating.PERMISSIONS

    def _allowed(self, request: HttpRequest, action: operating.Action) -> bool:
        return bool(request.user.has_perm(self.permission_names[action]))

    def has_fire_now_permission(self, request: HttpRequest) -> bool:
        return self._allowed(request, operating.Action.FIRE_NOW)

    def has_operator_cancel_permission(self, request: HttpRequest) -> bool:
        return self._allowed(request, operating.Action.CANCEL)

    def has_reschedule_permission(self, request: HttpRequest) -> bool:
        return self._allowed(request, operating.Action.RESCHEDULE)

    def _operate(
        self,
        request: HttpRequest,
        queryset: QuerySet[Any],
        *,
        action: str,
        title: str,
        summary: str,
        form_class: type[OperatorForm],
        run: Run,
    ) -> HttpResponse | None:
        chosen = list(queryset.order_by("pk")[: MAX_BULK_ROWS + 1])
        if too_many(self, request, chosen):
            return None
        form = form_class(request.POST) if confirmed(request) else form_class()
        if not confirmed(request) or not form.is_valid():
            return confirm_action(
                self,
                request,
                action=action,
                title=title,
                summary=summary.format(count=len(chosen)),
                rows=[ConfirmRow(str(row), getattr(row, "reason", "")) for row in chosen],
                pks=[row.pk for row in chosen],
                button=f"Yes, {title.lower()} ({len(chosen)})",
                form=form,
            )
        try:
            context = caller_context(request)
        except Exception as exc:
            refused = refusals.refusal(exc)
            if refused is None:
                raise
            self.message_user(request, refused.message(), messages.ERROR)
            return None
        outcomes: Counter[str] = Counter()
        for row in chosen:
            try:
                outcomes[run(row.pk, form.cleaned_data, context)] += 1
            except operating.FireFailed as exc:
                outcomes["failed"] += 1
                self.message_user(request, str(exc), messages.ERROR)
            except Exception as exc:  # the refusal table says what each refusal answers
                refused = refusals.refusal(exc)
                if refused is None:
                    raise
                outcomes[str(refused.reason)] += 1
                detail = str(exc) or refused.detail
                self.message_user(request, f"{row}: {detail}", messages.ERROR)
        said = ", ".join(f"{n} {outcome}" for outcome, n in sorted(outcomes.items()))
        self.message_user(request, f"{title}: {said or 'nothing done'}.")
        return None


@admin.register(Timer)
class TimerAdmin(OperatorActions, ReadOnlyAdmin):
    list_display = [
        "id",
        "event_name",
        "execution_link",
        "send_id",
        "due_at",
        "status",
        "attempts",
    ]
    list_filter = ["status", "delivery", "due"]
    date_hierarchy = "due"
    search_fields = ["send_id", "=execution__id", "execution__session_id"]
    ordering = ["due", "id"]
    actions = ["retry_selected", "fire_now_selected", "cancel_selected", "reschedule_selected"]

    @admin.action(description="Fire the selected pending timers now", permissions=["fire_now"])
    def fire_now_selected(
        self, request: HttpRequest, queryset: QuerySet[Timer]
    ) -> HttpResponse | None:
        return self._operate(
            request,
            queryset,
            action="fire_now_selected",
            title="Fire now",
            summary="Fire {count} timer(s) now? Each is fired as when it falls due (a timer "
            "of a finished execution is discarded, a held one snoozed); only pending timers "
            "are fired, the others are refused.",
            form_class=OperatorForm,
            run=lambda pk, data, context: operating.fire_now(
                pk, reason=data["reason"], caller_context=context
            ),
        )

    @admin.action(description="Cancel the selected pending timers", permissions=["operator_cancel"])
    def cancel_selected(
        self, request: HttpRequest, queryset: QuerySet[Timer]
    ) -> HttpResponse | None:
        return self._operate(
            request,
            queryset,
            action="cancel_selected",
            title="Cancel",
            summary="Cancel {count} timer(s)? A cancelled timer is never delivered; only "
            "pending timers are cancelled, the others are refused.",
            form_class=OperatorForm,
            run=lambda pk, data, context: operating.cancel(
                pk, reason=data["reason"], caller_context=context
            ),
        )

    @admin.action(description="Reschedule the selected pending timers", permissions=["reschedule"])
    def reschedule_selected(
        self, request: HttpRequest, queryset: QuerySet[Timer]
    ) -> HttpResponse | None:
        return self._operate(
            request,
            queryset,
            action="reschedule_selected",
            title="Reschedule",
            summary="Give {count} timer(s) a new due time? Each keeps its identity and keys; "
            "only pending timers are rescheduled, the others are refused.",
            form_class=RescheduleForm,
            run=lambda pk, data, context: operating.reschedule(
                pk, data["due"], reason=data["reason"], caller_context=context
            ),
        )

    def has_retry_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("timers.change_timer"))

    @admin.action(description="Retry the selected failed timers", permissions=["retry"])
    def retry_selected(
        self, request: HttpRequest, queryset: QuerySet[Timer]
    ) -> HttpResponse | None:
        chosen = list(queryset.order_by("pk")[: MAX_BULK_ROWS + 1])
        if too_many(self, request, chosen):
            return None
        failed = [timer for timer in chosen if timer.status == TimerStatus.FAILED]
        if not confirmed(request):
            rows = [ConfirmRow(str(timer), timer.last_error or timer.reason) for timer in failed]
            rows += [
                ConfirmRow(str(timer), "only failed timers are retried")
                for timer in chosen
                if timer.status != TimerStatus.FAILED
            ]
            return confirm_action(
                self,
                request,
                action="retry_selected",
                title="Retry failed timers",
                summary=f"Retry {len(failed)} failed timer(s)? Each becomes pending again, due "
                "now, with its attempts counted anew; a timer of a finished execution is left "
                "as it is.",
                rows=rows,
                pks=[timer.pk for timer in failed],
                button=f"Yes, retry {len(failed)}",
            )
        outcomes = Counter(retry(timer.pk, by=request.user.get_username()) for timer in failed)
        said = ", ".join(f"{n} {outcome}" for outcome, n in sorted(outcomes.items()))
        self.message_user(request, f"Retry: {said or 'nothing to retry'}.")
        return None

    # (compact, so the list fits a 1280 px window; the delivery is in the filter)
    @admin.display(description="due", ordering="due")
    def due_at(self, timer: Timer) -> SafeString | None:
        return compact_date(timer.due)

    @admin.display(description="event")
    def event_name(self, timer: Timer) -> str:
        return str(timer.event.get("name", ""))

    @admin.display(description="execution", ordering="execution_id")
    def execution_link(self, timer: Timer) -> SafeString:
        url = reverse("admin:statecharts_execution_change", args=[timer.execution_id])
        return format_html('<a href="{}">{}</a>', url, timer.execution_id)


@admin.register(RouteTimer)
class RouteTimerAdmin(OperatorActions, ReadOnlyAdmin):
    """Delayed route sends waiting (the default route timer queue, timers.routequeue): a row
    leaves when it fires, is cancelled or discarded; its fate is in the route deliveries.
    An operator may fire them now, cancel or reschedule them (``timers.operating``)."""

    permission_names = operating.ROUTE_PERMISSIONS
    actions = ["fire_now_selected", "cancel_selected", "reschedule_selected"]

    @admin.action(description="Fire the selected route timers now", permissions=["fire_now"])
    def fire_now_selected(
        self, request: HttpRequest, queryset: QuerySet[RouteTimer]
    ) -> HttpResponse | None:
        return self._operate(
            request,
            queryset,
            action="fire_now_selected",
            title="Fire now",
            summary="Fire {count} route timer(s) now? Each is delivered once under its own "
            "key, as when it falls due (an execution that finished has it discarded).",
            form_class=OperatorForm,
            run=lambda pk, data, context: operating.fire_route_now(
                pk, reason=data["reason"], caller_context=context
            ),
        )

    @admin.action(description="Cancel the selected route timers", permissions=["operator_cancel"])
    def cancel_selected(
        self, request: HttpRequest, queryset: QuerySet[RouteTimer]
    ) -> HttpResponse | None:
        return self._operate(
            request,
            queryset,
            action="cancel_selected",
            title="Cancel",
            summary="Cancel {count} route timer(s)? Each key is recorded cancelled in the "
            "route deliveries and never delivered.",
            form_class=OperatorForm,
            run=lambda pk, data, context: operating.cancel_route(
                pk, reason=data["reason"], caller_context=context
            ),
        )

    @admin.action(description="Reschedule the selected route timers", permissions=["reschedule"])
    def reschedule_selected(
        self, request: HttpRequest, queryset: QuerySet[RouteTimer]
    ) -> HttpResponse | None:
        return self._operate(
            request,
            queryset,
            action="reschedule_selected",
            title="Reschedule",
            summary="Give {count} route timer(s) a new due time? Each keeps both its keys.",
            form_class=RescheduleForm,
            run=lambda pk, data, context: operating.reschedule_route(
                pk, data["due"], reason=data["reason"], caller_context=context
            ),
        )

    list_display = ["id", "route", "send_id", "key", "execution_id", "due", "reason"]
    list_filter = ["route"]
    search_fields = ["key", "send_id", "=execution__id"]
    ordering = ["due", "id"]
