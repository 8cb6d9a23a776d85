"""Cross-execution sends, written in the sender's step and delivered after it commits."""

from __future__ import annotations

from django.db import models


class OutboxStatus(models.TextChoices):
    PENDING = "pending", "pending"
    DELIVERED = "delivered", "delivered"
    UNDELIVERABLE = "undeliverable", "undeliverable"


class OutboxQuerySet(models.QuerySet["OutboxMessage"]):
    def pending(self) -> OutboxQuerySet:
        return self.filter(status=OutboxStatus.PENDING)


class OutboxMessage(models.Model):
    sender = models.ForeignKey(
        "statecharts.Execution", on_delete=models.CASCADE, related_name="outbox"
    )
    target_session_id = models.CharField(max_length=64, db_index=True)
    event = models.JSONField()
    send_id = models.CharField(max_length=200, blank=True)
    status = models.CharField(
        max_length=20, choices=OutboxStatus.choices, default=OutboxStatus.PENDING
    )
    reason = models.TextField(blank=True)
    created = models.DateTimeField()
    delivered = models.DateTimeField(null=True, blank=True)

    objects = OutboxQuerySet.as_manager()

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(
                fields=["id"],
                condition=models.Q(status="pending"),
                name="statecharts_outbox_pending",
            )
        ]

    def __str__(self) -> str:
        return f"{self.event.get('name')} -> {self.target_session_id} ({self.status})"
