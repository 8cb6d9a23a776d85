"""The demo site's URLs with the Basic HTTP inbound view mounted as a host would
(tests/routes/test_basichttp_inbound.py)."""

from django.urls import include, path

from demo.urls import urlpatterns as site

urlpatterns = [path("scxml/basichttp/", include("routes.inbound")), *site]
