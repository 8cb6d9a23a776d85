"""Cross-execution sends: the sender's outbox and the target's record of what it applied.

A send to another execution crosses from one execution's rows to another's, so it is split in
two rows, each written only by its owner's step (the scale-out invariant, docs/architecture.md):

- :class:`OutboxMessage` belongs to the **sender**: written in the sender's step, delivered
  after that step commits (and by the sweeper after a crash). Its status is bookkeeping: it
  says whether the target applied it (``delivered``) or could not (``undeliverable``: the
  sender was told with ``error.communication`` in a step of its own).
- :class:`AppliedMessage` belongs to the **target**: written in the target's step that
  applies the message, unique on (target, message). That row, not the outbox status, is what
  makes a delivery exactly-once: a re-delivery finds it under the target's lock and applies
  nothing.
"""

from __future__ import annotations

from django.db import models

from statecharts.models.fields import PortableJSONField, PortableTextField, nul_matches_nothing


class OutboxStatus(models.TextChoices):
    PENDING = "pending", "pending"
    DELIVERED = "delivered", "delivered"
    UNDELIVERABLE = "undeliverable", "undeliverable"


class OutboxQuerySet(models.QuerySet["OutboxMessage"]):
    def pending(self) -> OutboxQuerySet:
        return self.filter(status=OutboxStatus.PENDING)

    def undeliverable(self) -> OutboxQuerySet:
        return self.filter(status=OutboxStatus.UNDELIVERABLE)


class OutboxMessage(models.Model):
    sender = models.ForeignKey(
        "statecharts.Execution", on_delete=models.CASCADE, related_name="outbox"
    )
    # What delivering it means: "event" (an event for the target, applied in its step), or a
    # kind an app registered (statecharts.stepper.register_message_kind), e.g. the invocations
    # app's "invocations.start" (create and start an invoked child).
    kind = models.CharField(max_length=40, default="event")
    target_session_id = models.CharField(max_length=64, db_index=True)
    event = PortableJSONField()
    codec = models.CharField(
        max_length=40,
        default="json",
        db_default="json",
        help_text="The payload codec that wrote its event data: a name in PAYLOAD_CODECS.",
    )
    # Set when the sender is an invoked child writing to its parent: its invocation ordinal
    # there, so the parent can ignore what a cancelled invocation still sends (spec 6.4.3).
    via_invocation = models.PositiveIntegerField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    last_error = PortableTextField(blank=True)
    send_id = models.CharField(max_length=200, blank=True)
    status = models.CharField(
        max_length=20, choices=OutboxStatus.choices, default=OutboxStatus.PENDING
    )
    reason = PortableTextField(blank=True)
    # The caller context of the sender's step (statecharts.policies.attribution): the target's step
    # that applies the message records it, so a request is followed across executions.
    caller_context = PortableJSONField(null=True, blank=True)
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


class AppliedMessage(models.Model):
    """The target's record that it applied an outbox message (its inbox), in that step."""

    # No database constraints: each row belongs to its own execution's shard (the target's);
    # the message may belong to another one (the sender's), and outlives pruning of either.
    execution = models.ForeignKey(
        "statecharts.Execution",
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="applied_messages",
    )
    message = models.ForeignKey(
        OutboxMessage,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="applications",
    )
    seq = models.PositiveIntegerField(help_text="The history entry of the step that applied it.")
    applied = models.DateTimeField()

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["execution", "message"], name="statecharts_applied_message_once"
            )
        ]
        indexes = [models.Index(fields=["message"], name="statecharts_applied_by_message")]

    def __str__(self) -> str:
        return f"message {self.message_id} applied by {self.execution_id} (step {self.seq})"


# Keys looked up with values that may come from chart code (statecharts.models.fields).
nul_matches_nothing(
    OutboxMessage._meta.get_field("target_session_id"), OutboxMessage._meta.get_field("send_id")
)
