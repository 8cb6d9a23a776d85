"""What the routes app adds to the statecharts app's displays (``statecharts`` never imports
``routes``): the read model's ``routes`` section, the admin page's panel, the API's
``route_deliveries`` field and ``/api/route-deliveries/`` endpoints, and the lines of
``statechart show``; and the ``basichttp_address`` section (whether the execution has a
Basic HTTP address, its rotations: never the address), its panel with the rotate form, and
``/api/basichttp-addresses/`` (``{id}/rotate/``)."""

from __future__ import annotations

from typing import Any

from routes.addresses import AddressState, read_address
from routes.inspection import read_routes, routes_document, routes_lines
from statecharts import extensions

APP = "routes"


def _field() -> Any:
    from routes.api import RouteDeliveriesField

    return RouteDeliveriesField()


def _viewset() -> Any:
    from routes.api import RouteDeliveryViewSet

    return RouteDeliveryViewSet


def _address_viewset() -> Any:
    from routes.api import InboundAddressViewSet

    return InboundAddressViewSet


def register() -> None:
    extensions.register(
        extensions.Section(
            app=APP, name="routes", read=read_routes, document=routes_document,
            lines=routes_lines,
        ),
        extensions.Panel(
            app=APP,
            section="routes",
            title="Route deliveries",
            template="routes/admin/routes_panel.html",
            order=30,
        ),
        extensions.ExecutionField(app=APP, name="route_deliveries", field=_field),
        # The Basic HTTP address's story (rotations), never the address (routes.addresses).
        extensions.Section(
            app=APP, name="basichttp_address", read=read_address,
            document=AddressState.document, lines=AddressState.lines,
        ),
        extensions.Panel(
            app=APP,
            section="basichttp_address",
            title="Basic HTTP address",
            template="routes/admin/address_panel.html",
            order=31,
        ),
        extensions.Endpoint(
            app=APP,
            prefix="basichttp-addresses",
            basename="basichttp-address",
            viewset=_address_viewset,
        ),
        extensions.Endpoint(
            app=APP,
            prefix="route-deliveries",
            basename="route-delivery",
            viewset=_viewset,
            enum_names={"RouteDeliveryStatusEnum": "routes.models.DeliveryStatus"},
        ),
    )
