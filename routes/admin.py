"""The delivery ledger in the admin: read-only (machine-owned rows), "in doubt" shown."""

from __future__ import annotations

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from routes.conf import route_settings
from routes.models import DeliveryStatus, RouteDelivery
from statecharts.admin import ReadOnlyAdmin


@admin.register(RouteDelivery)
class RouteDeliveryAdmin(ReadOnlyAdmin):
    list_display = [
        "id", "route", "event_name", "target", "execution_link", "send_id", "delayed",
        "shown_status", "reason", "created",
    ]  # fmt: skip
    list_filter = ["status", "route", "delayed"]
    search_fields = ["key", "target", "send_id", "=execution__id"]
    ordering = ["-id"]

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
