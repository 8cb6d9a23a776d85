"""Timer rows: one per delayed send, written in the transaction of the step that scheduled it.

The timer table is the source of truth; django-q2 workers only read it (see timers.dispatch).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db import models
from django.db.models import Q, Value
from django.db.models.functions import Concat

from statecharts.models.fields import PortableJSONField, PortableTextField, nul_matches_nothing
from statecharts.policies import codecs


class TimerStatus(models.TextChoices):
    PENDING = "pending", "pending"
    FIRED = "fired", "fired"
    CANCELLED = "cancelled", "cancelled"
    DISCARDED = "discarded", "discarded"
    FAILED = "failed", "failed"
    # Later than its ds:expires allowed (timers.expiry): not delivered; the chart was told
    # error.platform.timer.expired instead.
    EXPIRED = "expired", "expired"


TERMINAL_TIMER_STATUSES = frozenset(
    {
        TimerStatus.FIRED,
        TimerStatus.CANCELLED,
        TimerStatus.DISCARDED,
        TimerStatus.FAILED,
        TimerStatus.EXPIRED,
    }
)


class TimerQuerySet(models.QuerySet["Timer"]):
    def pending(self) -> TimerQuerySet:
        return self.filter(status=TimerStatus.PENDING)

    def pending_among(self, pks: Iterable[int]) -> TimerQuerySet:
        """The pending rows among ``pks``, found by their primary key, unordered.

        The status is compared as an expression (``status || ''``) that the partial indexes
        on pending rows (due, cancel) do not match, so PostgreSQL cannot answer through one
        of them: with statistics that expect few pending rows it would read every pending
        row of a backlog (and sort them, for the default ordering) to find a batch's ids
        (benchmarks/JOURNAL.md, "PostgreSQL's share of a fire")."""
        return (
            self.alias(status_text=Concat("status", Value("")))
            .filter(pk__in=list(pks), status_text=TimerStatus.PENDING)
            .order_by()
        )

    def due(self, now: datetime) -> TimerQuerySet:
        """Pending timers due at ``now`` or earlier, most overdue first (uses the due index)."""
        return self.pending().filter(due__lte=now).order_by("due", "id")

    def claimable(self, now: datetime) -> TimerQuerySet:
        """Due timers no live firer holds: never claimed, or claimed by a firer whose lease
        ran out or whose per-fire timeout passed (that attempt is then spent: see
        ``timers.firing.claim_rows``)."""
        return self.due(now).filter(
            Q(claimed_until__isnull=True) | Q(claimed_until__lt=now) | Q(fire_deadline__lt=now)
        )

    def for_execution(self, execution: Any) -> TimerQuerySet:
        return self.filter(execution=execution)

    def terminal(self) -> TimerQuerySet:
        return self.filter(status__in=TERMINAL_TIMER_STATUSES)


class Timer(models.Model):
    # No database constraint: a timer outlives a deleted execution, and firing it then finds
    # the execution missing and discards it (SCXML 6.2), instead of the row vanishing.
    # No index of its own: the unique (execution, ordinal) one starts with it, and serves
    # "the timers of X"; every index is one more write per fire (the take is not a HOT update).
    execution = models.ForeignKey(
        "statecharts.Execution",
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        related_name="timers",
    )
    send_id = models.CharField(max_length=200, help_text="Cancellation key, with the execution.")
    ordinal = models.PositiveIntegerField(help_text="Deduplication key, with the execution.")
    event = PortableJSONField(help_text="name, type, data, sendid, origin, origintype, invokeid")
    codec = models.CharField(
        max_length=40,
        default="json",
        db_default="json",
        help_text="The payload codec that wrote its event data: a name in PAYLOAD_CODECS.",
    )
    target = PortableJSONField(help_text="Resolved when scheduled: kind and session or invoke id.")
    due = models.DateTimeField(help_text="Absolute, computed once from the scheduling step.")
    macrostep = models.PositiveIntegerField()
    microstep = models.PositiveIntegerField()
    round = models.PositiveIntegerField()
    content_index = models.IntegerField(null=True, blank=True)
    owner = models.CharField(max_length=200, blank=True, help_text="The block that scheduled it.")
    context = PortableJSONField(
        null=True, blank=True, help_text="Opaque caller context (row data, never a key)."
    )
    scheduled_in = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="The history seq of the step that scheduled it (null: written before it "
        "was recorded).",
    )
    # A name, looked up in STATECHARTS["TIMER_DELIVERIES"] when the timer fires: never a
    # dotted path read from a row. A database default too, so rows written by raw SQL (or by
    # a node still running the previous code) name the default delivery.
    delivery = models.CharField(
        max_length=100,
        default="default",
        db_default="default",
        help_text="The delivery that fires it: a name registered in TIMER_DELIVERIES.",
    )
    fire_timeout_seconds = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Per-fire timeout (TIMER_FIRE_TIMEOUT_SECONDS when scheduled); null: none, "
        "the claim's lease alone bounds an attempt.",
    )
    # The design documents' Cancel effect, as the row keeps it: the step that cancelled it
    # (seq), the <cancel>'s ordinal, content index and owner block, and that step's caller
    # context (statecharts.policies.attribution). Row data, never a key.
    cancelled_by = PortableJSONField(
        null=True,
        blank=True,
        help_text="The <cancel> that cancelled it: step, ordinal, content index, owner "
        "block, caller context.",
    )
    # The chart's ds:expires (statecharts.core.expiry) made absolute when it was scheduled:
    # its first due plus the expiry. A fire after it records the row ``expired`` and tells the
    # chart instead of delivering (timers.expiry). Null: delivered however late (SCXML 6.2).
    expires_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Not delivered after this (the send's ds:expires); null: however late.",
    )
    status = models.CharField(
        max_length=12, choices=TimerStatus.choices, default=TimerStatus.PENDING
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    last_error = PortableTextField(blank=True)
    reason = models.CharField(max_length=300, blank=True, help_text="Why it was settled so.")
    # The claim of the firer working on it. Two bounds, either of which ends the attempt
    # (the first to pass; the next claim then spends the attempt): the lease, which a live
    # firer may renew, and the per-fire deadline, which nothing renews, so a hung fire is
    # bounded even where leases are kept alive by heartbeats.
    claimed_until = models.DateTimeField(
        null=True, blank=True, help_text="The claim's lease (null: not claimed)."
    )
    fire_deadline = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When the current claim's per-fire timeout passes (never renewed).",
    )
    # The current claim's fence token (random, one per claim): only the firer holding it may
    # take, settle or snooze the row, or renew its lease (timers.leases). A firer whose lease
    # ran out and whose rows another claim took over finds another token, and changes nothing.
    claim_token = models.BigIntegerField(
        null=True, blank=True, help_text="The current claim's fence token (null: never claimed)."
    )
    created = models.DateTimeField()
    settled = models.DateTimeField(null=True, blank=True)

    objects = TimerQuerySet.as_manager()

    class Meta:
        ordering = ["due", "id"]
        constraints = [
            # Unique across every status, forever: a replayed step cannot schedule twice.
            models.UniqueConstraint(fields=["execution", "ordinal"], name="timers_timer_dedup")
        ]
        # The operator's actions on a pending timer (timers.operating), one permission each.
        permissions = [
            ("fire_timer", "Can fire a pending timer now"),
            ("cancel_timer", "Can cancel a pending timer"),
            ("reschedule_timer", "Can reschedule a pending timer"),
        ]
        indexes = [
            models.Index(
                fields=["due", "id"],
                condition=Q(status="pending"),
                name="timers_timer_due",
            ),
            models.Index(
                fields=["execution", "send_id"],
                condition=Q(status="pending"),
                name="timers_timer_cancel",
            ),
            # Partial: a pending row has no settled time, and pruning asks for settled rows
            # only (``settled < cutoff`` implies the condition), so scheduling a timer writes
            # no entry here.
            models.Index(
                fields=["settled"],
                condition=Q(settled__isnull=False),
                name="timers_timer_settled",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event.get('name')} due {self.due:%Y-%m-%d %H:%M:%S} ({self.status})"


class RouteTimer(models.Model):
    """A delayed route send waiting until due: the default route timer queue's row
    (``timers.routequeue``; the TimerQueue behaviour is ``routes.queue``).

    Two keys: ``(execution, send_id)`` is the cancellation key (``<cancel>``), ``key`` (the
    route's idempotency key) the dedup key: at most one row per key. The row is deleted when
    it fires, is cancelled or discarded; its fate is kept in the routes app's delivery ledger.
    """

    # No database constraint: a row outlives a deleted execution; firing it then finds the
    # execution missing and deletes it undelivered, with the reason in the ledger.
    execution = models.ForeignKey(
        "statecharts.Execution",
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="route_timers",
    )
    send_id = models.CharField(max_length=200, help_text="Cancellation key, with the execution.")
    key = models.CharField(max_length=255, unique=True, help_text="Dedup key (idempotency key).")
    route = models.CharField(max_length=100, help_text="The route's registered name.")
    config = PortableJSONField(help_text="The route's configuration under the scope.")
    message = PortableJSONField(
        help_text="The send: routes.base.RouteMessage as JSON, its data as the payload codec "
        "wrote it."
    )
    codec = models.CharField(
        max_length=40,
        default="json",
        db_default="json",
        help_text="The payload codec that wrote the message's data: a name in PAYLOAD_CODECS.",
    )
    due = models.DateTimeField()
    scheduled_in = models.PositiveIntegerField(
        null=True, blank=True, help_text="The history seq of the step that scheduled it."
    )
    # The caller context of the scheduling step (statecharts.policies.attribution): its
    # delivery's telemetry joins that step's trace (docs/telemetry.md). Row data, never a key.
    context = PortableJSONField(
        null=True, blank=True, help_text="Opaque caller context of the scheduling step."
    )
    reason = models.CharField(
        max_length=300, blank=True, help_text="Why it was snoozed last (empty: never)."
    )
    claimed_until = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField()

    class Meta:
        ordering = ["due", "id"]
        indexes = [
            models.Index(fields=["due", "id"], name="timers_routetimer_due"),
            models.Index(fields=["execution", "send_id"], name="timers_routetimer_cancel"),
        ]
        permissions = [
            ("fire_routetimer", "Can fire a waiting route timer now"),
            ("cancel_routetimer", "Can cancel a waiting route timer"),
            ("reschedule_routetimer", "Can reschedule a waiting route timer"),
        ]

    def __str__(self) -> str:
        return f"{self.route} {self.message.get('name')} due {self.due:%Y-%m-%d %H:%M:%S}"

    def decoded_message(self) -> dict[str, Any]:
        """The send as it was scheduled, its data decoded with the row's payload codec
        (``statecharts.policies.codecs``): raises ``CodecUnavailable`` (the codec or key is not
        deployed here) or ``CorruptPayload`` (it can never be read)."""
        stored = self.message if isinstance(self.message, dict) else {}
        return {**stored, "data": codecs.decode_value(stored.get("data"), self.codec)}


def encode_route_message(message: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """A route send as its row stores it: its ``data`` as the payload codec writes it
    (``statecharts.policies.codecs``), the rest (route, type, target, name, ids) in clear, as the
    routes app's delivery ledger keeps them; and the codec's name."""
    data, codec = codecs.encode_value(message.get("data"))
    return {**message, "data": data}, codec


# A <cancel sendidexpr> computes its send id from data that may hold a NUL: it cancels
# nothing, as for any send id no timer has (statecharts.models.fields).
nul_matches_nothing(Timer._meta.get_field("send_id"), RouteTimer._meta.get_field("send_id"))
