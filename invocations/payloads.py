"""The invocations app's rows that the payload codec writes (their params), registered for
``statechart reencrypt`` (``statecharts.operations.reencryption``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db.models import Q

from invocations.models import Invocation
from statecharts.operations import reencryption


def _params(values: dict[str, Any], convert: Callable[[Any], Any]) -> dict[str, Any]:
    params = values["params"]
    return {"params": None if params is None else convert(params)}


def _with_params() -> Q:
    return Q(params__isnull=False)


def register() -> None:
    reencryption.register(
        reencryption.EncodedRows(
            app="invocations",
            name="invocations",
            description="invocation params",
            model=Invocation,
            owner="parent_id",
            fields=("params",),
            convert=_params,
            rows=_with_params,
        )
    )
