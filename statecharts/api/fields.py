"""Serializer fields for JSON values read back from executions."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from statecharts.inspection import json_safe

__all__ = ["JSONValueField", "json_safe"]


@extend_schema_field(OpenApiTypes.ANY)
class JSONValueField(serializers.JSONField):
    """Any JSON value, rendered so that strict JSON can hold it (see ``json_safe``)."""

    def to_representation(self, value: Any) -> Any:
        return json_safe(super().to_representation(value))
