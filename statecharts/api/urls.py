"""URLs of the API. Mount under a prefix of your choice::

    path("api/", include("statecharts.api.urls"))

Names are in the ``statecharts_api`` namespace (``statecharts_api:execution-detail``).
"""

from __future__ import annotations

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.authtoken.views import obtain_auth_token
from rest_framework.permissions import IsAuthenticated
from rest_framework.routers import DefaultRouter

from statecharts import extensions
from statecharts.api import views
from statecharts.api.renderers import SVGRenderer
from statecharts.api.schema import SCHEMA_SETTINGS

app_name = "statecharts_api"

router = DefaultRouter()
router.register("charts", views.ChartViewSet, basename="chart")
router.register("executions", views.ExecutionViewSet, basename="execution")
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
    # POST username and password, get the token for "Authorization: Token <key>".
    path("auth/token/", obtain_auth_token, name="token"),
    path("", include(router.urls)),
]
