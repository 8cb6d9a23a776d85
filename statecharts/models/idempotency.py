"""Idempotency keys of starts: a retried ``start`` does not start a second execution.

A send or a cancel keeps its key on its history entry (unique per execution). A start has
no execution yet to be unique in, so its key lives here, unique per chart *name* (not per
chart version: a client retrying after a new version was loaded must find the execution its
first attempt started). See ``statecharts.policies.idempotency``.
"""

from __future__ import annotations

from django.db import models


class StartKey(models.Model):
    # The chart's name, or "sha256:<hash>" for a chart without one.
    scope = models.CharField(max_length=210)
    key = models.CharField(max_length=200)
    execution = models.ForeignKey(
        "statecharts.Execution", on_delete=models.CASCADE, related_name="+"
    )
    # sha256 of what the caller asked for (data, business key, metadata, session id): the
    # same key with other content is refused (statecharts.policies.idempotency.fingerprint).
    fingerprint = models.CharField(max_length=64)
    created = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["scope", "key"], name="statecharts_start_key")
        ]

    def __str__(self) -> str:
        return f"{self.scope}: {self.key}"
