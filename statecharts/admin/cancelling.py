"""Cancelling and tracing selected executions, actions of the executions' list. Every cancel
is a step of its own (its onexit handlers run, its pending timers are discarded, its invoked
children cancelled), after a confirmation page; tracing is turned on or off under each
execution's lock and changes nothing it does."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from statecharts import stepper
from statecharts.admin.actions import (
    MAX_BULK_ROWS,
    ConfirmRow,
    confirm_action,
    confirmed,
    too_many,
)
from statecharts.admin.forms import CancelForm
from statecharts.admin.steps import caller_context
from statecharts.core import StatechartError
from statecharts.models import Execution
from statecharts.operations.inspection import title_of, where
from statecharts.policies import refusals


class CancelActions(admin.ModelAdmin):  # type: ignore[type-arg]
    """The executions' actions ``cancel_selected``, ``trace_selected`` and
    ``untrace_selected``, all three for whoever may cancel (``statecharts.change_execution``;
    each cancel checks ``CANCEL_PERMISSIONS`` again)."""

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("statecharts.change_execution"))

    @admin.action(description="Cancel the selected executions", permissions=["cancel"])
    def cancel_selected(
        self, request: HttpRequest, queryset: QuerySet[Execution]
    ) -> HttpResponse | None:
        executions = list(queryset.select_related("chart").order_by("pk")[: MAX_BULK_ROWS + 1])
        if too_many(self, request, executions):
            return None
        running = [e for e in executions if not e.is_terminal]
        if not confirmed(request):
            return self._confirm_cancel(request, executions, running)
        form = CancelForm(request.POST)
        token = form.cleaned_data["idempotency_token"] if form.is_valid() else None
        try:
            context = caller_context(request)
        except StatechartError as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return None
        outcomes: Counter[str] = Counter()
        for execution in running:
            outcome = self._cancel_one(request, execution, context, token)
            if outcome is not None:
                outcomes[outcome] += 1
        said = ", ".join(f"{n} {disposition}" for disposition, n in sorted(outcomes.items()))
        self.message_user(request, f"Cancel: {said or 'nothing was cancelled'}.")
        return None

    def _confirm_cancel(
        self,
        request: HttpRequest,
        executions: Sequence[Execution],
        running: Sequence[Execution],
    ) -> TemplateResponse:
        """The confirmation page: the running executions (to be cancelled), then the others
        (nothing to cancel)."""
        rows = [ConfirmRow(title_of(e), where(e.status, e.configuration)) for e in running]
        rows += [
            ConfirmRow(title_of(e), f"{e.status}: nothing to cancel")
            for e in executions
            if e.is_terminal
        ]
        return confirm_action(
            self,
            request,
            action="cancel_selected",
            title="Cancel executions",
            summary=f"Cancel {len(running)} execution(s)? Each is cancelled in a step of "
            "its own: its onexit handlers run, its pending timers are discarded and its "
            "invoked children cancelled.",
            rows=rows,
            pks=[e.pk for e in running],
            button=f"Yes, cancel {len(running)}",
            form=CancelForm(),
        )

    def _cancel_one(
        self,
        request: HttpRequest,
        execution: Execution,
        context: dict[str, Any],
        token: str | None,
    ) -> str | None:
        """Cancel one execution in a step of its own; what to count of it: its disposition,
        "already done" (the token's key was applied before) or "not permitted"; None for
        another refusal (each refusal is a message, in the refusal table's words)."""
        try:
            result = stepper.cancel(
                execution,
                caller_context=context,
                # One key per execution from the confirmation page's one token.
                idempotency_key=f"{token}:{execution.pk}" if token else None,
                user=request.user,
            )
        except Exception as exc:  # the refusal table says what each refusal answers
            refused = refusals.refusal(exc)
            if refused is None:
                raise
            # CANCEL_PERMISSIONS: left as it is
            if refused.reason is refusals.Reason.NOT_PERMITTED:
                outcome: str | None = "not permitted"
                doing = "not cancelled"
            else:
                outcome, doing = None, None
            self.message_user(
                request, f"{title_of(execution)}: {refused.message(doing)}", messages.ERROR
            )
            return outcome
        return "already done" if result.repeated else result.disposition

    @admin.action(description="Trace the steps of the selected executions", permissions=["cancel"])
    def trace_selected(self, request: HttpRequest, queryset: QuerySet[Execution]) -> None:
        self._trace(request, queryset, on=True)

    @admin.action(description="Stop tracing the selected executions", permissions=["cancel"])
    def untrace_selected(self, request: HttpRequest, queryset: QuerySet[Execution]) -> None:
        self._trace(request, queryset, on=False)

    def _trace(self, request: HttpRequest, queryset: QuerySet[Execution], *, on: bool) -> None:
        """Turn tracing on or off (``stepper.trace``, each under its execution's lock): from
        their next step, their timelines show the core's trace. Changes nothing they do."""
        ids = list(queryset.order_by("pk").values_list("pk", flat=True)[: MAX_BULK_ROWS + 1])
        if too_many(self, request, ids):
            return
        changed = sum(1 for pk in ids if stepper.trace(pk, on))
        what = "on" if on else "off"
        self.message_user(
            request, f"Tracing {what}: {changed} changed, {len(ids) - changed} already {what}."
        )

