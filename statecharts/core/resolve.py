"""Resolving ``src`` URIs (``<invoke src>``, ``<data src>``, ``<script src>``).

The core never opens a file or a socket on its own: the host passes a resolver. The default
one only reads relative ``file:`` URIs inside the chart's own folder and refuses the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from statecharts.core.errors import ResolveError

Resolver = Callable[[str, "str | None"], str]
"""``resolver(uri, base_path) -> document text``; raises ResolveError when it cannot."""


def default_resolver(uri: str, base_path: str | None) -> str:
    if not uri.startswith("file:"):
        raise ResolveError(f"cannot resolve {uri!r}: only relative file: URIs are allowed")
    relative = uri[len("file:") :]
    if relative.startswith("//") or relative.startswith("/") or ":" in relative:
        raise ResolveError(f"cannot resolve {uri!r}: only relative file: URIs are allowed")
    if base_path is None:
        raise ResolveError(f"cannot resolve {uri!r}: the chart was not loaded from a folder")
    base = Path(base_path).resolve()
    target = (base / relative).resolve()
    if base not in target.parents:
        raise ResolveError(f"cannot resolve {uri!r}: it leaves the chart's folder")
    try:
        return target.read_text(encoding="utf-8")
    except OSError as exc:
        raise ResolveError(f"cannot read {uri!r}: {exc.strerror}") from None


def refuse_all(uri: str, base_path: str | None) -> str:
    """A resolver for untrusted charts (e.g. uploaded through an API): nothing resolves."""
    raise ResolveError(f"cannot resolve {uri!r}: external documents are disabled")
