"""The Basic HTTP inbound view mounted as a host would (tests/routes/test_basichttp_inbound)."""

from django.urls import include, path

urlpatterns = [path("scxml/basichttp/", include("routes.inbound"))]
