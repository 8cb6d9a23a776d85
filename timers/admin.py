"""Timers in the admin: read-only (machine-owned rows), linked to their execution; one action,
retrying failed timers (``timers.retrying``), with a confirmation page."""

from __future__ import annotations

from collections import Counter

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from statecharts.admin import (
    MAX_BULK_ROWS,
    ConfirmRow,
    ReadOnlyAdmin,
    compact_date,
    confirm_action,
    confirmed,
    too_many,
)
from timers.models import RouteTimer, Timer, TimerStatus
from timers.retrying import retry


@admin.register(Timer)
class TimerAdmin(ReadOnlyAdmin):
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
    actions = ["retry_selected"]

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
class RouteTimerAdmin(ReadOnlyAdmin):
    """Delayed route sends waiting (the default route timer queue, timers.routequeue): a row
    leaves when it fires, is cancelled or discarded; its fate is in the route deliveries."""

    list_display = ["id", "route", "send_id", "key", "execution_id", "due", "reason"]
    list_filter = ["route"]
    search_fields = ["key", "send_id", "=execution__id"]
    ordering = ["due", "id"]
