"""An operator's action on one row of an app's table, as the API answers it: the base the
timers, routes and invocations apps build their action views on (``fire-now``,
``mark-delivered``, ``retry-now``, ...). This module knows none of those apps: each viewset
names its actions (:func:`operator_action`) and does them (:meth:`OperatorActions.act`, with
its app's ``operating`` module).

One path for every action (:meth:`OperatorActions.operate`):

1. the body is checked by the action's serializer (a 400 by field: no reason, a reason too
   long, an unknown field);
2. the caller context is read from the request (``statecharts.policies.attribution``, the
   API's door: the user, X-Caller-Context, X-Request-ID, traceparent; a 400 naming the
   header when it is bad);
3. the row's id from the URL (not a number: a 404);
4. the viewset's :meth:`OperatorActions.act` does the action (each is one step of the
   execution it touches, under its lock, recorded with the operator and the reason); a
   refusal is answered as the refusal table says (``statecharts.policies.refusals``: 404 for
   a row gone, 409 for a row whose state does not allow the action, 400 for a reason the
   gate refuses); what the table does not name goes through (:meth:`OperatorActions.failed`
   may answer an app's own failure first);
5. the answer is ``{"id": ..., "outcome": ...}`` (200).

The action's permission is the viewset's ``action_permissions`` (checked before the view
runs, ``statecharts.api.permissions``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from statecharts import stepper
from statecharts.api.exceptions import refused
from statecharts.policies import attribution


def api_caller_context(request: Request) -> dict[str, Any]:
    """The request's caller context (the API's door), checked by the stepper's gate; a bad
    X-Caller-Context header is ``InvalidInput`` (answered as a 400 naming it)."""
    asked = stepper.CallerContextRequest(
        door=attribution.Door.API, headers=request.headers, user=request.user
    )
    context: dict[str, Any] = stepper.admit(asked)
    return context


class OutsideRequestTransactions:
    """A viewset whose views never run inside ``ATOMIC_REQUESTS``' per-request transaction:
    the stepper (and each operator action) commits its own transaction
    (``transaction.atomic(durable=True)``), which cannot nest in another."""

    @classmethod
    def as_view(cls, actions: Any = None, **initkwargs: Any) -> Callable[..., Any]:
        view = super().as_view(actions, **initkwargs)  # type: ignore[misc]
        view._non_atomic_requests = set(settings.DATABASES)
        return view  # type: ignore[no-any-return]


class OperatorActions(OutsideRequestTransactions):
    """A mixin for an ``APIViewSet`` whose rows take operator actions: each action's view
    (made by :func:`operator_action`) calls :meth:`operate`, which calls :meth:`act`. Its
    views run outside any request transaction (:class:`OutsideRequestTransactions`)."""

    def act(self, name: str, row_id: int, values: dict[str, Any], context: dict[str, Any]) -> str:
        """Do the action ``name`` on the row ``row_id``: ``values`` is the checked body
        (``reason`` and the action's other fields), ``context`` the caller context; returns
        the outcome (one word: "cancelled", "delivered")."""
        raise NotImplementedError(f"{type(self).__name__} does not do {name!r}")

    def operate(
        self, request: Request, pk: str | None, name: str, body: type[serializers.Serializer[Any]]
    ) -> Response:
        """Do the action ``name`` on the row ``pk`` (see the module docstring for the path)."""
        given = body(data=request.data)
        given.is_valid(raise_exception=True)
        values = dict(given.validated_data)
        try:
            context = api_caller_context(request)
            row_id = int(pk or "")
        except ValueError as exc:  # InvalidInput is a ValueError; so is a pk that is no number
            answer = refused(exc)
            if answer is None:
                raise NotFound() from exc
            raise answer from exc
        try:
            outcome = self.act(name, row_id, values, context)
        except Exception as exc:
            failure = self.failed(exc)
            if failure is not None:
                return failure
            answer = refused(exc)
            if answer is None:
                raise
            raise answer from exc
        return Response({"id": row_id, "outcome": outcome})

    def failed(self, error: Exception) -> Response | None:
        """The answer to an app's own failure the refusal table does not name (None: the
        table answers it, or it goes through). The timers app answers a fire now whose
        delivery failed with a 502."""
        return None


def operator_action(
    name: str,
    *,
    body: type[serializers.Serializer[Any]],
    answer: Any,
    summary: str,
    url_path: str | None = None,
) -> Any:
    """The view of the action ``name`` (``POST {id}/<url_path or name>/``): the body
    ``body`` checked, then :meth:`OperatorActions.act` through
    :meth:`OperatorActions.operate`; its OpenAPI entry has ``summary``, the request ``body``
    and the response ``answer``. Assign it to a class attribute called ``name``::

        cancel = operator_action("cancel", body=..., answer=..., summary=...)
    """

    def view(self: OperatorActions, request: Request, pk: str | None = None) -> Response:
        return self.operate(request, pk, name, body)

    view.__name__ = view.__qualname__ = name  # the URL's name (DRF reads it from the function)
    routed = action(detail=True, methods=["post"], url_path=url_path, filter_backends=[])(view)
    return extend_schema(summary=summary, request=body, responses=answer)(routed)
