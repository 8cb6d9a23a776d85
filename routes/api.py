"""The routes app's part of the REST API (registered in ``RoutesConfig.ready()``).

- ``/api/route-deliveries/`` and ``/api/route-deliveries/{id}/``: the delivery ledger,
  read-only, filtered by ``execution``, ``route`` and ``status``;
- ``route_deliveries`` in the execution detail: its newest deliveries, from the same
  read-model section as the admin's panel.
"""

from __future__ import annotations

from typing import Any

import django_filters
from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_view
from rest_framework import mixins, serializers

from routes.conf import route_settings
from routes.models import DeliveryStatus, RouteDelivery
from statecharts.api.filters import IntegerFilter
from statecharts.api.serializers import NAMESPACE, execution_view
from statecharts.api.views import APIViewSet
from statecharts.inspection import Unreadable


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
            "event_name", "delayed", "status", "in_doubt", "reason", "created", "settled",
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


@extend_schema_view(
    list=extend_schema(summary="List route deliveries (the delivery ledger)"),
    retrieve=extend_schema(summary="A route delivery"),
)
class RouteDeliveryViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, APIViewSet):
    """The delivery ledger: one row per route send's idempotency key, read-only
    (docs/routes.md)."""

    queryset = RouteDelivery.objects.all()
    serializer_class = RouteDeliverySerializer
    filterset_class = RouteDeliveryFilter


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
