"""Outbox messages in the admin: machine-owned rows, read-only; one action, delivering the
selected undeliverable messages again (``stepper.retry_message``), with a confirmation page
that asks for a reason (recorded in each sender's history with who asked)."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from statecharts import stepper
from statecharts.admin.actions import (
    MAX_BULK_ROWS,
    ConfirmRow,
    confirm_action,
    confirmed,
    too_many,
)
from statecharts.admin.bases import ReadOnlyAdmin
from statecharts.admin.display import compact_date, short_session_id
from statecharts.admin.forms import GateText
from statecharts.admin.steps import caller_context
from statecharts.exceptions import InvalidInput
from statecharts.models import OutboxMessage
from statecharts.models.outbox import OutboxStatus
from statecharts.operations.inspection import title_of


class RetryForm(forms.Form):
    """What a retry asks: why (recorded in each sender's history, with who asked)."""

    reason = GateText(
        max_length=stepper.OUTBOX_RETRY_REASON_MAX_LENGTH,
        help_text="Why: recorded with the retry in each sender's history.",
    )


@admin.register(OutboxMessage)
class OutboxMessageAdmin(ReadOnlyAdmin):
    list_display = ["id", "sender_title", "target", "event_name", "status", "created_at"]
    list_filter = ["status"]
    search_fields = ["target_session_id", "sender__session_id"]
    list_select_related = ["sender__chart"]
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
        form = RetryForm(request.POST) if confirmed(request) else RetryForm()
        if not confirmed(request) or not form.is_valid():
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
                form=form,
            )
        try:
            context = caller_context(request)
            for message in retryable:
                stepper.retry_message(
                    message.pk, reason=form.cleaned_data["reason"], caller_context=context
                )
        except InvalidInput as exc:  # (a bad X-Caller-Context header; the form checked the rest)
            self.message_user(request, f"Nothing was retried: {exc}", messages.ERROR)
            return None
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

    @admin.display(description="sender", ordering="sender_id")
    def sender_title(self, message: OutboxMessage) -> SafeString:
        url = reverse("admin:statecharts_execution_change", args=[message.sender_id])
        return format_html(
            '<a href="{}" title="{}">{}</a>',
            url,
            message.sender.session_id,
            title_of(message.sender),
        )

    # Shortened, the whole in the title (a 32-character id does not fit the list).
    @admin.display(description="target session id", ordering="target_session_id")
    def target(self, message: OutboxMessage) -> SafeString:
        return short_session_id(message.target_session_id)

    @admin.display(description="created", ordering="created")
    def created_at(self, message: OutboxMessage) -> SafeString | None:
        return compact_date(message.created)

    @admin.display(description="event")
    def event_name(self, message: OutboxMessage) -> str:
        return str(message.event.get("name", ""))
