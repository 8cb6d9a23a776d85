"""``ds:expires``: how late a delayed send may still be delivered (an opt-in, per chart or send).

SCXML 6.2 delivers a delayed send when its delay has passed, however late that is; only a
finished session discards it. A durable host may be down for hours, and some events are
worth nothing that late (a "remind me in 5 minutes" after a night's outage). A chart may say
so, in the platform's namespace (``xmlns:ds="urn:django-statecharts"``):

- on ``<scxml>``: ``ds:expires="10m"``, the default of every delayed ``<send>`` of the chart;
- on ``<send>``: ``ds:expires="30s"``, for that send (it overrides the chart's).

The value is a time as ``delay`` takes it (``500ms``, ``2s``, ``5m``, ``3h``, ``1d``: no
spaces), longer than zero. A host that keeps delayed sends (the timers app) then records a
send later than that past its due time as ``expired`` instead of delivering it, and tells the
chart (``error.platform.timer.expired``; docs/timers.md, "Late timers and expiry"). The core
only reads and checks the attribute: the compiled ``Send`` carries ``expires_ms`` (its own or
the chart's) and a delayed send's effect carries it on (``expires_ms``, only when set).

Checked at load, with line:column (:func:`problems_at`): a value that is not such a time is
an error; ``ds:expires`` on a ``<send>`` without ``delay`` or ``delayexpr`` is a warning (an
immediate send is never late).
"""

from __future__ import annotations

from statecharts.core.delays import delay_problem, delay_syntax_problem, parse_delay

EXTENSION_NS = "urn:django-statecharts"  # (statecharts.core.outside.EXTENSION_NS)
EXPIRES = f"{{{EXTENSION_NS}}}expires"


def expiry_problem(text: str) -> str | None:
    """Why ``text`` is not a ``ds:expires`` value, or None."""
    problem = delay_problem(text)
    if problem is not None:
        return f"ds:expires: {problem.replace('delay', 'time', 1)}"
    spaced = delay_syntax_problem(text)
    if spaced is not None:
        return f"ds:expires: {spaced.replace('delay ', '', 1)}"
    if not parse_delay(text):
        return f"ds:expires: {text!r} must be longer than 0 (leave it out: never expires)"
    return None


def parse_expiry(text: str | None) -> int | None:
    """Milliseconds of a ``ds:expires`` value (None: absent, or not one: the load refused it)."""
    if text is None or expiry_problem(text) is not None:
        return None
    return parse_delay(text)
