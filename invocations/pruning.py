"""The invocations app's rows for retention and erasure (``statecharts.operations.retention``).

An invocation row is its parent's. Settled rows (done, failed, cancelled) of parents that can
no longer step are pruned ``INVOKE_RETENTION_DAYS`` after they settled (their ``updated``
time); an open invocation (starting, active) is never pruned, and a finished parent with one
is kept until it settles. The child executions are executions of their own: retention treats
them like any other.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db.models import Q

from invocations.models import OPEN_STATUSES, Invocation
from statecharts import stepper
from statecharts.operations import retention

STAGE = "invocations"


def _prunable(cutoff: datetime) -> Q:
    return ~Q(status__in=OPEN_STATUSES) & Q(updated__lt=cutoff)


_settled = retention.SettledRows(Invocation, "parent_id", _prunable)
prune_batch = _settled.prune  # settled invocation rows of executions that can no longer step
count = _settled.count


def holds(execution_ids: Sequence[int]) -> set[int]:
    """Finished parents with an invocation still open (being cancelled)."""
    open_rows = Invocation.objects.using(stepper.database()).filter(
        parent_id__in=execution_ids, status__in=OPEN_STATUSES
    )
    return set(open_rows.values_list("parent_id", flat=True))


def delete(execution_ids: Sequence[int]) -> int:
    rows = Invocation.objects.using(stepper.database()).filter(parent_id__in=execution_ids)
    return rows.delete()[0]


def erase(execution_ids: Sequence[int]) -> int:
    """Remove the parent's data from its invocation rows: the parameters, the caller's
    context, errors and reasons, and a child chart defined at run time (from data); what was
    invoked (type, state, the child chart by hash) and how it ended stay."""
    rows = Invocation.objects.using(stepper.database()).filter(parent_id__in=execution_ids)
    changed = rows.update(params=None, caller_context=None, last_error="", reason="")
    rows.filter(defined_at_run_time=True).update(src="", content="")
    return changed


def register() -> None:
    retention.register(
        retention.ExecutionRows(
            app="invocations",
            name=STAGE,
            description="settled invocations of finished parents",
            retention=retention.days("INVOKE_RETENTION_DAYS"),
            prune=prune_batch,
            count=count,
            holds=holds,
            delete=delete,
            erase=erase,
        )
    )
