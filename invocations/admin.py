"""Invocations in the admin: read-only (machine-owned rows), linked to parent and child."""

from __future__ import annotations

import json

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from invocations.models import Invocation
from statecharts.admin import ReadOnlyAdmin


def _execution_link(pk: int | None) -> SafeString | str:
    if pk is None:
        return "-"
    url = reverse("admin:statecharts_execution_change", args=[pk])
    return format_html('<a href="{}">{}</a>', url, pk)


@admin.register(Invocation)
class InvocationAdmin(ReadOnlyAdmin):
    list_display = ["id", "invokeid", "type", "parent_link", "state", "status", "child_link"]
    list_filter = ["status", "type"]
    search_fields = ["invokeid", "=parent__id", "parent__session_id"]
    ordering = ["-id"]

    # The params decoded with the row's payload codec (statecharts.policies.codecs), not as stored.
    exclude = ["params"]
    readonly_fields = ["shown_params_value"]

    @admin.display(description="params")
    def shown_params_value(self, invocation: Invocation) -> str:
        shown = invocation.shown_params
        text = json.dumps(shown["value"], ensure_ascii=False, default=str)
        return f"{text} {shown['unreadable']}" if shown["unreadable"] else text

    @admin.display(description="parent", ordering="parent_id")
    def parent_link(self, invocation: Invocation) -> SafeString | str:
        return _execution_link(invocation.parent_id)

    @admin.display(description="child", ordering="child_id")
    def child_link(self, invocation: Invocation) -> SafeString | str:
        return _execution_link(invocation.child_id)
