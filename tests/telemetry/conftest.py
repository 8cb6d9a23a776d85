"""This folder's fixtures: ``otel`` (tests/telemetry/otel_harness.py)."""

from tests.telemetry.otel_harness import otel  # noqa: F401 (a fixture)
