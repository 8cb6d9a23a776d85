"""How the admin's pages lay values out to fit a 1280 px window: JSON as tokens a line never
breaks, session ids shortened (the whole id in the title), compact dates in the lists. The
rules that go with them are in the execution page's template (``.sc-token``) and
``static/statecharts/admin.css``."""

from __future__ import annotations

import re
from datetime import datetime

from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

# A JSON text's tokens: a string (escapes included), or a number, true, false or null; what
# lies between them (braces, brackets, commas, colons, spaces) is where a line may break.
JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[^\s,:\[\]{}"]+')
# A longer token is shown cut, whole in its title: one such token would widen its column past
# the window (a JSON token is never broken across lines).
TOKEN_CHARS = 24
SESSION_ID_CHARS = 8


def json_tokens(text: str) -> SafeString:
    """``text`` (JSON) as HTML: each string, number or literal in a ``<span class="sc-token">``
    (CSS keeps it on one line; a string of several words, each word), the punctuation
    between them as it is."""
    parts: list[SafeString] = []
    end = 0
    for match in JSON_TOKEN.finditer(text):
        parts.append(format_html("{}", text[end : match.start()]))
        # A string of several words may break between them, as text does; never in a word.
        parts.append(mark_safe(" ".join(_token(word) for word in match.group().split(" "))))
        end = match.end()
    parts.append(format_html("{}", text[end:]))
    return mark_safe("".join(parts))  # every part escaped by format_html


def _token(word: str) -> SafeString:
    if len(word) > TOKEN_CHARS:
        return format_html(
            '<span class="sc-token" title="{}">{}…</span>', word, word[: TOKEN_CHARS - 1]
        )
    return format_html('<span class="sc-token">{}</span>', word)


def short_session_id(session_id: str) -> SafeString:
    """The first characters of a session id, the whole id in the title (hover, copy)."""
    if len(session_id) <= SESSION_ID_CHARS + 1:
        return format_html("{}", session_id)
    return format_html(
        '<span title="{}">{}…</span>', session_id, session_id[:SESSION_ID_CHARS]
    )


def compact_date(moment: datetime | None) -> SafeString | None:
    """``2026-12-07 18:49`` in the current time zone (the seconds and the zone in the title):
    half the width of Django's "Dec. 7, 2026, 6:49 p.m.", which a list keeps on one line.
    None (the admin's "-") without a date."""
    if moment is None:
        return None
    local = timezone.localtime(moment) if timezone.is_aware(moment) else moment
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        moment.isoformat(),
        local.strftime("%Y-%m-%d %H:%M:%S %Z").strip(),
        # (non-breaking hyphens: a narrow column breaks between the date and the time only)
        local.strftime("%Y-%m-%d").replace("-", "\u2011") + local.strftime(" %H:%M"),
    )
