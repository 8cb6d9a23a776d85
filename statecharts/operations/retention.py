"""Retention: how long finished work is kept (erasing what a person gave is
:mod:`statecharts.operations.erasure`; both walk the rows every app registers here).

**Retention.** Rows about executions pile up: finished executions, their history, settled
timers, delivered outbox messages, settled invocations. Each app says how its rows are pruned
by registering an :class:`ExecutionRows` from its ``AppConfig.ready()`` (``statecharts``
imports no other app: the timers and invocations apps register theirs, and so can any app
that keeps rows about executions)::

    from statecharts.operations import retention

    retention.register(retention.ExecutionRows(
        app="timers", name="timers", description="settled timers of finished executions",
        retention=lambda: timedelta(days=...), prune=..., count=...,
        holds=..., delete=..., erase=...,
    ))

:func:`prune` runs every registered stage, in registration order (``statecharts`` first:
``executions``, ``history``, ``outbox``), each in batches of at most ``PRUNE_BATCH``, **each
batch its own short transaction** that locks the executions whose rows it deletes (in
ascending id order, ``stepper.lock_many``) before deleting them: the lock order of every step
(execution, then the rows it owns). ``manage.py statechart prune`` and the hourly django-q2
task (:func:`scheduled_prune`) call it.

**What is never pruned:** anything of an execution that may still step (``active``,
``halted``, ``needs_migration``, ``needs_repair``): its row, its history (replay reads it),
its timers (the ``(execution, ordinal)`` key must stay unique for it), its outbox and
invocations; and a row that is not settled (a pending timer, a pending outbox message, an
open invocation), whoever it belongs to. A finished execution is deleted only once every app
says it holds nothing unsettled of it (``holds``), and then with every app's rows of it
(``delete``), in the same transaction.

**Erasure.** :func:`erase` removes the personal data of executions (one, or every execution
with a business key, and their invoked children): the datamodel (the position), donedata,
metadata and the business key; the data of every input in the history; what they sent
(outbox); and what each app keeps (``erase``: timers' event data and context, invocations'
parameters). It is recorded: each execution gets a history entry with the disposition
``erased`` (who asked, why, how many rows each app erased) and its ``erased`` time, so
:func:`statecharts.operations.replay.replay` reports "erased" instead of a divergence.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from django.apps import apps
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.db.models import Exists, Model, OuterRef, Q

from statecharts import stepper
from statecharts.conf import statecharts_settings
from statecharts.models import AppliedMessage, Execution, HistoryEntry, OutboxMessage, StartKey
from statecharts.models.history import Disposition
from statecharts.models.outbox import OutboxStatus
from statecharts.statuses import TERMINAL_STATUSES

SCHEDULE_NAME = "statecharts retention: prune"
SCHEDULED_PRUNE = "statecharts.operations.retention.scheduled_prune"
SCHEDULE_MINUTES = 60

# History entries that record what was done to the rows, not an input: kept by pruning
# (they are what says the rest is gone), skipped by replay.
MARKERS = (Disposition.ERASED, Disposition.PRUNED)


class PruneBatch(NamedTuple):
    """What one batch did: rows deleted, and the key to continue after (None: finished)."""

    deleted: int
    last: int | None


def _holds_nothing(execution_ids: Sequence[int]) -> set[int]:
    return set()


def _owns_nothing(execution_ids: Sequence[int]) -> int:
    return 0


@dataclass(frozen=True, slots=True)
class ExecutionRows:
    """What one app keeps about executions, and how retention and erasure treat it.

    - ``retention()``: how long its settled rows are kept (None: forever, the stage is
      skipped); read at each run, so it follows the settings.
    - ``prune(cutoff, limit, after)``: delete one batch of its rows settled before ``cutoff``
      with a key greater than ``after``, at most about ``limit`` rows; it runs inside a
      transaction of its own, and must lock the executions whose rows it deletes first
      (``stepper.lock_many``). Returns a :class:`PruneBatch`. ``count(cutoff)``: how many rows
      ``prune`` would delete now (the command's progress and ``--dry-run``).
    - ``holds(execution_ids)``: those of these finished executions it still has unsettled
      rows of (a pending timer, an open invocation): they are not deleted this time.
    - ``delete(execution_ids)``: delete all its rows of these executions (finished, locked,
      about to be deleted, in the same transaction). Returns how many.
    - ``erase(execution_ids)``: remove the personal data from its rows of these executions
      (finished, locked), keeping what the rows are for. Returns how many rows it changed.
    """

    app: str
    name: str
    description: str
    retention: Callable[[], timedelta | None] | None = None
    prune: Callable[[datetime, int, int], PruneBatch] | None = None
    count: Callable[[datetime], int] | None = None
    holds: Callable[[Sequence[int]], set[int]] = _holds_nothing
    delete: Callable[[Sequence[int]], int] = _owns_nothing
    erase: Callable[[Sequence[int]], int] = _owns_nothing


_registered: dict[str, ExecutionRows] = {}


def register(rows: ExecutionRows) -> None:
    """Register an app's rows (from ``AppConfig.ready()``). A name belongs to the app that
    registered it first; the same app registering it again replaces it."""
    taken = _registered.get(rows.name)
    if taken is not None and taken.app != rows.app:
        raise ImproperlyConfigured(
            f"{rows.app!r} registers the retention stage {rows.name!r}, which {taken.app!r} "
            "registered already"
        )
    if (rows.prune is None) != (rows.count is None) or (
        rows.prune is not None and rows.retention is None
    ):
        raise ImproperlyConfigured(
            f"retention stage {rows.name!r}: prune, count and retention go together"
        )
    _registered[rows.name] = rows


def registered() -> list[ExecutionRows]:
    """The installed apps' rows, in registration order."""
    return [rows for rows in _registered.values() if apps.is_installed(rows.app)]


def stage_names() -> list[str]:
    return [rows.name for rows in registered() if rows.prune is not None]


def days(setting: str) -> Callable[[], timedelta | None]:
    """A ``retention`` reading ``STATECHARTS[setting]`` (days; None: forever)."""

    def retention() -> timedelta | None:
        value = getattr(statecharts_settings, setting)
        return None if value is None else timedelta(days=value)

    return retention


# ---- pruning ----------------------------------------------------------------------------------


@dataclass(slots=True)
class StageReport:
    name: str
    description: str
    retention: timedelta | None
    cutoff: datetime | None
    deleted: int = 0
    batches: int = 0
    to_delete: int | None = None  # counted at the start (dry run, progress)
    complete: bool = True  # False: stopped by the deadline with rows left

    def __str__(self) -> str:
        if self.retention is None:
            return f"{self.name}: kept forever (no retention set)"
        if self.cutoff is None:
            return f"{self.name}: skipped"
        kept = days_text(self.retention)
        done = "" if self.complete else " (stopped: out of time; the rest next run)"
        return (
            f"{self.name}: {self.deleted:,} row(s) deleted in {self.batches} batch(es), "
            f"older than {kept}{done}"
        )


def days_text(span: timedelta) -> str:
    value = span.total_seconds() / 86_400
    return f"{value:g} day{'s' if value != 1 else ''}"


@dataclass(slots=True)
class PruneReport:
    stages: list[StageReport] = field(default_factory=list)
    dry_run: bool = False

    @property
    def deleted(self) -> int:
        return sum(stage.deleted for stage in self.stages)

    @property
    def complete(self) -> bool:
        return all(stage.complete for stage in self.stages)

    def as_dict(self) -> dict[str, Any]:
        return {
            stage.name: {"deleted": stage.deleted, "complete": stage.complete}
            for stage in self.stages
        }


Progress = Callable[[StageReport], None]


def prune(
    *,
    now: datetime | None = None,
    batch: int | None = None,
    only: Iterable[str] | None = None,
    retention: dict[str, timedelta | None] | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
    deadline: float | None = None,
    monotonic: Callable[[], float] = time.monotonic,
) -> PruneReport:
    """Prune every registered stage (or those named in ``only``) whose retention is set.

    ``retention`` overrides a stage's setting by name (None: keep forever). Each batch is
    one transaction; ``progress(stage)`` is called after each. With ``deadline`` (a
    ``monotonic()`` time) it stops between batches once it has passed, leaving the rest for
    the next run. ``dry_run`` counts what would be deleted and deletes nothing.
    """
    now = now or statecharts_settings.now()
    limit = statecharts_settings.PRUNE_BATCH if batch is None else batch
    if limit < 1:
        raise ValueError("the batch size must be at least 1")
    stages = {rows.name: rows for rows in registered() if rows.prune is not None}
    names = list(stages) if only is None else list(only)
    unknown = [name for name in names if name not in stages]
    if unknown:
        raise ValueError(
            f"no retention stage named {', '.join(map(repr, unknown))}; stages: {', '.join(stages)}"
        )
    overrides = retention or {}
    report = PruneReport(dry_run=dry_run)
    for name in names:
        rows = stages[name]
        assert rows.prune is not None and rows.count is not None and rows.retention is not None
        kept = overrides[name] if name in overrides else rows.retention()
        cutoff = None if kept is None else now - kept
        stage = StageReport(name, rows.description, kept, cutoff)
        report.stages.append(stage)
        if cutoff is None:
            continue
        stage.to_delete = rows.count(cutoff)
        if dry_run:
            continue
        after = 0
        while True:
            if deadline is not None and monotonic() >= deadline:
                stage.complete = False
                break
            with transaction.atomic(using=stepper.database(), durable=True):
                done = rows.prune(cutoff, limit, after)
            if done.last is None:  # nothing was left
                break
            stage.deleted += done.deleted
            stage.batches += 1
            if progress is not None:
                progress(stage)
            after = done.last
        if not stage.complete:
            break
    return report


def scheduled_prune(*, monotonic: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """The hourly django-q2 task: prune for at most ``task_budget()`` seconds (what is left
    waits for the next run). Does nothing while ``PRUNE_SCHEDULED`` is False."""
    if not statecharts_settings.PRUNE_SCHEDULED:
        return {"skipped": "STATECHARTS['PRUNE_SCHEDULED'] is False"}
    report = prune(deadline=monotonic() + task_budget(), monotonic=monotonic)
    return report.as_dict()


def task_budget() -> float:
    """Seconds the scheduled task may run: ``PRUNE_TASK_SECONDS``, ending before the
    cluster's ``timeout`` kills it and before its ``retry`` hands it out again."""
    seconds = float(statecharts_settings.PRUNE_TASK_SECONDS)
    if not apps.is_installed("django_q"):
        return seconds
    from django_q.conf import Conf

    for bound in (Conf.TIMEOUT, Conf.RETRY):
        if bound and bound > 0:
            seconds = min(seconds, bound - min(10.0, bound / 2))
    return seconds


def ensure_schedule_after_migrate(sender: Any, using: str, **kwargs: Any) -> None:
    """``post_migrate`` receiver: the hourly prune's django-q2 schedule."""
    from statecharts.stepper.sweeper import ensure_scheduled

    ensure_scheduled(SCHEDULE_NAME, SCHEDULED_PRUNE, minutes=SCHEDULE_MINUTES, using=using)


# ---- the statecharts app's own stages ----------------------------------------------------------


def _finished() -> Q:
    return Q(status__in=TERMINAL_STATUSES)


def live_execution(column: str) -> Exists:
    """An execution that may still step, with the id in ``column`` of the outer row."""
    return Exists(
        Execution.objects.filter(pk=OuterRef(column)).exclude(status__in=TERMINAL_STATUSES)
    )


@dataclass(frozen=True, slots=True)
class SettledRows:
    """The usual ``prune`` and ``count`` of an :class:`ExecutionRows` for an app whose rows
    each belong to one execution (the id in ``owner``): the rows ``settled(cutoff)`` selects,
    of executions that can no longer step, deleted in batches by id, their executions
    locked first (the lock order of every step: the execution, then its rows)."""

    model: type[Model]
    owner: str
    settled: Callable[[datetime], Q]

    def _prunable(self, cutoff: datetime, database: str | None = None) -> Any:
        rows = self.model._default_manager.using(database)
        return rows.filter(self.settled(cutoff)).filter(~live_execution(self.owner))

    def prune(self, cutoff: datetime, limit: int, after: int) -> PruneBatch:
        """Delete up to ``limit`` rows with an id above ``after``; runs in the caller's
        transaction."""
        prunable = self._prunable(cutoff, stepper.database())
        candidates = list(
            prunable.filter(pk__gt=after).order_by("pk").values_list("pk", self.owner)[:limit]
        )
        if not candidates:
            return PruneBatch(0, None)
        stepper.lock_many({owner for _, owner in candidates})
        deleted = prunable.filter(pk__in=[pk for pk, _ in candidates]).delete()[0]
        return PruneBatch(deleted, candidates[-1][0])

    def count(self, cutoff: datetime) -> int:
        return int(self._prunable(cutoff).count())


def _within_rows(candidates: list[tuple[int, int]], limit: int) -> list[int]:
    """A prefix of (execution id, steps) whose history rows (about ``steps`` each) stay within
    ``limit``, at least one: a batch deletes about ``limit`` rows, however long the
    histories."""
    chosen: list[int] = []
    rows = 0
    for pk, steps in candidates:
        if chosen and rows + steps > limit:
            break
        chosen.append(pk)
        rows += steps
    return chosen


def _prune_executions(cutoff: datetime, limit: int, after: int) -> PruneBatch:
    """Delete finished executions that ended before ``cutoff``, with every app's rows of them,
    except those an app still holds unsettled rows of."""
    database = stepper.database()
    candidates = list(
        Execution.objects.using(database)
        .filter(_finished(), ended__lt=cutoff, pk__gt=after)
        .order_by("pk")
        .values_list("pk", "steps")[:limit]
    )
    if not candidates:
        return PruneBatch(0, None)
    chosen = _within_rows(candidates, limit)
    locked = stepper.lock_many(set(chosen))
    ids = sorted(
        pk
        for pk, execution in locked.items()
        if execution.status in TERMINAL_STATUSES
        and execution.ended is not None
        and execution.ended < cutoff
    )
    everyone = registered()
    held: set[int] = set()
    for rows in everyone:
        held |= rows.holds(ids)
    ids = [pk for pk in ids if pk not in held]
    deleted = 0
    for rows in everyone:
        deleted += rows.delete(ids)
    deleted += Execution.objects.using(database).filter(pk__in=ids).delete()[0]
    return PruneBatch(deleted, chosen[-1])


def _count_executions(cutoff: datetime) -> int:
    return Execution.objects.filter(_finished(), ended__lt=cutoff).count()


def _with_inputs() -> Exists:
    return Exists(
        HistoryEntry.objects.filter(execution=OuterRef("pk")).exclude(disposition__in=MARKERS)
    )


def _prune_history(cutoff: datetime, limit: int, after: int) -> PruneBatch:
    """Delete the history of finished executions that ended before ``cutoff`` (the execution
    row stays), leaving a ``pruned`` entry that says so (replay reports it)."""
    database = stepper.database()
    candidates = list(
        Execution.objects.using(database)
        .filter(_finished(), _with_inputs(), ended__lt=cutoff, pk__gt=after)
        .order_by("pk")
        .values_list("pk", "steps")[:limit]
    )
    if not candidates:
        return PruneBatch(0, None)
    chosen = _within_rows(candidates, limit)
    deleted = 0
    now = statecharts_settings.now()
    for pk, execution in stepper.lock_many(set(chosen)).items():
        if execution.status not in TERMINAL_STATUSES or execution.ended is None:
            continue
        entries = HistoryEntry.objects.using(database).filter(execution_id=pk)
        gone = entries.exclude(disposition__in=MARKERS).delete()[0]
        if gone:
            deleted += gone
            record_marker(
                execution,
                {"kind": "history_pruned"},
                Disposition.PRUNED,
                f"history pruned: {gone} entr{'y' if gone == 1 else 'ies'} of an execution "
                f"that ended {execution.ended.isoformat()} (retention)",
                [{"kind": "history_pruned", "entries": gone}],
                now,
            )
    return PruneBatch(deleted, chosen[-1])


def _count_history(cutoff: datetime) -> int:
    finished = Execution.objects.filter(_finished(), ended__lt=cutoff).values("pk")
    return (
        HistoryEntry.objects.filter(execution_id__in=finished)
        .exclude(disposition__in=MARKERS)
        .count()
    )


def _settled_outbox() -> Q:
    return Q(status__in=(OutboxStatus.DELIVERED, OutboxStatus.UNDELIVERABLE))


def _prune_outbox(cutoff: datetime, limit: int, after: int) -> PruneBatch:
    """Delete delivered and undeliverable messages settled before ``cutoff`` whose sender has
    finished (or is gone): never a pending one, never one of a sender that may still step."""
    database = stepper.database()
    settled = OutboxMessage.objects.using(database).filter(
        _settled_outbox(), delivered__lt=cutoff, pk__gt=after
    )
    candidates = list(
        settled.filter(~live_execution("sender_id"))
        .order_by("pk")
        .values_list("pk", "sender_id")[:limit]
    )
    if not candidates:
        return PruneBatch(0, None)
    stepper.lock_many({sender for _, sender in candidates})
    deleted = (
        settled.filter(pk__in=[pk for pk, _ in candidates])
        .filter(~live_execution("sender_id"))
        .delete()[0]
    )
    return PruneBatch(deleted, candidates[-1][0])


def _count_outbox(cutoff: datetime) -> int:
    return (
        OutboxMessage.objects.filter(_settled_outbox(), delivered__lt=cutoff)
        .filter(~live_execution("sender_id"))
        .count()
    )


def _pending_outbox(execution_ids: Sequence[int]) -> set[int]:
    return set(
        OutboxMessage.objects.using(stepper.database())
        .pending()
        .filter(sender_id__in=execution_ids)
        .values_list("sender_id", flat=True)
    )


def _delete_outbox(execution_ids: Sequence[int]) -> int:
    database = stepper.database()
    deleted = OutboxMessage.objects.using(database).filter(sender_id__in=execution_ids).delete()
    applied = AppliedMessage.objects.using(database).filter(execution_id__in=execution_ids)
    return deleted[0] + applied.delete()[0]


def _delete_history(execution_ids: Sequence[int]) -> int:
    entries = HistoryEntry.objects.using(stepper.database()).filter(execution_id__in=execution_ids)
    return entries.delete()[0]


def record_marker(
    execution: Execution,
    what: dict[str, Any],
    disposition: str,
    reason: str,
    effects: list[dict[str, Any]],
    now: datetime,
    *,
    caller_context: dict[str, Any] | None = None,
) -> None:
    """Append a marker entry to a locked execution's history (the next seq), with the
    caller context of the door that asked for it, if any."""
    execution.steps += 1
    execution.updated = now
    execution.save(update_fields=["steps", "updated"])
    HistoryEntry.of(
        execution,
        input=what,
        disposition=disposition,
        effects=effects,
        reason=reason[:10_000],
        created=now,
        caller_context=caller_context,
    ).save(using=stepper.database(), force_insert=True)


def erased_input(raw: Any) -> dict[str, Any]:
    """An input with its data gone: its kind and its event's name stay (the audit trail)."""
    if not isinstance(raw, dict):
        return {"kind": "(unreadable)", "erased": True}
    kept: dict[str, Any] = {"kind": raw.get("kind"), "erased": True}
    event = raw.get("event")
    if isinstance(event, dict):
        kept["event"] = {k: event[k] for k in ("name", "type") if k in event}
    return kept


# ---- the statecharts app's erasure of its own rows (statecharts.operations.erasure) -----------


def _erase_history(execution_ids: Sequence[int]) -> int:
    database = stepper.database()
    # A start's idempotency key may name the person ("signup-alice@example.com"): it goes
    # with the history's keys (a retry with it after the erasure would start anew).
    StartKey.objects.using(database).filter(execution_id__in=execution_ids).delete()
    entries = (
        HistoryEntry.objects.using(database)
        .filter(execution_id__in=execution_ids)
        .exclude(disposition__in=MARKERS)
        .only("pk", "input", "effects", "caller_context")
    )
    changed: list[HistoryEntry] = []
    for entry in entries.iterator(chunk_size=500):
        entry.input = erased_input(entry.input)
        effects = entry.effects if isinstance(entry.effects, list) else []
        entry.effects = [
            {"kind": effect.get("kind")} if isinstance(effect, dict) else {} for effect in effects
        ]
        entry.reason = ""
        entry.idempotency_key = None
        entry.caller_context = None  # who acted (a user, a request) is personal data too
        changed.append(entry)
    HistoryEntry.objects.using(database).bulk_update(
        changed,
        ["input", "effects", "reason", "idempotency_key", "caller_context"],
        batch_size=500,
    )
    return len(changed)


def _erase_outbox(execution_ids: Sequence[int]) -> int:
    database = stepper.database()
    messages = OutboxMessage.objects.using(database).filter(sender_id__in=execution_ids)
    changed: list[OutboxMessage] = []
    for message in messages.only("pk", "event", "caller_context").iterator(chunk_size=500):
        event = dict(message.event) if isinstance(message.event, dict) else {}
        event["data"] = None
        event.pop("raw", None)
        message.event = event
        message.last_error = ""
        message.reason = ""
        message.caller_context = None
        changed.append(message)
    OutboxMessage.objects.using(database).bulk_update(
        changed, ["event", "last_error", "reason", "caller_context"], batch_size=500
    )
    return len(changed)


register(
    ExecutionRows(
        app="statecharts",
        name="executions",
        description="finished executions, with everything every app keeps about them",
        retention=days("EXECUTION_RETENTION_DAYS"),
        prune=_prune_executions,
        count=_count_executions,
    )
)
register(
    ExecutionRows(
        app="statecharts",
        name="history",
        description="the history of finished executions (a 'pruned' entry stays)",
        retention=days("HISTORY_RETENTION_DAYS"),
        prune=_prune_history,
        count=_count_history,
        delete=_delete_history,
        erase=_erase_history,
    )
)
register(
    ExecutionRows(
        app="statecharts",
        name="outbox",
        description="delivered and undeliverable messages of finished senders",
        retention=days("OUTBOX_RETENTION_DAYS"),
        prune=_prune_outbox,
        count=_count_outbox,
        holds=_pending_outbox,
        delete=_delete_outbox,
        erase=_erase_outbox,
    )
)
