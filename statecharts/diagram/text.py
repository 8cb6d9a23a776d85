"""Text for the diagram: what a transition says, how wide it is, how it is escaped.

Widths are estimates for a Verdana-like face (Verdana, DejaVu Sans and Bitstream Vera share
their metrics closely), the family the stylesheet asks for, so boxes fit their labels in the
common browsers and in librsvg without measuring real glyphs.
"""

from __future__ import annotations

import re

from statecharts.core.model import Action, Transition

STATE_FONT = 12.0  # state names
SMALL_FONT = 11.0  # transition labels and the lines inside boxes
LABEL_LIMIT = 36  # characters of an arrow label's line before it is shortened
LABEL_LINE = 13.0  # line height of an arrow label
LINE_LIMIT = 44  # characters of a line inside a box

_NARROW = frozenset("ijl|!.,:;'`")
_SLIM = frozenset("frtI()[]{}/\\- ")
_WIDE = frozenset("mwMW@%")
# Characters XML 1.0 cannot carry at all; they become U+FFFD rather than break the document.
_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_SPACES = re.compile(r"\s+")


def escape(text: str) -> str:
    """Escape for element content and double- or single-quoted attribute values."""
    text = _ILLEGAL.sub("\ufffd", text)
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("'", "&#39;")
    )


def text_width(text: str, size: float, *, bold: bool = False) -> float:
    """Estimated advance width of ``text`` at ``size`` pixels."""
    em = 0.0
    for ch in text:
        if ch in _NARROW:
            em += 0.30
        elif ch in _SLIM:
            em += 0.42
        elif ch in _WIDE:
            em += 0.95
        elif ch.isascii():
            em += 0.74 if ch.isupper() else 0.63
        elif ord(ch) >= 0x2E80:  # CJK and other full-width scripts
            em += 1.0
        else:
            em += 0.72
    return em * size * (1.1 if bold else 1.0)


def shorten(text: str, limit: int) -> str:
    """Collapse whitespace and cut to ``limit`` characters with an ellipsis."""
    text = _SPACES.sub(" ", text).strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "\u2026"


def events_text(transition: Transition) -> str:
    """The event descriptors as written, or "(always)" for an eventless transition."""
    if transition.event_text is None:
        return "(always)"
    return " ".join(transition.event_text.split())


def transition_label(transition: Transition) -> str:
    """``payment.received [amount > 0]``, in full: a tooltip, or a line in a box."""
    text = events_text(transition)
    if transition.cond is not None:
        text += f" [{_SPACES.sub(' ', transition.cond.source).strip()}]"
    return text


def label_lines(transition: Transition) -> tuple[str, ...]:
    """What an arrow says: its events, then its ``[cond]`` below, each shortened."""
    lines = [shorten(events_text(transition), LABEL_LIMIT)]
    if transition.cond is not None:
        cond = _SPACES.sub(" ", transition.cond.source).strip()
        lines.append(shorten(f"[{cond}]", LABEL_LIMIT))
    return tuple(lines)


_BREAK = re.compile(r"(?<=[ .])|(?=\[)")  # after a space or a dot, before a "["


def wrap_lines(lines: tuple[str, ...], limit: int) -> tuple[str, ...]:
    """The label's lines wrapped to at most ``limit`` characters where they can break: after a
    space or a dot, before a ``[`` (``documents.uploaded`` -> ``documents.`` / ``uploaded``).
    A piece that cannot break stays whole."""
    wrapped: list[str] = []
    for line in lines:
        current = ""
        for piece in _BREAK.split(line):
            if current and len(current.rstrip()) + len(piece.rstrip()) > limit:
                wrapped.append(current.rstrip())
                current = ""
            current += piece
        if current.strip():
            wrapped.append(current.rstrip())
    return tuple(wrapped)


def label_size(lines: tuple[str, ...]) -> tuple[float, float]:
    """(width, height) of an arrow label, its halo included."""
    width = max((text_width(line, SMALL_FONT) for line in lines), default=0.0)
    return width + 6, LABEL_LINE * len(lines) + 3


def targetless_line(transition: Transition) -> str:
    """A targetless transition, listed inside its state: ``tick [n < 3] / assign, log``."""
    text = transition_label(transition)
    kinds = _action_kinds(transition.body.actions)
    if kinds:
        text += " / " + ", ".join(kinds)
    return shorten(text, LINE_LIMIT)


def _action_kinds(actions: tuple[Action, ...]) -> list[str]:
    kinds: list[str] = []
    for action in actions:
        kind = type(action).__name__.lower()
        if kind not in kinds:
            kinds.append(kind)
    return kinds


def number(value: float) -> str:
    """A coordinate, rounded to 0.1 and printed the same way every time."""
    text = f"{round(value, 1):.1f}"
    if text.endswith(".0"):
        text = text[:-2]
    return "0" if text == "-0" else text
