"""Pagination: numbered pages whose size is read from the settings when a request asks."""

from __future__ import annotations

from rest_framework import pagination
from rest_framework.settings import api_settings

DEFAULT_PAGE_SIZE = 50


class PageNumberPagination(pagination.PageNumberPagination):
    """``?page=N`` and ``?page_size=M`` (at most ``max_page_size``).

    The default size is ``REST_FRAMEWORK["PAGE_SIZE"]`` read at request time (so
    ``override_settings`` works), or 50 when the project sets none: these lists grow without
    bound and are never returned whole.
    """

    page_size_query_param = "page_size"
    max_page_size = 500

    @property  # type: ignore[override]
    def page_size(self) -> int:
        return api_settings.PAGE_SIZE or DEFAULT_PAGE_SIZE
