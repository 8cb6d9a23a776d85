"""Invocations in the admin: read-only (machine-owned rows), linked to parent and child; an
operator's actions on handlers' invocations (``invocations.operating``): retry a waiting start
now, cancel, each with a reason, its own permission and a result per row."""

from __future__ import annotations

import json

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from invocations import operating
from invocations.models import Invocation
from statecharts.admin import (
    MAX_BULK_ROWS,
    ConfirmRow,
    ReadOnlyAdmin,
    caller_context,
    confirm_action,
    confirmed,
    too_many,
)
from statecharts.policies import refusals, validation


class OperatorForm(forms.Form):
    reason = forms.CharField(
        max_length=operating.REASON_MAX_LENGTH,
        help_text="Why: recorded with the action in the parent's history.",
    )


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
    actions = ["retry_now_selected", "cancel_selected"]

    def has_retry_now_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm(operating.PERMISSIONS["retry_now"]))

    def has_operator_cancel_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm(operating.PERMISSIONS["cancel"]))

    @admin.action(
        description="Retry the selected waiting handler starts now", permissions=["retry_now"]
    )
    def retry_now_selected(
        self, request: HttpRequest, queryset: QuerySet[Invocation]
    ) -> HttpResponse | None:
        return self._operate(request, queryset, "retry_now_selected", "Retry now")

    @admin.action(
        description="Cancel the selected handler invocations", permissions=["operator_cancel"]
    )
    def cancel_selected(
        self, request: HttpRequest, queryset: QuerySet[Invocation]
    ) -> HttpResponse | None:
        return self._operate(request, queryset, "cancel_selected", "Cancel")

    def _operate(
        self, request: HttpRequest, queryset: QuerySet[Invocation], action: str, title: str
    ) -> HttpResponse | None:
        chosen = list(queryset.order_by("pk")[: MAX_BULK_ROWS + 1])
        if too_many(self, request, chosen):
            return None
        form = OperatorForm(request.POST) if confirmed(request) else OperatorForm()
        if not confirmed(request) or not form.is_valid():
            what = (
                "run each waiting start now"
                if action == "retry_now_selected"
                else "end each open one failed (its parent told error.communication)"
            )
            return confirm_action(
                self,
                request,
                action=action,
                title=title,
                summary=f"{title} {len(chosen)} invocation(s)? This will {what}; the others "
                "are refused.",
                rows=[ConfirmRow(f"{row.invokeid} ({row.type})", row.status) for row in chosen],
                pks=[row.pk for row in chosen],
                button=f"Yes, {title.lower()} ({len(chosen)})",
                form=form,
            )
        try:
            context = caller_context(request)
        except validation.InvalidInput as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return None
        act = operating.retry_now if action == "retry_now_selected" else operating.cancel
        outcomes: dict[str, int] = {}
        for row in chosen:
            try:
                outcome = act(row.pk, reason=form.cleaned_data["reason"], caller_context=context)
            except Exception as exc:  # the refusal table says what each refusal answers
                refused = refusals.refusal(exc)
                if refused is None:
                    raise
                outcome = str(refused.reason)
                self.message_user(request, str(exc), messages.ERROR)
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
        said = ", ".join(f"{n} {outcome}" for outcome, n in sorted(outcomes.items()))
        self.message_user(request, f"{title}: {said}.")
        return None

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
