"""Erasing the personal data of selected executions (``statecharts.operations.erasure``),
an action of the executions' list: the confirmation page lists each execution and the
children it invoked (erased with it), and offers to cancel those still running first."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse

from statecharts.admin.actions import (
    MAX_BULK_ROWS,
    ConfirmRow,
    confirm_action,
    confirmed,
    too_many,
)
from statecharts.admin.steps import caller_context
from statecharts.exceptions import InvalidInput
from statecharts.models import Execution
from statecharts.operations import erasure
from statecharts.operations.inspection import title_of


class EraseForm(forms.Form):
    reason = forms.CharField(
        max_length=1000,
        required=False,
        label="Reason",
        help_text="Recorded in each execution's history (e.g. the request's reference).",
    )
    cancel_running = forms.BooleanField(
        required=False,
        label="Cancel those still running first",
        help_text="Each is cancelled in its own step (its onexit handlers run), then erased.",
    )


class EraseAction(admin.ModelAdmin):  # type: ignore[type-arg]
    """The executions' action ``erase_selected`` (permission ``statecharts.erase_execution``)."""

    def has_erase_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("statecharts.erase_execution"))

    @admin.action(
        description="Erase the personal data of the selected executions", permissions=["erase"]
    )
    def erase_selected(
        self, request: HttpRequest, queryset: QuerySet[Execution]
    ) -> HttpResponse | None:
        ids = list(queryset.order_by("pk").values_list("pk", flat=True)[: MAX_BULK_ROWS + 1])
        if too_many(self, request, ids):
            return None
        form = EraseForm(request.POST if confirmed(request) else None)
        if not confirmed(request) or not form.is_valid():
            everything = erasure.family(ids)
            found = Execution.objects.filter(pk__in=everything).select_related("chart")
            rows = [
                ConfirmRow(
                    title_of(e),
                    ("invoked child; " if e.pk not in ids else "")
                    + (e.status if e.is_terminal else f"{e.status}: still running"),
                )
                for e in found.order_by("pk")
            ]
            running = sum(1 for e in found if not e.is_terminal)
            warning = (
                "This cannot be undone. Their datamodel, donedata, metadata and business "
                "keys, and the data of every input, message, timer and invocation of theirs "
                "are removed; each gets an 'erased' entry in its history."
            )
            if running:
                warning += (
                    f" {running} of them are still running: they are erased only if you "
                    "choose to cancel them first."
                )
            return confirm_action(
                self,
                request,
                action="erase_selected",
                title="Erase personal data",
                summary=f"Erase the personal data of {len(everything)} execution(s) "
                f"({len(everything) - len(ids)} of them invoked by the selected ones)?",
                rows=rows,
                pks=ids,
                button="Yes, erase",
                form=form,
                warning=warning,
            )
        try:
            report = erasure.erase(
                ids,
                reason=form.cleaned_data["reason"],
                cancel=form.cleaned_data["cancel_running"],
                requested_by=request.user.get_username(),
                caller_context=caller_context(request),
            )
        except InvalidInput as exc:
            self.message_user(request, f"Nothing was erased: {exc}", messages.ERROR)
            return None
        except erasure.ErasureRefused as exc:
            self.message_user(request, f"Nothing was erased: {exc}", messages.ERROR)
            return None
        self.message_user(request, f"Erasure: {report}.")
        return None
