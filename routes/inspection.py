"""The routes section of an execution's read model (see ``statecharts.operations.inspection``): its
route deliveries (the ledger: every fate, "in doubt" included) and its delayed route sends
still waiting (what the configured route timer queue keeps: ``TimerQueue.waiting``).

Shown by every door: the admin's routes panel, the API's ``route_deliveries`` field,
``statechart show``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from routes.conf import route_settings
from routes.models import DeliveryStatus, RouteDelivery
from routes.queue import WaitingSend, configured_queue

SHOWN = 50  # the newest deliveries shown on an execution's page (the admin list has all)


@dataclass(frozen=True, slots=True)
class DeliveryRow:
    delivery: RouteDelivery
    in_doubt: bool

    @property
    def shown_status(self) -> str:
        return "in doubt" if self.in_doubt else str(self.delivery.status)

    def document(self) -> dict[str, Any]:
        d = self.delivery
        return {
            "id": d.pk,
            "key": d.key,
            "route": d.route,
            "type": d.send_type,
            "target": d.target,
            "send_id": d.send_id,
            "event": d.event_name,
            "delayed": d.delayed,
            "status": d.status,
            "in_doubt": self.in_doubt,
            "reason": d.reason,
            "created": d.created.isoformat(),
            "settled": d.settled.isoformat() if d.settled else None,
            "attempts": d.attempts,
            "retry_at": d.retry_at.isoformat() if d.retry_at else None,
        }

    def line(self) -> str:
        d = self.delivery
        text = f"  {d.route} {d.event_name} -> {d.target or '-'} ({d.send_id}): {self.shown_status}"
        return f"{text}: {d.reason}" if d.reason else text


@dataclass(frozen=True, slots=True)
class WaitingRow:
    timer: WaitingSend

    def document(self) -> dict[str, Any]:
        t = self.timer
        return {
            "id": t.pk,
            "key": t.key,
            "route": t.route,
            "send_id": t.send_id,
            "event": (t.message or {}).get("name"),
            "target": (t.message or {}).get("target"),
            "due": t.due.isoformat(),
            "reason": t.reason,
        }

    def line(self) -> str:
        t = self.timer
        text = f"  {t.route} {(t.message or {}).get('name')} due {t.due.isoformat()} ({t.send_id})"
        return f"{text}: {t.reason}" if t.reason else text


@dataclass(frozen=True, slots=True)
class RoutesSection:
    deliveries: tuple[DeliveryRow, ...]  # newest first, at most SHOWN
    waiting: tuple[WaitingRow, ...]  # delayed route sends not fired yet, due order


def read_routes(execution: Any, now: datetime) -> RoutesSection:
    doubt_after = route_settings.ROUTE_IN_DOUBT_SECONDS
    in_doubt = set(
        RouteDelivery.objects.filter(execution_id=execution.pk)
        .in_doubt(now, doubt_after)
        .values_list("pk", flat=True)
    )
    deliveries = tuple(
        DeliveryRow(d, d.pk in in_doubt)
        for d in RouteDelivery.objects.filter(execution_id=execution.pk).order_by(
            "-created", "-id"
        )[:SHOWN]
    )
    queue = configured_queue()
    kept = getattr(queue, "waiting", None)  # (a queue may not show what it keeps)
    waiting = tuple(WaitingRow(send) for send in kept(execution.pk)) if kept else ()
    return RoutesSection(deliveries, waiting)


def routes_document(section: RoutesSection) -> dict[str, Any]:
    return {
        "deliveries": [row.document() for row in section.deliveries],
        "waiting": [row.document() for row in section.waiting],
    }


def routes_lines(section: RoutesSection) -> list[str]:
    lines = [f"route deliveries: {len(section.deliveries)}"]
    lines += [row.line() for row in section.deliveries]
    if section.waiting:
        lines.append(f"delayed route sends waiting: {len(section.waiting)}")
        lines += [row.line() for row in section.waiting]
    return lines


__all__ = ["DeliveryStatus", "RoutesSection", "read_routes"]
