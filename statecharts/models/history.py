"""The input history: one append-only row per input fed to an execution (the audit trail)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import models

from statecharts.models.fields import PortableJSONField, PortableTextField

if TYPE_CHECKING:
    from statecharts.models.executions import Execution


class Disposition(models.TextChoices):
    APPLIED = "applied", "applied"
    DISCARDED = "discarded", "discarded (execution finished)"
    REFUSED = "refused", "refused (see the reason)"
    # Not inputs: what was done to the execution's rows (statecharts.operations.retention). Replay
    # reports them instead of replaying.
    ERASED = "erased", "personal data erased"
    PRUNED = "pruned", "history pruned (retention)"
    # The execution was moved to another chart version (statecharts.operations.chart_migration): the
    # entry's input holds the position it was given, which replay starts from.
    MIGRATED = "migrated", "migrated to another chart version"
    # Created from an exported document (statecharts.operations.transfer): the input holds the
    # position.
    IMPORTED = "imported", "imported from an export"
    # An operator acted on one of its rows (a timer fired now, cancelled or rescheduled; an
    # invocation retried; a route delivery's fate recorded): the input names the action, the
    # row and the operator's reason; the caller context says who. Replay skips it.
    OPERATED = "operated", "an operator acted on its rows"


class HistoryEntry(models.Model):
    execution = models.ForeignKey(
        "statecharts.Execution",
        on_delete=models.CASCADE,
        related_name="history",
        db_index=False,  # (the unique (execution, seq) index starts with it)
    )
    seq = models.PositiveIntegerField(help_text="1 for the start, then one per input.")
    input = PortableJSONField(help_text="The input: kind, event (name, data, ...), start data.")
    disposition = models.CharField(max_length=20, choices=Disposition.choices)
    status_after = models.CharField(max_length=20)
    configuration_after = PortableJSONField(default=list)
    effects = PortableJSONField(default=list, help_text="A summary of what the step produced.")
    reachability = PortableJSONField(
        default=dict, help_text="Answers the host gave to 'is session X reachable?' (for replay)."
    )
    registered_types = PortableJSONField(
        default=dict,
        blank=True,
        help_text="The send/invoke types and timer queue the host had for this step (replay).",
    )
    position_sha256 = models.CharField(max_length=64, blank=True)
    reason = PortableTextField(
        blank=True, help_text="Why the input was refused or discarded, or how it was cancelled."
    )
    idempotency_key = models.CharField(
        max_length=200,
        null=True,
        blank=True,
        help_text="The caller's key for this input: a repeat with it applies nothing.",
    )
    cause = PortableJSONField(
        null=True,
        blank=True,
        help_text="What the input came from: a timer (id, ordinal, the step that scheduled "
        "it), an outbox message (id, sender). Never part of a key.",
    )
    codec = models.CharField(
        max_length=40,
        default="json",
        db_default="json",
        help_text="The payload codec that wrote its event data: a name in PAYLOAD_CODECS.",
    )
    caller_context = PortableJSONField(
        null=True,
        blank=True,
        help_text="Who or what fed the input, as the door saw it (a request id, a trace "
        "context, the user; statecharts.policies.attribution). Opaque: never part of a key.",
    )
    created = models.DateTimeField()

    class Meta:
        ordering = ["execution", "seq"]
        constraints = [
            models.UniqueConstraint(
                fields=["execution", "seq"], name="statecharts_history_unique_seq"
            ),
            models.UniqueConstraint(
                fields=["execution", "idempotency_key"],
                condition=models.Q(idempotency_key__isnull=False),
                name="statecharts_history_idempotency_key",
            ),
        ]
        verbose_name_plural = "history entries"

    @classmethod
    def of(
        cls,
        execution: Execution,
        *,
        input: dict[str, Any],
        disposition: str,
        created: datetime,
        seq: int | None = None,
        codec: str = "json",
        effects: list[dict[str, Any]] | None = None,
        reachability: dict[str, Any] | None = None,
        registered_types: dict[str, Any] | None = None,
        position_sha256: str = "",
        reason: str = "",
        idempotency_key: str | None = None,
        cause: dict[str, Any] | None = None,
        caller_context: dict[str, Any] | None = None,
    ) -> HistoryEntry:
        """The entry (not saved) recording what ``execution`` was just given, with the
        ``disposition`` it had (applied, refused, migrated, ...): its seq (the execution's
        ``steps`` unless given), status and configuration are read from the execution as it
        is after the input. The one way entries are made: the stepper's, a migration's, and
        the stand-in for a start whose history was pruned (``seq=1``)."""
        return cls(
            execution=execution,
            seq=execution.steps if seq is None else seq,
            input=input,
            codec=codec,
            disposition=disposition,
            status_after=execution.status,
            configuration_after=execution.configuration,
            effects=[] if effects is None else effects,
            reachability={} if reachability is None else reachability,
            registered_types={} if registered_types is None else registered_types,
            position_sha256=position_sha256,
            reason=reason,
            idempotency_key=idempotency_key,
            cause=cause,
            caller_context=caller_context,
            created=created,
        )

    def __str__(self) -> str:
        event = self.input.get("event") or {}
        return f"#{self.seq} {self.input.get('kind')} {event.get('name', '')}".strip()
