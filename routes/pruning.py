"""The routes app's rows for retention and erasure (``statecharts.operations.retention``).

A ledger row is its sender's. Settled rows (delivered, failed, discarded, cancelled) of
executions that can no longer step are pruned ``ROUTE_RETENTION_DAYS`` after they settled; a
``claimed`` row (in flight, or in doubt) and a ``retrying`` one (its retry waiting) are never
pruned by age. Erasure removes the target
(an address) and the reason, keeping which route, which event, and how it ended.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db.models import Q

from routes.models import DeliveryStatus, RouteDelivery
from statecharts import stepper
from statecharts.operations import retention

STAGE = "route_deliveries"


def _prunable(cutoff: datetime) -> Q:
    open_statuses = (DeliveryStatus.CLAIMED, DeliveryStatus.RETRYING)
    return ~Q(status__in=open_statuses) & Q(settled__lt=cutoff)


_settled = retention.SettledRows(RouteDelivery, "execution_id", _prunable)
prune_batch = _settled.prune  # settled ledger rows of executions that can no longer step
count = _settled.count


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
