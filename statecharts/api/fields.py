"""Serializer fields for JSON values: read back from executions, or taken from a request."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from statecharts import validation
from statecharts.inspection import json_safe

__all__ = ["InputJSONField", "JSONValueField", "json_safe"]


@extend_schema_field(OpenApiTypes.ANY)
class JSONValueField(serializers.JSONField):
    """Any JSON value, rendered so that strict JSON can hold it (see ``json_safe``)."""

    def to_representation(self, value: Any) -> Any:
        return json_safe(super().to_representation(value))


Check = Callable[[Any, str], Any]


class InputJSONField(serializers.JSONField):
    """A JSON value from a request, checked by ``statecharts.validation`` (``check(value,
    field_name)``): from a JSON body as parsed, from a form field as JSON text read strictly
    (deep nesting, ``NaN``: a 400, never a ``RecursionError``)."""

    def __init__(self, *, check: Check, **kwargs: Any) -> None:
        self.check = check
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> Any:
        where = self.field_name or "data"
        try:
            if self.binary or getattr(data, "is_json_string", False):
                data = validation.parse_json(data, where)
            return self.check(data, where)
        except validation.InvalidInput as exc:
            raise serializers.ValidationError([str(problem) for problem in exc.problems]) from None
