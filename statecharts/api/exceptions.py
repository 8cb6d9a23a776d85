"""API errors beyond DRF's own: a conflict with the execution's state, a missing renderer."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _
from rest_framework import status
from rest_framework.exceptions import APIException


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


class IdempotencyKeyReused(APIException):
    """The ``Idempotency-Key`` was used before for a request with other content (422): a key
    names one request; nothing was applied."""

    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY
    default_detail = _("This Idempotency-Key was used for a different request.")
    default_code = "idempotency_key_reused"
