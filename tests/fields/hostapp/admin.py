from django.contrib import admin

from statecharts.admin import StatechartFieldAdminMixin
from tests.fields.hostapp.models import Order, Ticket


@admin.register(Order)
class OrderAdmin(StatechartFieldAdminMixin, admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["number", "total"]


@admin.register(Ticket)
class TicketAdmin(StatechartFieldAdminMixin, admin.ModelAdmin):  # type: ignore[type-arg]
    fieldsets = [(None, {"fields": ["title"]})]
