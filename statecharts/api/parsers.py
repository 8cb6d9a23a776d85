"""Request parsers: DRF's JSON parser, hardened so that no JSON body is a 500."""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError


class JSONParser(parsers.JSONParser):
    """DRF's strict JSON parser (``NaN`` and ``Infinity`` are refused), plus a 400 for a body
    nested too deeply for Python's parser (it raises ``RecursionError``, not ``ValueError``)."""

    def parse(
        self,
        stream: IO[bytes],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - the document is nested too deeply.") from None
