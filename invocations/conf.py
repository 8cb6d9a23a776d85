"""The invocations app's settings: ``INVOKE_*`` keys (and ``INVOKERS``, ``TASKS``) of the one
``STATECHARTS`` dict.

Declared, with their defaults and what each is, in ``invocations/declaration.py`` (the app's
declaration, read by ``statecharts.conf``); read through :data:`invocation_settings`. Their
check, :func:`check`, runs in ``manage.py check`` (docs/invocations.md, "Settings").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.checks import CheckMessage, Error
from django.utils.module_loading import import_string

from statecharts.conf import default, numbers_out_of_range, statecharts_settings

BOUNDS = (
    "INVOKE_MAX_DEPTH",
    "INVOKE_MAX_CHILDREN",
    "INVOKE_MAX_DESCENDANTS",
    "INVOKE_STARTS_PER_DELIVERY",
)


def check(configured: Mapping[str, Any]) -> list[CheckMessage]:
    """INVOKERS and TASKS name importable things (by name in charts, by path here only); the
    bounds on trees of child charts are positive integers."""
    problems: list[CheckMessage] = []
    for key in BOUNDS:
        value = configured.get(key, default(key))
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            problems.append(
                Error(
                    f"STATECHARTS[{key!r}] must be a positive integer, not {value!r}.",
                    id="invocations.E004",
                )
            )
    problems.extend(check_retry(configured))
    queue = configured.get("INVOKE_HANDLER_QUEUE", default("INVOKE_HANDLER_QUEUE"))
    if queue not in ("django_q", "inline"):
        problems.append(
            Error(
                "STATECHARTS['INVOKE_HANDLER_QUEUE'] must be 'django_q' or 'inline'.",
                id="invocations.E003",
            )
        )
    for key in ("INVOKERS", "TASKS"):
        value = configured.get(key, default(key))
        if not isinstance(value, dict):
            problems.append(Error(f"STATECHARTS[{key!r}] must be a dict.", id="invocations.E001"))
            continue
        for name, target in value.items():
            if callable(target):
                continue
            try:
                import_string(str(target))
            except ImportError as exc:
                problems.append(
                    Error(
                        f"STATECHARTS[{key!r}][{name!r}] cannot be imported: {exc}",
                        id="invocations.E002",
                    )
                )
    return problems


# The global retry policy of handlers (invocations.policies) and the start's lease: (low, high).
NUMBERS = {
    "INVOKE_HANDLER_RETRY_SECONDS": (0, None),
    "INVOKE_HANDLER_RETRY_COEFFICIENT": (1, None),
    "INVOKE_HANDLER_RETRY_MAX_SECONDS": (0, None),
    "INVOKE_HANDLER_RETRY_JITTER": (0, 1),
    "INVOKE_HANDLER_LEASE_SECONDS": (1, None),
    "INVOKE_HANDLER_START_TIMEOUT_SECONDS": (1, None),
}


def check_retry(configured: Mapping[str, Any]) -> list[CheckMessage]:
    """The handlers' global retry policy and lease: numbers in their range."""
    return numbers_out_of_range(configured, NUMBERS, "invocations.E005")


invocation_settings = statecharts_settings
