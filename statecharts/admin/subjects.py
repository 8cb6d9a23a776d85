"""The admin both ways between an execution and the object it is about (``Execution.subject``).

- The execution's page shows its subject as a link to the object's admin page
  (:func:`subject_link`; the statecharts admin uses it).
- A host shows the executions of its own objects by adding :class:`ExecutionsInline` to its
  ``ModelAdmin``::

      from statecharts.admin import ExecutionsInline

      @admin.register(Order)
      class OrderAdmin(admin.ModelAdmin):
          inlines = [ExecutionsInline]

  The inline is read-only (executions change through the stepper only); each row links to
  the execution's page, where events are sent.
"""

from __future__ import annotations

from typing import Any

from django.contrib.contenttypes.admin import GenericTabularInline
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html

from statecharts.models import Execution


def subject_link(execution: Execution) -> str:
    """The subject's title, linked to its admin page when it has one; "" without a subject."""
    if execution.subject_content_type_id is None:
        return ""
    content_type = execution.subject_content_type
    subject = execution.subject
    if subject is None:
        return f"{content_type.app_label}.{content_type.model} {execution.subject_object_id} " \
            "(deleted)"
    try:
        url = reverse(
            f"admin:{content_type.app_label}_{content_type.model}_change",
            args=[execution.subject_object_id],
        )
    except NoReverseMatch:  # the host's admin does not show that model
        return str(subject)
    return format_html('<a href="{}">{}</a>', url, subject)


class ExecutionsInline(GenericTabularInline):
    """The executions about an object, newest first, read-only, each linked to its page."""

    model = Execution
    ct_field = "subject_content_type"
    ct_fk_field = "subject_object_id"
    fields = ["chart", "status", "where", "business_key", "created"]
    readonly_fields = fields
    extra = 0
    max_num = 0
    can_delete = False
    show_change_link = True
    ordering = ["-created", "-id"]
    verbose_name = "execution about this object"
    verbose_name_plural = "executions about this object"

    def where(self, execution: Execution) -> str:
        configuration = execution.configuration
        return ", ".join(configuration) if isinstance(configuration, list) else ""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.has_perm("statecharts.view_execution"))
