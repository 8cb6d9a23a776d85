"""The demo site's own pages: the landing page at /, the project's documents, the API docs
page (Swagger UI, offline, signed-in users only) and the throttled password-for-token
endpoint."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.contrib.staticfiles import finders
from django.core.cache import cache
from django.test import Client
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


@pytest.fixture
def signed_in() -> Client:
    user = User.objects.create_user("reader", password="pw")
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def empty_cache() -> Iterator[None]:
    """The token endpoint's throttle counts in the cache: start and leave it empty."""
    cache.clear()
    yield
    cache.clear()


def test_the_landing_page_says_what_this_is_and_links_every_door() -> None:
    response = Client().get("/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "Durable W3C SCXML statecharts for Django" in page
    for link in ('href="/admin/"', 'href="/api/docs/"', 'href="/api/"', 'href="/docs/README.md"'):
        assert link in page, link
    assert 'href="/docs/deployment.md"' in page and 'href="/docs/installation.md"' in page
    assert "DEBUG" not in page  # the warning is shown only when debug is on


def test_the_admins_view_site_link_leads_to_the_landing_page() -> None:
    admin = User.objects.create_superuser("admin", "admin@example.com", "pw")
    client = Client()
    client.force_login(admin)
    index = client.get("/admin/").content.decode()
    assert re.search(r'<a href="/">\s*View site\s*</a>', index)
    assert client.get("/").status_code == 200


def test_documents_are_served_as_html_pages_and_nothing_else_is() -> None:
    client = Client()
    response = client.get("/docs/installation.md")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/html; charset=utf-8"
    page = response.content.decode()
    assert "<title>Installing into your Django project · django-statecharts demo</title>" in page
    assert re.search(r"<h1[^>]*>Installing into your Django project</h1>", page)
    assert "<pre><code" in page  # a fenced block, rendered
    # A link to another document leads to that document's page on this site.
    readme = client.get("/docs/README.md").content.decode()
    assert re.search(r'href="/docs/[\w-]+\.md(#[^"]*)?"', readme), "no link between documents"
    assert 'href="docs/' not in readme
    for name in ("nope.md", "..%2Fpyproject.toml", "examples", "LICENSE", "%2Fetc%2Fpasswd"):
        assert client.get(f"/docs/{name}").status_code == 404, name


def test_the_front_page_shows_no_literal_backticks() -> None:
    page = Client().get("/").content.decode()
    titles = re.findall(r'<li><a href="/docs/[^"]+">([^<]*)</a>', page)
    assert len(titles) > 5 and not [title for title in titles if "`" in title]


def test_the_api_docs_page_is_for_signed_in_users() -> None:
    response = Client().get("/api/docs/")
    assert response.status_code == 302
    assert response["Location"] == "/admin/login/?next=/api/docs/"


def test_the_api_docs_page_renders_swagger_ui_from_this_site_only(signed_in: Client) -> None:
    response = signed_in.get("/api/docs/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "SwaggerUIBundle" in page
    assert "/api/schema/" in page  # the document it renders
    assets = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert any(a.endswith("swagger-ui-bundle.js") for a in assets), assets
    for asset in assets:
        assert asset.startswith("/static/"), f"{asset} is not served by this site"
        assert finders.find(asset.removeprefix("/static/")), f"{asset} is not a static file"


def test_the_api_root_links_the_schema_and_the_docs_page(signed_in: Client) -> None:
    root = signed_in.get("/api/", HTTP_ACCEPT="application/json").json()
    assert root["schema"] == "http://testserver/api/schema/"
    assert root["docs"] == "http://testserver/api/docs/"
    assert {"charts", "executions", "timers"} <= set(root)
    # The JSON rendering's links keep ?format=json, except the docs page's (HTML only).
    as_json = signed_in.get("/api/?format=json").json()
    assert as_json["schema"] == "http://testserver/api/schema/?format=json"
    assert as_json["docs"] == "http://testserver/api/docs/"
    assert signed_in.get(as_json["docs"]).status_code == 200


def test_the_token_endpoint_trades_a_password_for_a_token(empty_cache: None) -> None:
    User.objects.create_user("client", password="pw")
    response = APIClient().post(
        "/api/auth/token/", {"username": "client", "password": "pw"}, format="json"
    )
    assert response.status_code == 200
    assert len(response.json()["token"]) == 40


def test_password_guessing_is_throttled(empty_cache: None) -> None:
    User.objects.create_user("victim", password="the-real-one")
    client = APIClient()
    wrong = {"username": "victim", "password": "guess"}
    answers = [client.post("/api/auth/token/", wrong).status_code for _ in range(10)]
    assert answers == [400] * 10
    throttled = client.post("/api/auth/token/", {"username": "victim", "password": "the-real-one"})
    assert throttled.status_code == 429
    assert int(throttled["Retry-After"]) > 0
    assert "token" not in throttled.json()


def test_password_guessing_is_throttled_whatever_x_forwarded_for_says(empty_cache: None) -> None:
    """The throttle counts the connection's address (NUM_PROXIES 0): a header the client
    writes itself cannot buy a fresh quota per guess."""
    User.objects.create_user("victim", password="the-real-one")
    client = APIClient()
    answers = [
        client.post(
            "/api/auth/token/",
            {"username": "victim", "password": f"guess{i}"},
            HTTP_X_FORWARDED_FOR=f"203.0.113.{i}",
        ).status_code
        for i in range(11)
    ]
    assert answers == [400] * 10 + [429]


def test_behind_trusted_proxies_the_throttle_counts_the_address_the_proxy_saw(
    empty_cache: None, settings: Any
) -> None:
    """With NUM_PROXIES=1 the last X-Forwarded-For entry (the one the proxy appended) is the
    client: what a client writes to the left of it changes nothing, another client has its
    own quota."""
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    User.objects.create_user("victim", password="the-real-one")
    client = APIClient()

    def guess(forwarded_for: str) -> int:
        wrong = {"username": "victim", "password": "guess"}
        response = client.post("/api/auth/token/", wrong, HTTP_X_FORWARDED_FOR=forwarded_for)
        return response.status_code

    answers = [guess(f"203.0.113.{i}, 198.51.100.7") for i in range(11)]
    assert answers == [400] * 10 + [429]
    assert guess("198.51.100.8") == 400


def test_a_deeply_nested_body_to_the_token_endpoint_is_a_400(empty_cache: None) -> None:
    nested = "[" * 10_000 + "]" * 10_000
    client = APIClient(raise_request_exception=False)
    response = client.post("/api/auth/token/", nested, content_type="application/json")
    assert response.status_code == 400
    assert "nested too deeply" in response.json()["detail"]
