"""The timers section of an execution's read model (see ``statecharts.inspection``).

One read, shown by every door: the admin's timers panel, the API's ``pending_timers`` and
``statechart show``. Times are relative to the read model's ``now`` (the injected clock), so
"in 8 s" agrees with the rest of the page. A timer row of the wrong shape is shown with
"(unreadable ...)" in place of the part that cannot be read; it never fails the page.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from timers.models import Timer, TimerStatus

PAST_LIMIT = 100  # settled timers shown, most recently due first


def span(seconds: float) -> str:
    """A duration as a person reads it: ``8 s``, ``4 min 5 s``, ``3 h 4 min``, ``2 d 3 h``."""
    whole = round(abs(seconds))
    days, rest = divmod(whole, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    if minutes:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    return f"{secs} s"


def relative(due: datetime, now: datetime) -> str:
    """``in 8 s``, ``3 s late``, or ``due now`` (within half a second)."""
    seconds = (due - now).total_seconds()
    if abs(seconds) < 0.5:
        return "due now"
    return f"in {span(seconds)}" if seconds > 0 else f"{span(seconds)} late"


@dataclass(frozen=True, slots=True)
class TimerRow:
    timer: Timer
    event: str
    send_id: str
    due: datetime
    status: str
    reason: str
    settled: datetime | None
    now: datetime

    @property
    def pending(self) -> bool:
        return self.status == TimerStatus.PENDING

    @property
    def relative(self) -> str:
        """For a pending timer, when it fires; for a settled one, nothing."""
        return relative(self.due, self.now) if self.pending else ""

    @property
    def seconds_left(self) -> float:
        return (self.due - self.now).total_seconds()

    def document(self) -> dict[str, Any]:
        return {
            "id": self.timer.pk,
            "event": self.event,
            "send_id": self.send_id,
            "due": self.due.isoformat(),
            "status": self.status,
            "reason": self.reason,
            "settled": self.settled.isoformat() if self.settled else None,
            "due_in_seconds": round(self.seconds_left, 3) if self.pending else None,
        }

    def line(self) -> str:
        text = f"  {self.event} [{self.send_id}] {self.status}, due {self.due.isoformat()}"
        if self.pending:
            return f"{text} ({self.relative})"
        return f"{text}: {self.reason}" if self.reason else text


@dataclass(frozen=True, slots=True)
class TimersSection:
    pending: tuple[TimerRow, ...]  # soonest first
    past: tuple[TimerRow, ...]  # most recently due first, at most PAST_LIMIT
    past_count: int
    now: datetime


def _row(timer: Timer, now: datetime) -> TimerRow:
    event = timer.event if isinstance(timer.event, dict) else {}
    name = event.get("name")
    return TimerRow(
        timer=timer,
        event=str(name) if name else "(unreadable event)",
        send_id=timer.send_id,
        due=timer.due,
        status=timer.status,
        reason=timer.reason,
        settled=timer.settled,
        now=now,
    )


def read_timers(execution: Any, now: datetime) -> TimersSection:
    """The execution's pending timers (soonest first) and its settled ones (latest first)."""
    timers = Timer.objects.for_execution(execution)
    pending = timers.pending().order_by("due", "id")
    past = timers.exclude(status=TimerStatus.PENDING).order_by("-due", "-id")
    return TimersSection(
        pending=tuple(_row(timer, now) for timer in pending),
        past=tuple(_row(timer, now) for timer in past[:PAST_LIMIT]),
        past_count=past.count(),
        now=now,
    )


def timers_document(section: TimersSection) -> dict[str, Any]:
    return {
        "pending": [row.document() for row in section.pending],
        "past": [row.document() for row in section.past],
        "past_count": section.past_count,
    }


def timers_lines(section: TimersSection) -> list[str]:
    lines = [f"timers: {len(section.pending)} pending, {section.past_count} settled"]
    lines += [row.line() for row in section.pending]
    lines += [row.line() for row in section.past]
    if section.past_count > len(section.past):
        lines.append(f"  ... and {section.past_count - len(section.past)} older settled timers")
    return lines
