"""The delivery ledger: one row per route delivery's idempotency key, for immediate and
delayed sends alike, written before the outside action (docs/routes.md).

``claimed`` -> ``delivered`` / ``failed``: the route owes at-most-once on the key, and the
unique key is how the platform keeps it (a second claim of the key finds the row and does
nothing). A delivery the route declares was not sent (``routes.base.NotSent``) may go
``claimed`` -> ``retrying`` when its route's retry policy has attempts left
(``routes.retrying``): a route timer row holds the retry, and its fire takes the key back
(``retrying`` -> ``claimed``, one more attempt) under the same key. A ``claimed`` row whose
worker died stays claimed: it is shown "in doubt" (the action may or may not have happened)
and is never retried blindly. Route timer rows deleted
without a delivery leave their outcome here too (``discarded`` with the reason, ``cancelled``),
so an operator sees every fate in one table.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import models

from statecharts.models.fields import PortableTextField


class DeliveryStatus(models.TextChoices):
    CLAIMED = "claimed", "claimed"
    DELIVERED = "delivered", "delivered"
    FAILED = "failed", "failed"
    DISCARDED = "discarded", "discarded"
    CANCELLED = "cancelled", "cancelled"
    # Not sent (the route said so); a retry waits in the route timer queue, same key.
    RETRYING = "retrying", "retrying"


class RouteDeliveryQuerySet(models.QuerySet["RouteDelivery"]):
    def in_doubt(self, now: datetime, seconds: int) -> RouteDeliveryQuerySet:
        """Claimed longer ago than ``seconds`` and never settled: the worker died between the
        ledger write and the end of the action."""
        return self.filter(
            status=DeliveryStatus.CLAIMED, created__lt=now - timedelta(seconds=seconds)
        )


class RouteDelivery(models.Model):
    key = models.CharField(max_length=255, unique=True, help_text="The idempotency key.")
    # No database constraint: the ledger outlives a deleted execution (its outcomes stay).
    execution = models.ForeignKey(
        "statecharts.Execution",
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="route_deliveries",
    )
    route = models.CharField(max_length=100)
    send_type = models.CharField(max_length=200)
    target = PortableTextField(blank=True)
    send_id = models.CharField(max_length=200, blank=True)
    event_name = models.CharField(max_length=200, blank=True)
    delayed = models.BooleanField(default=False)
    status = models.CharField(max_length=12, choices=DeliveryStatus.choices)
    reason = PortableTextField(blank=True, help_text="Why it was settled so (or the error).")
    created = models.DateTimeField(
        help_text="When the key was written (claimed or settled), or claimed again to retry."
    )
    settled = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(
        default=1, help_text="How many times the key was claimed (retries of a not-sent one)."
    )
    retry_at = models.DateTimeField(
        null=True, blank=True, help_text="When its retry is due (status retrying)."
    )
    doubt_reported = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When its route.in_doubt telemetry event was sent (once per delivery).",
    )

    objects = RouteDeliveryQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [
            models.Index(fields=["execution", "created"], name="routes_delivery_execution"),
            models.Index(
                fields=["created"],
                condition=models.Q(status="claimed"),
                name="routes_delivery_claimed",
            ),
        ]
        verbose_name_plural = "route deliveries"
        # An operator's record of an in-doubt delivery's fate (routes.operating).
        permissions = [
            ("mark_delivered_routedelivery", "Can mark an in-doubt route delivery delivered"),
            ("mark_failed_routedelivery", "Can mark an in-doubt route delivery failed"),
        ]

    def __str__(self) -> str:
        return f"{self.route} {self.event_name} -> {self.target} ({self.status})"


class InboundAddress(models.Model):
    """The secret of an execution's Basic HTTP address (``routes.inbound``): the address's
    token is signed over the session id *and* this nonce, so replacing the nonce (rotating)
    revokes every earlier address of the execution. One row per execution that has an
    address minted since rotation exists; an execution started before has none, and its
    older address (the session id alone) works until it is first rotated.

    Kept here rather than as a column of ``statecharts.Execution``: ``statecharts`` knows
    nothing of routes (the Basic HTTP processor is this app's), the row goes with the
    execution (deleted with it), and the permission to rotate is this model's."""

    execution = models.OneToOneField(
        "statecharts.Execution",
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="basichttp_address",
    )
    nonce = models.CharField(max_length=64, help_text="The secret the address is signed over.")
    base_url = PortableTextField(help_text="Where the inbound view is mounted (not secret).")
    created = models.DateTimeField()
    rotated = models.DateTimeField(null=True, blank=True, help_text="Its last rotation.")
    rotations = models.PositiveIntegerField(default=0)

    class Meta:
        default_permissions = ("view",)
        permissions = [
            ("rotate_address", "Can rotate the Basic HTTP address of executions"),
        ]
        verbose_name = "Basic HTTP address"
        verbose_name_plural = "Basic HTTP addresses"

    def __str__(self) -> str:
        return f"Basic HTTP address of execution {self.execution_id}"
