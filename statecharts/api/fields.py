"""Serializer fields for JSON values read back from executions."""

from __future__ import annotations

import math
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float written as JavaScript spells it (``"NaN"``,
    ``"Infinity"``, ``"-Infinity"``): strict JSON has no such numbers, and the plain view of a
    datamodel (``statecharts.core.datamodel.plain``) makes them from ``number`` tags."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    return value


@extend_schema_field(OpenApiTypes.ANY)
class JSONValueField(serializers.JSONField):
    """Any JSON value, rendered so that strict JSON can hold it (see ``json_safe``)."""

    def to_representation(self, value: Any) -> Any:
        return json_safe(super().to_representation(value))
