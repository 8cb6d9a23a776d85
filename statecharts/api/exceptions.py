"""API errors beyond DRF's own: a conflict with the execution's state, a missing renderer, and
the API's column of the refusal table (``statecharts.policies.refusals``): :func:`refused`."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_lazy as _
from rest_framework import status
from rest_framework.exceptions import APIException, ValidationError

from statecharts.policies import refusals
from statecharts.policies.refusals import Refusal


class Conflict(APIException):
    """The request is well formed but the execution's state refuses it (409).

    Raised for an input to a finished execution (recorded in its history as ``discarded``),
    for one that needs migration (recorded as ``refused``) and for a business key in use.
    """

    status_code = status.HTTP_409_CONFLICT
    default_detail = _("The request conflicts with the current state of the resource.")
    default_code = "conflict"


class DiagramUnavailable(APIException):
    """``statecharts.diagram`` is not installed in this deployment."""

    status_code = status.HTTP_501_NOT_IMPLEMENTED
    default_detail = _("The diagram renderer (statecharts.diagram) is not available.")
    default_code = "diagram_unavailable"


class Refused(APIException):
    """A refusal from the stepper, answered as the refusal table says
    (``statecharts.policies.refusals``:
    its ``api`` status; the body has ``detail`` and ``reason``, and ``status`` when the
    execution's is known)."""

    def __init__(self, refused: Refusal, **extra: Any) -> None:
        self.status_code = refused.row.api
        super().__init__({**refused.body(), **extra}, code=refused.reason)


# Fields a request names otherwise than the stepper's request does (a header).
API_NAMES = {"idempotency_key": "Idempotency-Key"}


def refused(error: BaseException, *, status: str = "", **extra: Any) -> APIException | None:
    """The API's answer to a refusal (None: not one the table names, let it through). Input
    refused is a 400 by field (the request's names: ``API_NAMES``); the rest, the row's
    status with the body DRF clients already read (403: ``detail`` and ``reasons``; 409 for a
    business key: ``{"business_key": [...]}``; 422 for an Idempotency-Key reused)."""
    refusal = refusals.refusal(error, status=status)
    if refusal is None:
        return None
    reason = refusal.reason
    if reason is refusals.Reason.INVALID_INPUT:
        fields: dict[str, list[str]] = {}
        for problem in refusal.problems:
            name = API_NAMES.get(problem.field, problem.field)
            text = str(problem)
            if name != problem.field:
                text = name + text[len(problem.field) :]
            fields.setdefault(name, []).append(text)
        return ValidationError(fields)
    if reason is refusals.Reason.BUSINESS_KEY_IN_USE:
        conflict = Conflict({"business_key": [refusal.detail], "reason": reason})
        return conflict
    return Refused(refusal, **extra)
