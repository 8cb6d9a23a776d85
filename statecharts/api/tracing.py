"""The API's door to tracing (``POST /api/executions/{id}/trace/``): ``stepper.trace`` under
the execution's lock, as the admin's "Trace the steps of the selected executions" (and "Stop
tracing") and ``statechart trace [--off]`` do. From its next step, the execution's history
keeps the core's trace effects; what the chart does is unchanged."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from statecharts.api.serializers import StrictInput


class TraceRequestSerializer(StrictInput):
    on = serializers.BooleanField(
        required=False,
        default=True,
        help_text="true (the default): keep the trace of its next steps; false: stop.",
    )


class TraceAnswerSerializer(serializers.Serializer[Any]):
    execution = serializers.IntegerField()
    tracing = serializers.BooleanField(help_text="Whether its steps are traced now.")
    changed = serializers.BooleanField(help_text="false: it was already so.")
