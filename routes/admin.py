"""The delivery ledger in the admin: read-only (machine-owned rows), "in doubt" shown; the
Basic HTTP addresses (their rotations, never the address), rotated one at a time from an
execution's page or in bulk from their list (``routes.rotate_address``)."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.views.decorators.http import require_POST

from routes import addresses, operating
from routes.conf import route_settings
from routes.models import DeliveryStatus, InboundAddress, RouteDelivery
from statecharts import stepper
from statecharts.admin import (
    MAX_BULK_ROWS,
    ConfirmRow,
    ReadOnlyAdmin,
    caller_context,
    confirm_action,
    confirmed,
    report_form_errors,
    too_many,
)
from statecharts.exceptions import InvalidInput
from statecharts.models import Execution
from statecharts.policies import refusals, validation


class MarkForm(forms.Form):
    """What marking an in-doubt delivery asks: why (what the operator found)."""

    reason = forms.CharField(
        max_length=operating.REASON_MAX_LENGTH,
        help_text="What you found at the destination: recorded in the execution's history.",
    )


@admin.register(RouteDelivery)
class RouteDeliveryAdmin(ReadOnlyAdmin):
    list_display = [
        "id", "route", "event_name", "target", "execution_link", "send_id", "delayed",
        "shown_status", "attempts", "reason", "created",
    ]  # fmt: skip
    list_filter = ["status", "route", "delayed"]
    search_fields = ["key", "target", "send_id", "=execution__id"]
    ordering = ["-id"]
    actions = ["mark_delivered", "mark_failed"]

    def has_mark_delivered_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm(operating.PERMISSIONS["mark_delivered"]))

    def has_mark_failed_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm(operating.PERMISSIONS["mark_failed"]))

    @admin.action(
        description="Mark the selected deliveries in doubt delivered",
        permissions=["mark_delivered"],
    )
    def mark_delivered(
        self, request: HttpRequest, queryset: QuerySet[RouteDelivery]
    ) -> HttpResponse | None:
        return self._mark(request, queryset, "mark_delivered")

    @admin.action(
        description="Mark the selected deliveries in doubt failed", permissions=["mark_failed"]
    )
    def mark_failed(
        self, request: HttpRequest, queryset: QuerySet[RouteDelivery]
    ) -> HttpResponse | None:
        return self._mark(request, queryset, "mark_failed")

    def _mark(
        self, request: HttpRequest, queryset: QuerySet[RouteDelivery], action: str
    ) -> HttpResponse | None:
        """Record the fate of each selected delivery in doubt (``routes.operating``), each
        in its own transaction; a count per outcome, one message per refused row."""
        chosen = list(queryset.order_by("pk")[: MAX_BULK_ROWS + 1])
        if too_many(self, request, chosen):
            return None
        fate = operating.MARKS[action]
        form = MarkForm(request.POST) if confirmed(request) else MarkForm()
        if not confirmed(request) or not form.is_valid():
            return confirm_action(
                self,
                request,
                action=action,
                title=f"Mark {fate}",
                summary=f"Record {len(chosen)} delivery(ies) in doubt as {fate}? This only "
                "records what you found at the destination: nothing is delivered again. "
                "Deliveries not in doubt are refused.",
                rows=[ConfirmRow(str(row), row.reason) for row in chosen],
                pks=[row.pk for row in chosen],
                button=f"Yes, mark {len(chosen)} {fate}",
                form=form,
            )
        try:
            context = caller_context(request)
        except validation.InvalidInput as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return None
        outcomes: dict[str, int] = {}
        for row in chosen:
            try:
                outcome = operating.mark(
                    row.pk, action, reason=form.cleaned_data["reason"], caller_context=context
                )
            except Exception as exc:  # the refusal table says what each refusal answers
                refused = refusals.refusal(exc)
                if refused is None:
                    raise
                outcome = str(refused.reason)
                self.message_user(request, f"{row}: {exc}", messages.ERROR)
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
        said = ", ".join(f"{n} {outcome}" for outcome, n in sorted(outcomes.items()))
        self.message_user(request, f"Mark {fate}: {said}.")
        return None

    @admin.display(description="execution", ordering="execution_id")
    def execution_link(self, delivery: RouteDelivery) -> SafeString:
        url = reverse("admin:statecharts_execution_change", args=[delivery.execution_id])
        return format_html('<a href="{}">{}</a>', url, delivery.execution_id)

    @admin.display(description="status", ordering="status")
    def shown_status(self, delivery: RouteDelivery) -> SafeString | str:
        now = route_settings.now()
        seconds = route_settings.ROUTE_IN_DOUBT_SECONDS
        if delivery.status == DeliveryStatus.CLAIMED and (
            (now - delivery.created).total_seconds() > seconds
        ):
            return format_html("<strong>{}</strong>", "in doubt")
        return str(delivery.status)


class RotateForm(forms.Form):
    reason = forms.CharField(
        max_length=addresses.REASON_MAX_LENGTH,
        label="Reason",
        help_text="Recorded in each execution's history with your name (e.g. the incident).",
    )

    def clean_reason(self) -> str:
        reason = self.cleaned_data["reason"]
        try:
            stepper.admit(
                stepper.OperatorRequest(reason=reason, max_length=addresses.REASON_MAX_LENGTH)
            )
        except InvalidInput as exc:
            raise forms.ValidationError(str(exc)) from None
        return str(reason)


@admin.register(InboundAddress)
class InboundAddressAdmin(ReadOnlyAdmin):
    """Executions' Basic HTTP addresses: when each was made and rotated, never the address or
    its nonce. Rotating needs ``routes.rotate_address``."""

    list_display = ["execution_link", "base_url", "created", "rotated", "rotations"]
    fields = ["execution_link", "base_url", "created", "rotated", "rotations"]
    readonly_fields = fields
    search_fields = ["=execution__id", "execution__session_id"]
    ordering = ["-created"]
    actions = ["rotate_selected"]

    @admin.display(description="execution", ordering="execution_id")
    def execution_link(self, address: InboundAddress) -> SafeString:
        url = reverse("admin:statecharts_execution_change", args=[address.execution_id])
        return format_html('<a href="{}">{}</a>', url, address.execution_id)

    def has_rotate_permission(self, request: HttpRequest) -> bool:
        return addresses.may_rotate(request.user)

    @admin.action(description="Rotate the selected addresses", permissions=["rotate"])
    def rotate_selected(
        self, request: HttpRequest, queryset: QuerySet[InboundAddress]
    ) -> HttpResponse | None:
        ids = list(
            queryset.order_by("pk").values_list("execution_id", flat=True)[: MAX_BULK_ROWS + 1]
        )
        if too_many(self, request, ids):
            return None
        form = RotateForm(request.POST if confirmed(request) else None)
        if not confirmed(request) or not form.is_valid():
            if confirmed(request):
                report_form_errors(request, form)
            rows = [
                ConfirmRow(f"execution {e.pk}", e.status)
                for e in Execution.objects.filter(pk__in=ids).order_by("pk")
            ]
            return confirm_action(
                self,
                request,
                action="rotate_selected",
                title="Rotate Basic HTTP addresses",
                summary=f"Give {len(ids)} execution(s) a new Basic HTTP address?",
                rows=rows,
                pks=ids,
                button="Rotate",
                form=form,
                warning="Every earlier address of theirs answers 403 from now on: whoever "
                "posts to one must be given the new one (the chart reads it in _ioprocessors).",
            )
        try:
            done, skipped = addresses.rotate_many(
                list(Execution.objects.filter(pk__in=ids).order_by("pk")),
                reason=form.cleaned_data["reason"],
                user=request.user,
                caller_context=caller_context(request),
            )
        except InvalidInput as exc:  # (a bad caller-context header)
            self.message_user(request, f"Not rotated: {exc}", messages.ERROR)
            return None
        self.message_user(request, f"Rotated {len(done)} address(es).", messages.SUCCESS)
        for execution, why in skipped:
            self.message_user(request, f"Execution {execution.pk}: {why}", messages.WARNING)
        return None

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view
        urls = [
            path(
                "rotate/<int:execution_id>/",
                view(require_POST(self.rotate_view)),
                name="routes_inboundaddress_rotate",
            )
        ]
        return urls + super().get_urls()

    def rotate_view(self, request: HttpRequest, execution_id: int) -> HttpResponse:
        """One execution's rotation, from the panel on its page."""
        if not addresses.may_rotate(request.user):
            raise PermissionDenied
        execution = get_object_or_404(Execution, pk=execution_id)
        back = HttpResponseRedirect(
            reverse("admin:statecharts_execution_change", args=[execution_id])
        )
        form = RotateForm(request.POST)
        if not form.is_valid():
            report_form_errors(request, form)
            return back
        try:
            result = addresses.rotate(
                execution,
                reason=form.cleaned_data["reason"],
                user=request.user,
                caller_context=caller_context(request),
            )
        except (addresses.NoAddress, InvalidInput) as exc:
            messages.error(request, f"Not rotated: {exc}")
            return back
        messages.success(
            request,
            f"Rotated: every earlier address answers 403 now (step {result.entry.seq}: "
            f"{result.disposition}).",
        )
        return back
