"""The demo site's URLs: the library's admin and API, plus the site's own pages.

A host project mounts only the library's parts (docs/installation.md); the landing page, the
documents, the API docs page and the token endpoint are this site's choices.
"""

from django.contrib import admin
from django.contrib.auth.decorators import login_required
from django.urls import include, path
from drf_spectacular.views import SpectacularSwaggerView

from demo import views

urlpatterns = [
    path("", views.home, name="home"),
    path("docs/<str:name>", views.document, name="document"),
    path("admin/", admin.site.urls),
    # Before the API's include, so these paths are the site's, not the router's.
    path("api/auth/token/", views.ThrottledObtainAuthToken.as_view(), name="api-token"),
    # The API's OpenAPI document as a readable page (Swagger UI from drf-spectacular-sidecar,
    # served from this site, nothing from a CDN), for signed-in users: others are sent to
    # the admin's login. The API root links it by this URL name.
    path(
        "api/docs/",
        login_required(
            SpectacularSwaggerView.as_view(
                url_name="statecharts_api:schema", title="Statecharts API"
            )
        ),
        name="statecharts-api-docs",
    ),
    path("api/", include("statecharts.api.urls")),
    # Log in and out of the browsable API (session authentication).
    path("api-auth/", include("rest_framework.urls")),
]
