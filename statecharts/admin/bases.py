"""The bases every admin of the project builds on (the timers, invocations and routes apps'
too): a changelist that refuses NUL characters in its queries, views outside the per-request
transaction, and read-only admins for machine-owned rows."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern


class TextOnlyQueries(admin.ModelAdmin):
    """A changelist whose search or filters hold a NUL character drops them, with a message:
    no text column of PostgreSQL can hold one, and Django's admin would send it to the
    database (a server error) instead of answering the person who typed it.

    Every view of these admins is outside ``ATOMIC_REQUESTS``' per-request transaction: their
    forms and actions step executions, and the stepper commits each step itself
    (``transaction.atomic(durable=True)``), which cannot nest in another transaction.

    Its pages load ``statecharts/admin.css``: the rules that let the lists fit a 1280 px
    window."""

    class Media:
        css = {"all": ["statecharts/admin.css"]}

    @property
    def urls(self) -> list[URLPattern]:
        patterns = self.get_urls()
        for pattern in patterns:
            pattern.callback._non_atomic_requests = set(settings.DATABASES)  # type: ignore[attr-defined]
        return patterns

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        bad = [
            key
            for key, values in request.GET.lists()
            if "\x00" in key or any("\x00" in value for value in values)
        ]
        if not bad:
            return super().changelist_view(request, extra_context)
        kept = request.GET.copy()
        for key in bad:
            del kept[key]
        names = ", ".join(repr(key.replace("\x00", "\\0")[:40]) for key in bad)
        messages.error(request, f"Ignored {names}: a search or filter cannot hold a NUL character.")
        return HttpResponseRedirect(f"{request.path}?{kept.urlencode()}")


class ReadOnlyAdmin(TextOnlyQueries):
    """Machine-owned rows: viewable, never edited or deleted by hand."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
