"""Retry policies as the routes app's settings write them (docs/routes.md, "Retries").

A route's settings entry may carry ``RETRY`` (policy field -> value; ``non_retryable`` a list
of dotted paths of exception classes: names in settings, never in a chart or a row), over its
class's ``retry_policy``; the ``ROUTE_*`` settings fill what both leave unset (``defaults``).
``manage.py check`` reports what is wrong (``routes.E001`` for an entry, ``routes.E003`` for
the defaults). The policy type is ``statecharts.policies.retrying.RetryPolicy``.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from django.utils.module_loading import import_string

from routes.base import RetryPolicy
from routes.conf import route_settings

# A policy's numbers: name -> (lowest, highest or None, whether it must be an int).
RETRY_BOUNDS: Mapping[str, tuple[float, float | None, bool]] = {
    "max_attempts": (1, None, True),
    "initial_seconds": (0, None, False),
    "coefficient": (1, None, False),
    "maximum_seconds": (0, None, False),
    "jitter": (0, 1, False),
}
# The ROUTE_* settings that are every route's defaults, by policy field.
RETRY_SETTINGS: Mapping[str, str] = {
    "max_attempts": "ROUTE_MAX_ATTEMPTS",
    "initial_seconds": "ROUTE_RETRY_SECONDS",
    "coefficient": "ROUTE_RETRY_COEFFICIENT",
    "maximum_seconds": "ROUTE_RETRY_MAX_SECONDS",
    "jitter": "ROUTE_RETRY_JITTER",
}


def number_problem(name: str, value: Any) -> str | None:
    """What is wrong with ``value`` as the policy field ``name`` (None: nothing)."""
    low, high, integral = RETRY_BOUNDS[name]
    kind = int if integral else int | float
    if (
        isinstance(value, bool)
        or not isinstance(value, kind)
        or value < low
        or (high is not None and value > high)
    ):
        what = "an integer" if integral else "a number"
        upper = f" and at most {high}" if high is not None else ""
        return f"must be {what} of at least {low}{upper}, not {value!r}"
    return None


def parse_retry(raw: Any, base: RetryPolicy | None) -> tuple[RetryPolicy, list[str]]:
    """A settings entry's ``RETRY`` dict (policy field -> value; ``non_retryable`` a list of
    dotted paths of exception classes) over the class's ``retry_policy``; the problems."""
    base = base if isinstance(base, RetryPolicy) else RetryPolicy()
    if raw is None:
        return base, []
    if not isinstance(raw, Mapping):
        return base, ["must be a dict of policy field -> value"]
    problems: list[str] = []
    unknown = sorted(str(k) for k in set(raw) - {*RETRY_BOUNDS, "non_retryable"})
    if unknown:
        problems.append(
            f"has unknown keys {unknown} (known: {sorted(RETRY_BOUNDS)}, non_retryable)"
        )
    values: dict[str, Any] = {}
    for name in RETRY_BOUNDS:
        if name in raw:
            problem = number_problem(name, raw[name])
            if problem:
                problems.append(f"[{name!r}] {problem}")
            else:
                values[name] = raw[name]
    classes: list[type[BaseException]] = []
    paths = raw.get("non_retryable", [])
    if not isinstance(paths, list | tuple):
        problems.append("['non_retryable'] must be a list of dotted paths of exception classes")
        paths = []
    for path in paths:
        try:
            cls = import_string(path) if isinstance(path, str) else None
        except ImportError as exc:
            problems.append(f"['non_retryable'] {path!r} cannot be imported: {exc}")
            continue
        if not (inspect.isclass(cls) and issubclass(cls, BaseException)):
            problems.append(f"['non_retryable'] {path!r} is not an exception class")
            continue
        classes.append(cls)
    own = RetryPolicy(**values, non_retryable=tuple(classes))
    return own.filled(base), problems


def defaults() -> RetryPolicy:
    """Every route's defaults: the ``ROUTE_*`` settings (one attempt: no retry)."""
    return RetryPolicy(
        **{name: getattr(route_settings, key) for name, key in RETRY_SETTINGS.items()}
    )
