"""The admin's doors into the stepper: who acts (:func:`caller_context`), how a refusal or a
form's errors come back (as messages, :func:`report_refusal`, :func:`report_form_errors`),
and the execution page's step views, sending an event and cancelling, both made by one helper
(:func:`step_view`).

No view here changes an execution itself: each builds a request and gives it to
``stepper.submit``, exactly like the API and the management command.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.forms import Form
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import URLPattern, path, reverse
from django.views.decorators.http import require_POST

from statecharts import stepper
from statecharts.admin.forms import CancelForm, SendEventForm
from statecharts.models import Execution
from statecharts.operations.inspection import where
from statecharts.policies import attribution, refusals


def caller_context(request: HttpRequest) -> dict[str, Any]:
    """Who acts in the admin (``statecharts.policies.attribution``): the user, the request's id and
    trace context, and an X-Caller-Context header if a proxy sends one. Raises
    ``InvalidInput`` for a bad header (reported as a message; nothing is applied)."""
    user = getattr(request, "user", None)
    door = attribution.Door.ADMIN
    asked = stepper.CallerContextRequest(door=door, headers=request.headers, user=user)
    context: dict[str, Any] = stepper.admit(asked)
    return context


def report_refusal(request: HttpRequest, error: BaseException, doing: str) -> None:
    """A refusal as the admin answers it (``statecharts.policies.refusals``): the form's errors, one
    message per field, each problem with its path; or one line (``"Not sent: ..."`` when the
    user may not). Re-raises what no row names (a bug: a 500, logged)."""
    refused = refusals.refusal(error)
    if refused is None:
        raise error
    if refused.problems:
        for problems in refused.by_field().values():
            messages.error(request, "; ".join(problems))
        return
    not_permitted = refused.reason is refusals.Reason.NOT_PERMITTED
    messages.error(request, refused.message(doing if not_permitted else None))


def report_form_errors(request: HttpRequest, form: Form) -> None:
    """An action's form lives on another page: its errors come back as messages."""
    for field, errors in form.errors.items():
        messages.error(request, f"{field}: {' '.join(errors)}")


# What a step view says once the stepper has applied its request: a message level and text.
Said = Callable[[stepper.StepResult, dict[str, Any]], tuple[int, str]]


def step_view(
    request: HttpRequest,
    execution_id: int,
    form_class: type[Form],
    make: Callable[..., stepper.Request],
    *,
    refused_as: str,
    said: Said,
    fields: Callable[[dict[str, Any]], dict[str, Any]] = lambda cleaned: {},
) -> HttpResponse:
    """One step of an execution from a form of its page, posted: the user must have
    ``statecharts.change_execution`` (else 403) and the execution exist (else 404); the form
    (``form_class``) is read from the post, its errors come back as messages; then the stepper
    applies ``make(execution=..., **fields(cleaned data), caller_context=..., idempotency_key=
    the form's token, user=...)``. A refusal is answered as the refusal table says
    (``refused_as``: how its one line starts when the user may not, e.g. "Not sent"); a form
    posted again (the same token) says so; else the message :data:`Said` gives. Always back to
    the execution's page."""
    if not request.user.has_perm("statecharts.change_execution"):
        raise PermissionDenied
    get_object_or_404(Execution, pk=execution_id)
    back = HttpResponseRedirect(reverse("admin:statecharts_execution_change", args=[execution_id]))
    form = form_class(request.POST)
    if not form.is_valid():
        report_form_errors(request, form)
        return back
    try:
        step = make(
            execution=execution_id,
            **fields(form.cleaned_data),
            caller_context=caller_context(request),
            idempotency_key=form.cleaned_data["idempotency_token"],
            user=request.user,
        )
        result = stepper.submit(step)
    except Exception as exc:  # the refusal table says what each refusal answers
        report_refusal(request, exc, refused_as)
        return back
    if result.repeated:
        messages.info(request, f"This form was already posted (step {result.entry.seq}).")
        return back
    level, text = said(result, form.cleaned_data)
    messages.add_message(request, level, text)
    return back


def said_sent(result: stepper.StepResult, cleaned: dict[str, Any]) -> tuple[int, str]:
    execution = result.execution
    level = messages.SUCCESS if result.applied and result.handled else messages.WARNING
    # An event no transition took was consumed all the same (SCXML): say so.
    unhandled = "" if result.handled else ", unhandled: no transition selected it"
    # "Sent ..." first: the admin capitalises a message's first letter, and an event
    # name must read as it is spelled.
    return (
        level,
        f"Sent {cleaned['name']}: {result.disposition}{unhandled} "
        f"({where(execution.status, execution.configuration)})",
    )


def said_cancelled(result: stepper.StepResult, cleaned: dict[str, Any]) -> tuple[int, str]:
    execution = result.execution
    return (
        messages.SUCCESS,
        f"Cancel: {result.disposition} ({where(execution.status, execution.configuration)})",
    )


class StepViews(admin.ModelAdmin):  # type: ignore[type-arg]
    """The execution page's step views, each at its own URL, POST only: sending an event
    (``statecharts_execution_send``) and cancelling (``statecharts_execution_cancel``)."""

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view
        urls = [
            path(
                "<int:execution_id>/send/",
                view(require_POST(self.send_view)),
                name="statecharts_execution_send",
            ),
            path(
                "<int:execution_id>/cancel/",
                view(require_POST(self.cancel_view)),
                name="statecharts_execution_cancel",
            ),
        ]
        return urls + super().get_urls()

    def send_view(self, request: HttpRequest, execution_id: int) -> HttpResponse:
        return step_view(
            request,
            execution_id,
            SendEventForm,
            stepper.EventRequest,
            fields=lambda cleaned: {"name": cleaned["name"], "data": cleaned["data"]},
            refused_as="Not sent",
            said=said_sent,
        )

    def cancel_view(self, request: HttpRequest, execution_id: int) -> HttpResponse:
        return step_view(
            request,
            execution_id,
            CancelForm,
            stepper.CancelRequest,
            refused_as="Not cancelled",
            said=said_cancelled,
        )
