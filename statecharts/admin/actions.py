"""Bulk actions with a confirmation page: nothing is done until the page listing what the
action will do is posted back; a selection larger than :data:`MAX_BULK_ROWS` is refused with
a message (each row is done on its own, within the request)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.forms import Form
from django.http import HttpRequest
from django.template.response import TemplateResponse

# Rows one bulk action takes at most: each is a step (or a short transaction) of its own, done
# within the request.
MAX_BULK_ROWS = 500


@dataclass(frozen=True, slots=True)
class ConfirmRow:
    label: str
    note: str = ""


def confirmed(request: HttpRequest) -> bool:
    """Whether this is the confirmation page's own post (not the changelist's first one)."""
    return request.POST.get("post") == "yes"


def confirm_action(
    model_admin: admin.ModelAdmin,  # type: ignore[type-arg]
    request: HttpRequest,
    *,
    action: str,
    title: str,
    summary: str,
    rows: Sequence[ConfirmRow],
    pks: Sequence[int],
    button: str,
    form: Form | None = None,
    warning: str = "",
) -> TemplateResponse:
    """The confirmation page of the bulk action ``action``: nothing is done until it is posted
    back (with ``post=yes``, the same selected ``pks`` and the form's fields)."""
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.model._meta,
        "title": title,
        "subtitle": None,
        "summary": summary,
        "warning": warning,
        "rows": rows,
        "pks": pks,
        "actionable": bool(pks),
        "action": action,
        "button": button,
        "form": form,
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        "media": model_admin.media,
    }
    request.current_app = model_admin.admin_site.name
    return TemplateResponse(request, "admin/statecharts/confirm_action.html", context)


def too_many(model_admin: admin.ModelAdmin, request: HttpRequest, rows: Sequence[Any]) -> bool:  # type: ignore[type-arg]
    if len(rows) <= MAX_BULK_ROWS:
        return False
    model_admin.message_user(
        request,
        f"Select at most {MAX_BULK_ROWS} rows for this action (each is done on its own): "
        "narrow the list with its filters.",
        messages.ERROR,
    )
    return True

