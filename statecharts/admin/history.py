"""History entries in the admin: machine-owned rows, read-only; each input shown as the read
model shows it (``statecharts.operations.inspection``), its Event I/O processor addresses
(capabilities) hidden."""

from __future__ import annotations

from django.contrib import admin

from statecharts.admin.bases import ReadOnlyAdmin
from statecharts.models import HistoryEntry
from statecharts.operations.inspection import history_row, json_text, shown_input


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
