"""History entries in the admin: machine-owned rows, read-only; each input shown as the read
model shows it (``statecharts.operations.inspection``), its Event I/O processor addresses
(capabilities) hidden."""

from __future__ import annotations

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from statecharts.admin.bases import ReadOnlyAdmin
from statecharts.admin.display import compact_date
from statecharts.models import HistoryEntry
from statecharts.operations.inspection import history_row, json_text, shown_input, title_of


@admin.register(HistoryEntry)
class HistoryEntryAdmin(ReadOnlyAdmin):
    list_display = [
        "execution_title", "seq", "summary", "disposition", "status_after", "created_at",
    ]
    list_filter = ["disposition", "status_after"]
    search_fields = ["execution__session_id", "execution__business_key"]
    list_select_related = ["execution__chart"]

    # What a person calls the execution (chart and business key), linked to its page; its
    # session id in the title.
    @admin.display(description="execution", ordering="execution_id")
    def execution_title(self, entry: HistoryEntry) -> SafeString:
        execution = entry.execution
        url = reverse("admin:statecharts_execution_change", args=[execution.pk])
        return format_html(
            '<a href="{}" title="{}">{}</a>', url, execution.session_id, title_of(execution)
        )

    @admin.display(description="created", ordering="created")
    def created_at(self, entry: HistoryEntry) -> SafeString | None:
        return compact_date(entry.created)

    @admin.display(description="input")
    def summary(self, entry: HistoryEntry) -> str:
        return f"#{entry.seq} {history_row(entry).input}"  # never fails on a damaged row

    # The stored input, with Event I/O processor addresses (capabilities) hidden.
    exclude = ["input"]
    readonly_fields = ["input_shown"]

    @admin.display(description="input")
    def input_shown(self, entry: HistoryEntry) -> str:
        return json_text(shown_input(entry.input), indent=2)
