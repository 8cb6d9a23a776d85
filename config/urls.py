from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("statecharts.api.urls")),
    # Log in and out of the browsable API (session authentication).
    path("api-auth/", include("rest_framework.urls")),
]
