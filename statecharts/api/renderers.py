"""Renderers: SVG diagrams."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import renderers


class SVGRenderer(renderers.BaseRenderer):
    """Renders the SVG text a diagram view returns, as ``image/svg+xml``.

    Error responses of a view that renders SVG are switched to JSON by the view (see
    ``views.SVGErrorsAsJSON``); a non-text payload here is a bug, not something to draw.
    """

    media_type = "image/svg+xml"
    format = "svg"
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        if isinstance(data, bytes):
            return data
        if not isinstance(data, str):
            raise TypeError(f"SVGRenderer renders SVG text, not {type(data).__name__}")
        return data.encode(self.charset)
