"""Timers in the admin: read-only (machine-owned rows), linked to their execution."""

from __future__ import annotations

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from statecharts.admin import ReadOnlyAdmin
from timers.models import Timer


@admin.register(Timer)
class TimerAdmin(ReadOnlyAdmin):
    list_display = ["id", "event_name", "execution_link", "send_id", "due", "status", "attempts"]
    list_filter = ["status", "due"]
    date_hierarchy = "due"
    search_fields = ["send_id", "=execution__id", "execution__session_id"]
    ordering = ["due", "id"]

    @admin.display(description="event")
    def event_name(self, timer: Timer) -> str:
        return str(timer.event.get("name", ""))

    @admin.display(description="execution", ordering="execution_id")
    def execution_link(self, timer: Timer) -> SafeString:
        url = reverse("admin:statecharts_execution_change", args=[timer.execution_id])
        return format_html('<a href="{}">{}</a>', url, timer.execution_id)
