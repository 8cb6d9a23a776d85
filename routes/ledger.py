"""Writing the delivery ledger (``routes.models.RouteDelivery``): one row per key.

Every function runs on the stepper's database and inside the caller's transaction; the
unique key is the decision point: of two claims of one key, exactly one inserts the row
(on PostgreSQL the second waits for the first to commit, then finds it).

A ``retrying`` key (not sent, its retry waiting in the route timer queue: ``routes.retrying``)
is the one exception: it is open to one more decision, taken by a conditional UPDATE
(``retrying`` -> the new status) instead of the insert. The route timer fire that holds its
retry takes it back ``claimed`` (one more attempt), a ``<cancel>`` or a discard ends it; a
fresh claim (``claim``, an immediate send's outbox message run again) never takes it. Every
such decision runs under the sending execution's lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import F

from routes.base import RouteMessage
from routes.models import DeliveryStatus, RouteDelivery
from statecharts.models.fields import escape_text
from statecharts.stepper import database


def _label(text: str, length: int) -> str:
    """A descriptive column's value: chart code computes event names and types, and may
    put a NUL in them, which PostgreSQL's text cannot hold; it is written in the escape of
    every JSON column (``statecharts.models.fields.escape_text``), then cut to the column."""
    return escape_text(text)[:length]


def _row(message: RouteMessage, key: str, status: str, reason: str, now: datetime) -> RouteDelivery:
    settled = None if status == DeliveryStatus.CLAIMED else now
    return RouteDelivery(
        key=key,
        execution_id=message.execution_id,
        route=_label(message.route, 100),
        send_type=_label(message.type, 200),
        target=message.target or "",
        send_id=_label(message.send_id, 200),
        event_name=_label(message.name, 200),
        delayed=message.delayed,
        status=status,
        reason=reason[:2000],
        created=now,
        settled=settled,
    )


def write(
    message: RouteMessage,
    key: str,
    status: str,
    now: datetime,
    reason: str = "",
    *,
    reopen: bool | None = None,
) -> RouteDelivery | None:
    """Write the key's row with ``status``; None if the key is already in the ledger (then
    nothing is written: whoever wrote it decided). A ``retrying`` key is taken instead when
    ``reopen`` (by default: for every status but ``claimed``; see the module docstring)."""
    row = _row(message, key, status, reason, now)
    try:
        with transaction.atomic(using=database()):  # a savepoint: the caller's work survives
            row.save(using=database(), force_insert=True)
    except IntegrityError:
        if not (status != DeliveryStatus.CLAIMED if reopen is None else reopen):
            return None
        taken = take_retrying(key, status, now, reason)
        return None if taken is None else RouteDelivery.objects.using(database()).get(pk=taken)
    return row


def take_retrying(key: str, status: str, now: datetime, reason: str = "") -> int | None:
    """The next decision of a ``retrying`` key (its id), or None if the key is not retrying:
    ``claimed`` again (one more attempt; ``created`` is the new claim's time, so "in doubt"
    counts from it) or ended with ``status`` and ``reason``."""
    rows = RouteDelivery.objects.using(database()).filter(key=key, status=DeliveryStatus.RETRYING)
    pk = rows.values_list("pk", flat=True).first()
    if pk is None:
        return None
    changes: dict[str, object] = {"status": status, "retry_at": None}
    if status == DeliveryStatus.CLAIMED:
        changes.update(created=now, attempts=F("attempts") + 1, settled=None)
    else:
        changes.update(reason=reason[:2000], settled=now)
    return pk if rows.filter(pk=pk).update(**changes) else None


def retry(delivery_id: int, due: datetime, reason: str) -> bool:
    """claimed -> ``retrying`` (not sent; a retry is due at ``due``); False if it was not
    claimed any more."""
    return bool(
        RouteDelivery.objects.using(database())
        .filter(pk=delivery_id, status=DeliveryStatus.CLAIMED)
        .update(status=DeliveryStatus.RETRYING, reason=reason[:2000], retry_at=due)
    )


@dataclass(frozen=True, slots=True)
class Entry:
    """One key's ledger row to write (``write_many``)."""

    message: RouteMessage
    key: str
    status: str
    reason: str = ""


def write_many(entries: Sequence[Entry], now: datetime) -> dict[str, int]:
    """``write`` for several keys in ONE statement: ``INSERT ... ON CONFLICT (key) DO NOTHING
    RETURNING id, key`` (PostgreSQL; SQLite 3.35+). Returns the ids of the rows it wrote, by
    key; a key already in the ledger (or given twice) is absent: whoever wrote it decided.
    Elsewhere, one ``write`` (a savepoint) per entry. A ``retrying`` key is taken (the fire of
    the route timer row that holds its retry: ``take_retrying``) and present."""
    if not entries:
        return {}
    conn = connections[database()]
    if not returning(conn):
        written = {}
        for entry in entries:
            row = write(entry.message, entry.key, entry.status, now, entry.reason, reopen=True)
            if row is not None:
                written[row.key] = row.pk
        return written
    fields = [f for f in RouteDelivery._meta.concrete_fields if not f.primary_key]
    quote = conn.ops.quote_name
    columns = ", ".join(quote(f.column) for f in fields)
    marks = "(" + ", ".join(["%s"] * len(fields)) + ")"
    sql = (
        f"INSERT INTO {quote(RouteDelivery._meta.db_table)} ({columns}) VALUES "
        + ", ".join([marks] * len(entries))
        + f" ON CONFLICT ({quote('key')}) DO NOTHING RETURNING {quote('id')}, {quote('key')}"
    )
    params: list[object] = []
    for entry in entries:
        row = _row(entry.message, entry.key, entry.status, entry.reason, now)
        params += [f.get_db_prep_save(getattr(row, f.attname), conn) for f in fields]
    with conn.cursor() as cursor:
        cursor.execute(sql, params)
        written = {key: pk for pk, key in cursor.fetchall()}
    for entry in entries:
        if entry.key not in written:  # (rare: in the ledger before; taken only if retrying)
            taken = take_retrying(entry.key, entry.status, now, entry.reason)
            if taken is not None:
                written[entry.key] = taken
    return written


def returning(conn: BaseDatabaseWrapper) -> bool:
    """Whether the database has INSERT/DELETE ... RETURNING and ON CONFLICT DO NOTHING
    (PostgreSQL; SQLite from 3.35, where Django says it can return columns from an insert)."""
    return conn.vendor == "postgresql" or (
        conn.vendor == "sqlite" and bool(conn.features.can_return_columns_from_insert)
    )


def claim(message: RouteMessage, key: str, now: datetime) -> RouteDelivery | None:
    """Claim the key before the outside action; None if it was claimed (or settled) before."""
    return write(message, key, DeliveryStatus.CLAIMED, now)


def known(key: str) -> bool:
    """Whether the key was decided (a ``retrying`` key is still open: its retry is waiting)."""
    return (
        RouteDelivery.objects.using(database())
        .filter(key=key)
        .exclude(status=DeliveryStatus.RETRYING)
        .exists()
    )


def settle(delivery_id: int, status: str, now: datetime, reason: str = "") -> bool:
    """claimed -> ``status``; False if it was not claimed any more (someone settled it)."""
    return settle_many([delivery_id], status, now, reason) == 1


def settle_many(delivery_ids: Sequence[int], status: str, now: datetime, reason: str = "") -> int:
    """claimed -> ``status`` for these rows, in one UPDATE; how many were still claimed."""
    if not delivery_ids:
        return 0
    return (
        RouteDelivery.objects.using(database())
        .filter(pk__in=list(delivery_ids), status=DeliveryStatus.CLAIMED)
        .update(status=status, reason=reason[:2000], settled=now)
    )
