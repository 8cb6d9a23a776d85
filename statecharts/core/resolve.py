"""Resolving ``src`` URIs (``<invoke src>``, ``<data src>``, ``<script src>``).

The core never opens a file or a socket on its own: the host passes a resolver. The default
one only reads relative references inside the chart's own folder and refuses the rest: a
relative ``file:`` URI (``file:lib.js``) or a relative reference with no scheme at all
(``lib.js``, ``scripts/lib.js``), which resolves exactly the same way. An absolute path
(``/etc/passwd``, ``file:/x``, ``file://host/x``), a path that leaves the folder (``../x``)
and any other scheme (``http:``, ``C:``) are refused.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from statecharts.core.errors import ResolveError

Resolver = Callable[[str, "str | None"], str]
"""``resolver(uri, base_path) -> document text``; raises ResolveError when it cannot."""

# RFC 3986: a scheme is a letter, then letters, digits, "+", "-" or "."; then ":".
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def relative_path(uri: str) -> str | None:
    """The path of ``uri`` inside the chart's folder if it is a relative reference the
    default resolver reads (``file:lib.js`` or ``lib.js``), else None."""
    if uri.startswith("file:"):
        path = uri[len("file:") :]
    elif _SCHEME.match(uri):
        return None  # another scheme (or a drive letter): never a file of the chart's folder
    else:
        path = uri
    if not path or path.startswith("/") or path.startswith("\\") or ":" in path:
        return None
    return path


def is_relative_reference(uri: str) -> bool:
    """Whether ``uri`` names a file relative to the chart's folder (it may still escape it
    with ``..``: the resolver refuses that)."""
    return relative_path(uri) is not None


def refusal(uri: str, base_path: str | None) -> str | None:
    """Why the default resolver's rules refuse ``uri`` whatever the files hold (an absolute
    path, one that leaves the chart's folder, another scheme), or None when it would read it
    (it may still not exist). Reads no file: the load doors refuse what it refuses."""
    relative = relative_path(uri)
    if relative is None:
        return (
            f"cannot resolve {uri!r}: only relative references inside the chart's folder "
            f"are allowed (lib.js or file:lib.js)"
        )
    if base_path is None:
        return f"cannot resolve {uri!r}: the chart was not loaded from a folder"
    base = Path(base_path).resolve()
    if base not in (base / relative).resolve().parents:
        return f"cannot resolve {uri!r}: it leaves the chart's folder"
    return None


def names_a_file(uri: str) -> bool:
    """Whether ``uri`` names a file (no scheme, or ``file:``), not a document another
    scheme names (``chart:payment``, ``http:``: an app or a resolver of the host's)."""
    return uri.startswith("file:") or not _SCHEME.match(uri)


def default_resolver(uri: str, base_path: str | None) -> str:
    refused = refusal(uri, base_path)
    if refused is not None:
        raise ResolveError(refused)
    assert base_path is not None
    target = (Path(base_path).resolve() / (relative_path(uri) or "")).resolve()
    try:
        return target.read_text(encoding="utf-8")
    except OSError as exc:
        raise ResolveError(f"cannot read {uri!r}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ResolveError(f"cannot read {uri!r}: it is not UTF-8 text") from None


def refuse_all(uri: str, base_path: str | None) -> str:
    """A resolver for untrusted charts (e.g. uploaded through an API): nothing resolves."""
    raise ResolveError(f"cannot resolve {uri!r}: external documents are disabled")
