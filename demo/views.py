"""The demo site's own pages: the landing page, the project's documents, and the
password-for-token endpoint. None of them is part of the installed package (a host project
has its own front page and chooses its own authentication); docs/installation.md says how a
host adds the same API docs page to its site."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.safestring import mark_safe
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.throttling import ScopedRateThrottle

from statecharts.api.parsers import JSONParser

ROOT = Path(__file__).resolve().parents[1]


def documents() -> dict[str, Path]:
    """The project's documents by file name: the README and every page of docs/."""
    pages = {path.name: path for path in sorted((ROOT / "docs").glob("*.md"))}
    return {"README.md": ROOT / "README.md", **pages}


def title_of(path: Path) -> str:
    """The document's first heading as plain text (its code spans' backticks left out)."""
    with path.open(encoding="utf-8") as text:
        first = text.readline().strip()
    return first.lstrip("#").strip().replace("`", "") or path.name


def home(request: HttpRequest) -> HttpResponse:
    """What this site is, and where to go: the admin, the API, its docs page, the documents."""
    pages = [(name, title_of(path)) for name, path in documents().items()]
    return render(request, "demo/home.html", {"documents": pages, "debug": settings.DEBUG})


# A link from one document to another (``docs/x.md``, ``x.md``, ``../README.md``, with an
# anchor or not): pointed at this site's page of that document.
DOCUMENT_LINK = re.compile(r'href="(?:\.\./|\./)*(?:docs/)?([\w.-]+\.md)(#[^"]*)?"')


def document(request: HttpRequest, name: str) -> HttpResponse:
    """One of the project's Markdown documents as an HTML page (the ``markdown`` package, the
    demo extra's), its links to the other documents leading to their pages. Only names in
    ``documents()`` are served: the name never becomes a path."""
    import markdown

    pages = documents()
    path = pages.get(name)
    if path is None:
        raise Http404("no such document")
    body = markdown.markdown(
        path.read_text(encoding="utf-8"), extensions=["tables", "fenced_code", "toc"]
    )

    def to_page(match: re.Match[str]) -> str:
        target, anchor = match.group(1), match.group(2) or ""
        if target not in pages:
            return match.group(0)
        return f'href="{reverse("document", args=[target])}{anchor}"'

    # (the document is the repository's own text, not a visitor's: its HTML is trusted)
    page = mark_safe(DOCUMENT_LINK.sub(to_page, body))
    return render(request, "demo/document.html", {"title": title_of(path), "body": page})


class ThrottledObtainAuthToken(ObtainAuthToken):
    """POST ``username`` and ``password``, get the key for ``Authorization: Token <key>``.

    Guesses are throttled per client address (``DEFAULT_THROTTLE_RATES["auth-token"]``,
    10 a minute unless ``DJANGO_TOKEN_RATE`` says otherwise): the 11th try in a minute is a
    429 with ``Retry-After``. DRF counts in Django's cache, so every web process must share
    one cache (``demo.settings.production`` uses the database), or each process allows its
    own quota. Behind a proxy set DRF's ``NUM_PROXIES`` so the client's address is the one
    counted. A body nested too deeply for Python's JSON parser is a 400, like the API's."""

    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "auth-token"
    parser_classes = [JSONParser, FormParser, MultiPartParser]
