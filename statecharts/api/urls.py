"""URLs of the API. Mount under a prefix of your choice::

    path("api/", include("statecharts.api.urls"))

Names are in the ``statecharts_api`` namespace (``statecharts_api:execution-detail``).
No login or token endpoint: the host project chooses its own authentication (the demo site
mounts DRF's password-for-token view, throttled). No documentation page either: a site that
serves one (the demo site does, docs/installation.md shows how) names its URL
``statecharts-api-docs`` and the API root links it.
"""

from __future__ import annotations

import contextlib
from typing import Any

from django.urls import NoReverseMatch, include, path
from django.urls import reverse as django_reverse
from drf_spectacular.views import SpectacularAPIView
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.routers import APIRootView as RouterRootView
from rest_framework.routers import DefaultRouter

from statecharts import extensions
from statecharts.api import outbox, views
from statecharts.api.renderers import SVGRenderer
from statecharts.api.schema import SCHEMA_SETTINGS

app_name = "statecharts_api"
# The URL name of a readable documentation page, if the site serves one.
DOCS_URL_NAME = "statecharts-api-docs"


class APIRootView(RouterRootView):
    """The API's resources, its OpenAPI document (`schema`) and, when the site serves one,
    a readable documentation page of it (`docs`)."""

    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        response = super().get(request, *args, **kwargs)
        response.data["schema"] = reverse(f"{app_name}:schema", request=request)
        with contextlib.suppress(NoReverseMatch):  # the site serves no documentation page
            # Django's reverse: DRF's would carry ?format=json over to an HTML-only page.
            response.data["docs"] = request.build_absolute_uri(django_reverse(DOCS_URL_NAME))
        return response


router = DefaultRouter()
router.APIRootView = APIRootView
router.register("charts", views.ChartViewSet, basename="chart")
router.register("executions", views.ExecutionViewSet, basename="execution")
router.register("outbox", outbox.OutboxMessageViewSet, basename="outbox-message")
# Endpoints other apps contribute (the timers app: /timers/), see statecharts.extensions.
for endpoint in extensions.endpoints:
    router.register(endpoint.prefix, endpoint.viewset(), basename=endpoint.basename)

urlpatterns = [
    path(
        "charts/<int:pk>/diagram.svg",
        views.ChartViewSet.as_view({"get": "diagram"}, renderer_classes=[SVGRenderer]),
        name="chart-diagram",
    ),
    path(
        "executions/<int:pk>/diagram.svg",
        views.ExecutionViewSet.as_view({"get": "diagram"}, renderer_classes=[SVGRenderer]),
        name="execution-diagram",
    ),
    # The OpenAPI 3 document: YAML by default, JSON with ?format=json or
    # Accept: application/json. Like the rest of the API, for signed-in users only.
    path(
        "schema/",
        SpectacularAPIView.as_view(
            permission_classes=[IsAuthenticated], custom_settings=SCHEMA_SETTINGS
        ),
        name="schema",
    ),
    path("", include(router.urls)),
]
