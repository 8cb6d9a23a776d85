"""Writing the delivery ledger (``routes.models.RouteDelivery``): one row per key.

Every function runs on the stepper's database and inside the caller's transaction; the
unique key is the decision point: of two claims of one key, exactly one inserts the row
(on PostgreSQL the second waits for the first to commit, then finds it).
"""

from __future__ import annotations

from datetime import datetime

from django.db import IntegrityError, transaction

from routes.base import RouteMessage
from routes.models import DeliveryStatus, RouteDelivery
from statecharts.stepper import database


def _row(message: RouteMessage, key: str, status: str, reason: str, now: datetime) -> RouteDelivery:
    settled = None if status == DeliveryStatus.CLAIMED else now
    return RouteDelivery(
        key=key,
        execution_id=message.execution_id,
        route=message.route[:100],
        send_type=message.type[:200],
        target=message.target or "",
        send_id=message.send_id[:200],
        event_name=message.name[:200],
        delayed=message.delayed,
        status=status,
        reason=reason[:2000],
        created=now,
        settled=settled,
    )


def write(
    message: RouteMessage, key: str, status: str, now: datetime, reason: str = ""
) -> RouteDelivery | None:
    """Write the key's row with ``status``; None if the key is already in the ledger (then
    nothing is written: whoever wrote it decided)."""
    row = _row(message, key, status, reason, now)
    try:
        with transaction.atomic(using=database()):  # a savepoint: the caller's work survives
            row.save(using=database(), force_insert=True)
    except IntegrityError:
        return None
    return row


def claim(message: RouteMessage, key: str, now: datetime) -> RouteDelivery | None:
    """Claim the key before the outside action; None if it was claimed (or settled) before."""
    return write(message, key, DeliveryStatus.CLAIMED, now)


def known(key: str) -> bool:
    return RouteDelivery.objects.using(database()).filter(key=key).exists()


def settle(delivery_id: int, status: str, now: datetime, reason: str = "") -> bool:
    """claimed -> ``status``; False if it was not claimed any more (someone settled it)."""
    return bool(
        RouteDelivery.objects.using(database())
        .filter(pk=delivery_id, status=DeliveryStatus.CLAIMED)
        .update(status=status, reason=reason[:2000], settled=now)
    )
