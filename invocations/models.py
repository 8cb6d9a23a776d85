"""Invocation rows: one per ``<invoke>`` started by an execution, written in its step.

An invocation is identified by (parent, invocation ordinal): invoke ids can repeat (the same
``<invoke id="x">`` entered twice), ordinals cannot, so a step that is re-run never makes a
second row. The row is the parent's: only the parent's steps write it, except two pieces of
bookkeeping after a child's own step commits (``active`` with its child, like an outbox row
marked ``delivered``).
"""

from __future__ import annotations

from typing import Any

from django.db import models
from django.utils.functional import cached_property

from statecharts.models.fields import PortableJSONField, PortableTextField
from statecharts.policies import codecs


class InvocationStatus(models.TextChoices):
    STARTING = "starting", "starting"  # written by the parent's step; the child is not up yet
    ACTIVE = "active", "active"  # the child runs
    DONE = "done", "done"  # the child finished; its done.invoke reached the parent
    FAILED = "failed", "failed"  # it could not start (the parent got error.execution)
    CANCELLED = "cancelled", "cancelled"  # the parent left the invoking state, or stopped


OPEN_STATUSES = frozenset({InvocationStatus.STARTING, InvocationStatus.ACTIVE})


class InvocationQuerySet(models.QuerySet["Invocation"]):
    def open(self) -> InvocationQuerySet:
        return self.filter(status__in=OPEN_STATUSES)


class Invocation(models.Model):
    parent = models.ForeignKey(
        "statecharts.Execution",
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="invocations",
    )
    ordinal = models.PositiveIntegerField(help_text="The invocation's ordinal in its parent.")
    invokeid = models.CharField(max_length=200)
    type = models.CharField(max_length=200, default="scxml")
    state = models.CharField(max_length=200, help_text="The invoking state's id.")
    # (Portable: a srcexpr or <content expr> value may hold a NUL character, which such an
    # invocation is refused for, but the row that says so must still be writable.)
    src = PortableTextField(blank=True, help_text="The src (or srcexpr's value), if any.")
    content = PortableTextField(blank=True, help_text="Inline <content>, if any.")
    params = PortableJSONField(
        null=True,
        blank=True,
        help_text="<param>/namelist values, as the payload codec wrote them.",
    )
    codec = models.CharField(
        max_length=40,
        default="json",
        db_default="json",
        help_text="The payload codec that wrote its params: a name in PAYLOAD_CODECS.",
    )
    autoforward = models.BooleanField(default=False)
    defined_at_run_time = models.BooleanField(
        default=False, help_text="Its chart came from <content expr> or srcexpr."
    )
    status = models.CharField(
        max_length=12, choices=InvocationStatus.choices, default=InvocationStatus.STARTING
    )
    reason = PortableTextField(blank=True)
    # What was invoked: the child chart (by content hash: replay never reads a file again).
    chart = models.ForeignKey(
        "statecharts.Chart", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    child = models.ForeignKey(
        "statecharts.Execution",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    # Where the child sits in its tree of invocations (written by the parent's step, so the
    # bounds of docs/invocations.md "Bounds" read one row instead of walking the chain): the
    # child's depth (a root execution is 0, its children 1, ...) and the tree's root. Null on
    # rows written before they existed (then the chain is walked, a bounded number of rows).
    depth = models.PositiveIntegerField(
        null=True, blank=True, help_text="The child's invocation depth (the root is 0)."
    )
    root = models.ForeignKey(
        "statecharts.Execution",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,  # (the (root, status) index below serves it)
        related_name="+",
        help_text="The execution at the top of the parent's tree of invocations.",
    )
    # When it was cancelled: the last message its child had written to the parent by then.
    # What the child sent up to there is processed (it was sent before the cancellation);
    # anything after is ignored (spec 6.4.3).
    cancelled_after_message = models.BigIntegerField(null=True, blank=True)
    caller_context = PortableJSONField(null=True, blank=True)
    # Handlers (types other than SCXML): attempts at start(), the last error, when to try
    # again (a durable schedule: django-q2 has no backoff), and when to give up waiting.
    attempts = models.PositiveSmallIntegerField(default=0)
    last_error = PortableTextField(blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    deadline = models.DateTimeField(null=True, blank=True)
    # A handler start running now (invocations.leases): its lease (renewed by the start's
    # heartbeat; past it, the timer workers' sweeper starts it again) and its fence token
    # (what the start writes afterwards, its answer included, needs the row to still carry it).
    claimed_until = models.DateTimeField(null=True, blank=True)
    claim_token = models.BigIntegerField(null=True, blank=True)
    started_in = models.PositiveIntegerField(help_text="The parent's history entry (seq).")
    created = models.DateTimeField()
    updated = models.DateTimeField()

    objects = InvocationQuerySet.as_manager()

    @property
    def is_scxml(self) -> bool:
        return self.type == "scxml"

    def decoded_params(self) -> Any:
        """The params as they were given, decoded with the row's payload codec
        (``statecharts.policies.codecs``): raises ``CodecUnavailable`` (the codec or key is not
        deployed here) or ``CorruptPayload`` (they can never be read)."""
        return codecs.decode_value(self.params, self.codec)

    @cached_property
    def shown_params(self) -> dict[str, Any]:
        """What the admin and the API show: ``{"value": the decoded params, "unreadable":
        ""}``, or (when they cannot be decoded here) the params as stored and why, as the
        history timeline does."""
        try:
            return {"value": self.decoded_params(), "unreadable": ""}
        except (codecs.CodecUnavailable, codecs.CorruptPayload) as exc:
            return {"value": self.params, "unreadable": f"(encoded with {self.codec!r}: {exc})"}

    class Meta:
        ordering = ["parent", "ordinal"]
        indexes = [
            # The live SCXML invocations of one tree (INVOKE_MAX_DESCENDANTS).
            models.Index(fields=["root", "status"], name="invocations_root_status"),
            # What the sweepers look for every second (invocations.tasks.recover): starts
            # whose lease ran out, retries that are due. Partial: few rows carry either.
            models.Index(
                fields=["claimed_until"],
                name="invocations_claimed_until",
                condition=models.Q(claimed_until__isnull=False),
            ),
            models.Index(
                fields=["next_attempt_at"],
                name="invocations_next_attempt",
                condition=models.Q(next_attempt_at__isnull=False),
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["parent", "ordinal"], name="invocations_one_per_ordinal"
            )
        ]
        # An operator's actions on a handler's invocation (invocations.operating).
        permissions = [
            ("retry_invocation", "Can retry a waiting handler start now"),
            ("cancel_invocation", "Can cancel an open handler invocation"),
        ]

    def __str__(self) -> str:
        return f"{self.invokeid} #{self.ordinal} ({self.status})"
