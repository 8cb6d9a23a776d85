"""The routes app's part of the REST API (registered in ``RoutesConfig.ready()``).

- ``/api/route-deliveries/`` and ``/api/route-deliveries/{id}/``: the delivery ledger,
  read-only, filtered by ``execution``, ``route`` and ``status``;
- ``POST /api/route-deliveries/{id}/mark-delivered/`` and ``.../mark-failed/``
  (``{"reason": ...}``): an operator's record of an in-doubt delivery's fate
  (``routes.operating``; ``routes.mark_delivered_routedelivery``, ...);
- ``route_deliveries`` in the execution detail: its newest deliveries, from the same
  read-model section as the admin's panel;
- ``/api/basichttp-addresses/`` and ``/api/basichttp-addresses/{execution id}/``: when each
  execution's Basic HTTP address was made and rotated (never the address), and
  ``POST /api/basichttp-addresses/{execution id}/rotate/`` (``{"reason": ...}``) to rotate it
  (``routes.rotate_address``; ``routes.addresses``).
"""

from __future__ import annotations

from typing import Any

import django_filters
from drf_spectacular.utils import (
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    extend_schema_view,
)
from rest_framework import mixins, serializers
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from routes import operating
from routes.addresses import REASON_MAX_LENGTH, NoAddress, RotationNotPermitted, rotate
from routes.conf import route_settings
from routes.models import DeliveryStatus, InboundAddress, RouteDelivery
from statecharts import stepper
from statecharts.api.filters import IntegerFilter
from statecharts.api.operating import OperatorActions, api_caller_context, operator_action
from statecharts.api.serializers import NAMESPACE, StrictInput, execution_view
from statecharts.api.views import APIViewSet
from statecharts.exceptions import InvalidInput
from statecharts.models import Execution
from statecharts.operations.inspection import Unreadable


class RouteDeliverySerializer(serializers.ModelSerializer[RouteDelivery]):
    url = serializers.HyperlinkedIdentityField(view_name=f"{NAMESPACE}:route-delivery-detail")
    execution = serializers.IntegerField(source="execution_id", read_only=True)
    in_doubt = serializers.SerializerMethodField(
        help_text="Claimed more than ROUTE_IN_DOUBT_SECONDS ago and never settled: the action "
        "may or may not have happened (it is not retried)."
    )

    class Meta:
        model = RouteDelivery
        fields = [
            "id", "url", "key", "execution", "route", "send_type", "target", "send_id",
            "event_name", "delayed", "status", "in_doubt", "reason", "attempts", "retry_at",
            "created", "settled",
        ]  # fmt: skip
        read_only_fields = fields

    def get_in_doubt(self, delivery: RouteDelivery) -> bool:
        return is_in_doubt(delivery, route_settings.now())


def is_in_doubt(delivery: RouteDelivery, now: Any) -> bool:
    seconds = route_settings.ROUTE_IN_DOUBT_SECONDS
    return delivery.status == DeliveryStatus.CLAIMED and (
        (now - delivery.created).total_seconds() > seconds
    )


class RouteDeliveryFilter(django_filters.FilterSet):
    execution = IntegerFilter(field_name="execution_id")
    route = django_filters.CharFilter()
    status = django_filters.ChoiceFilter(choices=DeliveryStatus.choices)

    class Meta:
        model = RouteDelivery
        fields = ["execution", "route", "status"]


class MarkRequestSerializer(StrictInput):  # unknown top-level fields: a 400
    reason = serializers.CharField(
        max_length=operating.REASON_MAX_LENGTH,
        help_text="What the operator found at the destination (recorded in the history).",
    )


class MarkAnswerSerializer(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.IntegerField()
    outcome = serializers.CharField(help_text="delivered or failed")


@extend_schema_view(
    list=extend_schema(summary="List route deliveries (the delivery ledger)"),
    retrieve=extend_schema(summary="A route delivery"),
)
class RouteDeliveryViewSet(
    OperatorActions, mixins.ListModelMixin, mixins.RetrieveModelMixin, APIViewSet
):
    """The delivery ledger: one row per route send's idempotency key (docs/routes.md); an
    operator may record the fate of one in doubt (``mark-delivered``, ``mark-failed``)."""

    queryset = RouteDelivery.objects.all()
    serializer_class = RouteDeliverySerializer
    filterset_class = RouteDeliveryFilter
    action_permissions = {name: [permission] for name, permission in operating.PERMISSIONS.items()}

    def act(self, name: str, row_id: int, values: dict[str, Any], context: dict[str, Any]) -> str:
        return operating.mark(row_id, name, reason=values["reason"], caller_context=context)

    mark_delivered = operator_action(
        "mark_delivered",
        url_path="mark-delivered",
        summary="Mark a delivery in doubt delivered (an operator's record)",
        body=MarkRequestSerializer,
        answer=MarkAnswerSerializer,
    )
    mark_failed = operator_action(
        "mark_failed",
        url_path="mark-failed",
        summary="Mark a delivery in doubt failed (an operator's record)",
        body=MarkRequestSerializer,
        answer=MarkAnswerSerializer,
    )


@extend_schema_field(RouteDeliverySerializer(many=True))
class RouteDeliveriesField(serializers.Field):  # type: ignore[type-arg]
    """The execution's newest route deliveries."""

    def __init__(self) -> None:
        super().__init__(
            source="*",
            read_only=True,
            help_text="The route sends of this execution, newest first (docs/routes.md).",
        )

    def to_representation(self, execution: Any) -> list[dict[str, Any]]:
        section = execution_view(self, execution).sections.get("routes")
        if section is None or isinstance(section, Unreadable):
            return []
        rows = [row.delivery for row in section.deliveries]
        return list(RouteDeliverySerializer(rows, many=True, context=self.context).data)


# ---- Basic HTTP addresses (routes.addresses): their rotations, and rotating one ------------


class InboundAddressSerializer(serializers.ModelSerializer[InboundAddress]):
    """An execution's Basic HTTP address as the API shows it: never the address or its
    nonce, only when it was made and rotated."""

    execution = serializers.IntegerField(source="execution_id", read_only=True)

    class Meta:
        model = InboundAddress
        fields = ["execution", "base_url", "created", "rotated", "rotations"]
        read_only_fields = fields


class RotateRequestSerializer(StrictInput):  # unknown top-level fields: a 400, as elsewhere
    reason = serializers.CharField(
        max_length=REASON_MAX_LENGTH,
        allow_blank=False,
        trim_whitespace=False,
        help_text="Why (recorded in the execution's history with the user).",
    )

    def validate_reason(self, value: str) -> str:
        try:
            stepper.admit(stepper.OperatorRequest(reason=value, max_length=REASON_MAX_LENGTH))
        except InvalidInput as exc:
            raise serializers.ValidationError(str(exc.problems[0].message)) from None
        return value


class RotationSerializer(serializers.Serializer):  # type: ignore[type-arg]
    execution = serializers.IntegerField()
    seq = serializers.IntegerField(help_text="The history entry that records the rotation.")
    disposition = serializers.CharField(
        help_text="applied; discarded or refused when the execution cannot take inputs (its "
        "earlier addresses are revoked all the same)."
    )
    rotations = serializers.IntegerField()


_BIGINT = 2**63 - 1


@extend_schema_view(
    list=extend_schema(summary="List Basic HTTP addresses (their rotations, never the address)"),
    retrieve=extend_schema(summary="An execution's Basic HTTP address (its rotations)"),
)
class InboundAddressViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, APIViewSet):
    """Executions' Basic HTTP addresses (docs/basichttp.md): when each was made and rotated,
    never the address. ``POST {execution id}/rotate/`` gives the execution a new address and
    revokes every earlier one (``routes.rotate_address``)."""

    queryset = InboundAddress.objects.order_by("-created")
    serializer_class = InboundAddressSerializer
    lookup_value_regex = "[0-9]+"
    action_permissions = {"rotate": ["routes.rotate_address"]}

    @extend_schema(
        summary="Rotate an execution's Basic HTTP address",
        request=RotateRequestSerializer,
        responses={
            200: RotationSerializer,
            400: OpenApiResponse(description="No reason, or a bad one."),
            403: OpenApiResponse(description="Without routes.rotate_address."),
            404: OpenApiResponse(description="No such execution."),
            409: OpenApiResponse(description="The execution has no Basic HTTP address."),
        },
    )
    @action(detail=True, methods=["post"], filter_backends=[])
    def rotate(self, request: Request, pk: str | None = None) -> Response:
        number = int(pk or 0)
        execution = Execution.objects.filter(pk=number).first() if number <= _BIGINT else None
        if execution is None:
            raise NotFound("no such execution")
        body = RotateRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            context = api_caller_context(request)
            result = rotate(
                execution,
                reason=body.validated_data["reason"],
                user=request.user,
                caller_context=context,
            )
        except RotationNotPermitted as exc:
            raise PermissionDenied(str(exc)) from None
        except InvalidInput as exc:
            raise ValidationError({"detail": [str(exc)]}) from None
        except NoAddress as exc:
            return Response({"detail": str(exc)}, status=409)
        rotations = (
            InboundAddress.objects.filter(execution_id=execution.pk)
            .values_list("rotations", flat=True)
            .first()
        )
        return Response(
            RotationSerializer(
                {
                    "execution": execution.pk,
                    "seq": result.entry.seq,
                    "disposition": result.disposition,
                    "rotations": rotations or 0,
                }
            ).data
        )
