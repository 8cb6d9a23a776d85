"""Erasure: removing what a person gave, recorded (``manage.py statechart erase``, the admin's
erase action).

:func:`erase` removes the personal data of executions (one, or every execution with a business
key, and their invoked children): the datamodel (the position), donedata, metadata and the
business key; the data of every input in the history; what they sent (outbox); and what each
app keeps (the ``erase`` of each :class:`~statecharts.operations.retention.ExecutionRows` an
app registered: timers' event data and context, invocations' parameters). It is recorded: each
execution gets a history entry with the disposition ``erased`` (who asked, why, how many rows
each app erased) and its ``erased`` time, so :func:`statecharts.operations.replay.replay`
reports "erased" instead of a divergence.

Lock order: the executions are locked in ascending id order (``stepper.lock_many``) before any
of their rows is written, as in every step.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction

from statecharts import stepper
from statecharts.conf import statecharts_settings
from statecharts.models import Execution
from statecharts.models.history import Disposition
from statecharts.operations.retention import record_marker, registered
from statecharts.statuses import TERMINAL_STATUSES


class ErasureRefused(ValueError):
    """Nothing was erased: the reason says why (e.g. executions still running)."""


@dataclass(frozen=True, slots=True)
class ErasureReport:
    execution_ids: tuple[int, ...]  # what was erased (the children of those asked for too)
    cancelled: tuple[int, ...]  # cancelled first (erase(..., cancel=True))
    rows: dict[str, int]  # rows changed, by stage name

    def __str__(self) -> str:
        if not self.execution_ids:
            return "nothing to erase"
        counts = ", ".join(f"{name} {n}" for name, n in self.rows.items() if n)
        cancelled = f", {len(self.cancelled)} cancelled first" if self.cancelled else ""
        return (
            f"erased {len(self.execution_ids)} execution(s){cancelled}"
            f" ({counts or 'no rows held personal data'})"
        )


def family(execution_ids: Iterable[int]) -> list[int]:
    """These executions (those that exist) and their invoked children, grandchildren, ...,
    ascending."""
    found = set(Execution.objects.filter(pk__in=list(execution_ids)).values_list("pk", flat=True))
    frontier = set(found)
    while frontier:
        children = set(
            Execution.objects.filter(parent_id__in=frontier).values_list("pk", flat=True)
        )
        frontier = children - found
        found |= frontier
    return sorted(found)


def executions_with_key(business_key: str, *, chart: Any = None) -> list[int]:
    """The executions with this business key (of ``chart``, or of every chart)."""
    found = Execution.objects.filter(business_key=business_key)
    if chart is not None:
        found = found.filter(chart=chart)
    return list(found.order_by("pk").values_list("pk", flat=True))


def erase(
    executions: Iterable[Execution | int],
    *,
    reason: str = "",
    requested_by: str = "",
    cancel: bool = False,
    now: datetime | None = None,
    caller_context: dict[str, Any] | None = None,
) -> ErasureReport:
    """Erase the personal data of these executions and of their invoked children (see the
    module docstring), recorded in each one's history.

    Executions that may still step are refused (:class:`ErasureRefused`, nothing erased)
    unless ``cancel``: then each is cancelled first, each in its own step through the stepper
    (its ``<onexit>`` runs, its children are cancelled), and erased afterwards. An input that
    arrives after the erasure is recorded as usual (erase again to remove it). Erasing an
    execution twice erases what came since, and records it again. ``caller_context`` (the
    door's: the admin's request, the API's, the command's) is recorded with each entry, as
    for every operator action."""
    asked = [e.pk if isinstance(e, Execution) else int(e) for e in executions]
    ids = family(asked)
    if not ids:
        return ErasureReport((), (), {})
    cancelled: list[int] = []
    live = _live(ids)
    if live and not cancel:
        shown = ", ".join(map(str, live[:10])) + (" ..." if len(live) > 10 else "")
        raise ErasureRefused(
            f"{len(live)} execution(s) may still step ({shown}): cancel them first, or ask "
            "for them to be cancelled (cancel=True, --cancel)"
        )
    for _ in range(10):  # (cancelling a parent cancels its children through the outbox)
        if not live:
            break
        for pk in live:
            stepper.cancel(pk)
            cancelled.append(pk)
        ids = family(ids)
        live = _live(ids)
    if live:
        raise ErasureRefused(f"executions {live[:10]} are still running after being cancelled")
    rows: dict[str, int] = {}
    size = statecharts_settings.PRUNE_BATCH
    for start in range(0, len(ids), size):
        chunk = ids[start : start + size]
        with transaction.atomic(using=stepper.database(), durable=True):
            erased = _erase_locked(chunk, reason, requested_by, now, caller_context)
            for name, count in erased.items():
                rows[name] = rows.get(name, 0) + count
    return ErasureReport(tuple(ids), tuple(cancelled), rows)


def erase_business_key(business_key: str, *, chart: Any = None, **options: Any) -> ErasureReport:
    """``erase`` every execution with this business key (of ``chart``, or of every chart)."""
    return erase(executions_with_key(business_key, chart=chart), **options)


def _live(ids: Sequence[int]) -> list[int]:
    return list(
        Execution.objects.filter(pk__in=ids)
        .exclude(status__in=TERMINAL_STATUSES)
        .order_by("pk")
        .values_list("pk", flat=True)
    )


def _erase_locked(
    ids: Sequence[int],
    reason: str,
    requested_by: str,
    now: datetime | None,
    caller_context: dict[str, Any] | None,
) -> dict[str, int]:
    locked = stepper.lock_many(set(ids))
    running = [pk for pk, e in locked.items() if e.status not in TERMINAL_STATUSES]
    if running:  # (it was finished a moment ago: a finished execution never steps again)
        raise ErasureRefused(f"executions {running} may still step")
    found = sorted(locked)
    counts: dict[str, int] = {}
    for rows in registered():
        counts[rows.name] = counts.get(rows.name, 0) + rows.erase(found)
    counts["executions"] = len(found)
    now = now or statecharts_settings.now()
    said = f"personal data erased{f' by {requested_by}' if requested_by else ''}"
    said += f": {reason}" if reason else ""
    summary = [{"kind": "erased", "stage": name, "rows": n} for name, n in counts.items()]
    for pk in found:
        execution = locked[pk]
        _erase_execution_row(execution, now)
        record_marker(
            execution,
            {"kind": "erasure"},
            Disposition.ERASED,
            said,
            summary,
            now,
            caller_context=caller_context,
        )
    return counts


def _erase_execution_row(execution: Execution, now: datetime) -> None:
    execution.position = b""  # (the datamodel is in it; a finished execution is never decoded)
    execution.donedata = None
    execution.donedata_error = ""
    execution.failure_reason = ""
    execution.metadata = {}
    execution.business_key = None
    execution.erased = now
    execution.save(
        update_fields=[
            "position",
            "donedata",
            "donedata_error",
            "failure_reason",
            "metadata",
            "business_key",
            "erased",
        ]
    )
