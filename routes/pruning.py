"""The routes app's rows for retention and erasure (``statecharts.retention``).

A ledger row is its sender's. Settled rows (delivered, failed, discarded, cancelled) of
executions that can no longer step are pruned ``ROUTE_RETENTION_DAYS`` after they settled; a
``claimed`` row (in flight, or in doubt) is never pruned by age. Erasure removes the target
(an address) and the reason, keeping which route, which event, and how it ended.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db.models import Exists, OuterRef, Q

from routes.models import DeliveryStatus, RouteDelivery
from statecharts import retention, stepper
from statecharts.models import Execution
from statecharts.statuses import TERMINAL_STATUSES

STAGE = "route_deliveries"


def _of_live_sender() -> Exists:
    return Exists(
        Execution.objects.filter(pk=OuterRef("execution_id")).exclude(
            status__in=TERMINAL_STATUSES
        )
    )


def _prunable(cutoff: datetime) -> Q:
    return ~Q(status=DeliveryStatus.CLAIMED) & Q(settled__lt=cutoff)


def prune_batch(cutoff: datetime, limit: int, after: int) -> retention.PruneBatch:
    """Delete up to ``limit`` settled ledger rows (id above ``after``) of executions that can
    no longer step, those executions locked first. Runs in the caller's transaction."""
    database = stepper.database()
    prunable = (
        RouteDelivery.objects.using(database).filter(_prunable(cutoff)).filter(~_of_live_sender())
    )
    candidates = list(
        prunable.filter(pk__gt=after).order_by("pk").values_list("pk", "execution_id")[:limit]
    )
    if not candidates:
        return retention.PruneBatch(0, None)
    stepper.lock_many({execution for _, execution in candidates})
    deleted = prunable.filter(pk__in=[pk for pk, _ in candidates]).delete()[0]
    return retention.PruneBatch(deleted, candidates[-1][0])


def count(cutoff: datetime) -> int:
    return RouteDelivery.objects.filter(_prunable(cutoff)).filter(~_of_live_sender()).count()


def delete(execution_ids: Sequence[int]) -> int:
    rows = RouteDelivery.objects.using(stepper.database()).filter(execution_id__in=execution_ids)
    return rows.delete()[0]


def erase(execution_ids: Sequence[int]) -> int:
    rows = RouteDelivery.objects.using(stepper.database()).filter(execution_id__in=execution_ids)
    return rows.update(target="", reason="")


def register() -> None:
    retention.register(
        retention.ExecutionRows(
            app="routes",
            name=STAGE,
            description="settled route deliveries of finished executions",
            retention=retention.days("ROUTE_RETENTION_DAYS"),
            prune=prune_batch,
            count=count,
            delete=delete,
            erase=erase,
        )
    )
