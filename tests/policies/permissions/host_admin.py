"""A host project's admin for the tests: its own model (here auth's Group) with the
executions about each object (statecharts.admin.ExecutionsInline)."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth.models import Group
from django.urls import path

from statecharts.admin import ExecutionAdmin, ExecutionsInline
from statecharts.models import Execution

site = admin.AdminSite(name="admin")


@admin.register(Group, site=site)
class GroupAdmin(admin.ModelAdmin):
    inlines = [ExecutionsInline]


site.register(Execution, ExecutionAdmin)

urlpatterns = [path("admin/", site.urls)]
