"""Serializer fields for JSON values: read back from executions, or taken from a request."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from statecharts.operations.inspection import json_safe
from statecharts.stepper.requests import JSONText

__all__ = ["InputJSONField", "JSONValueField", "json_safe"]


@extend_schema_field(OpenApiTypes.ANY)
class JSONValueField(serializers.JSONField):
    """Any JSON value, rendered so that strict JSON can hold it (see ``json_safe``)."""

    def to_representation(self, value: Any) -> Any:
        return json_safe(super().to_representation(value))


class BlankJSON(str):
    """No JSON text at all: the browsable API's HTML form shows an unset JSON field empty
    (``StrictInput``). DRF draws a value marked ``is_json_string`` as it is, where it would
    write ``None`` as ``null``."""

    is_json_string = True


class InputJSONField(serializers.JSONField):
    """A JSON value from a request, handed to the stepper as it came: from a JSON body as
    parsed, from a form field as :class:`~statecharts.stepper.JSONText` (the stepper's gate
    reads it strictly and checks it: deep nesting, ``NaN``, a code-carrying tag is a 400
    naming this field, never a ``RecursionError``)."""

    def to_internal_value(self, data: Any) -> Any:
        if self.binary or getattr(data, "is_json_string", False):
            return JSONText(data)
        return data
