"""The timers section of an execution's read model (see ``statecharts.operations.inspection``).

One read, shown by every door: the admin's timers panel, the API's ``pending_timers`` and
``statechart show``. Times are relative to the read model's ``now`` (the injected clock), so
"in 8 s" agrees with the rest of the page. A timer row of the wrong shape is shown with
"(unreadable ...)" in place of the part that cannot be read; it never fails the page.

Each timer links the history both ways: ``scheduled_in`` is the seq of the step that
scheduled it (kept on the row), ``fired_in`` the seq of the step its fire applied (the
history entry whose cause names it). The admin links both to the history page showing them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from statecharts.models import HistoryEntry
from statecharts.models.history import Disposition
from statecharts.operations.inspection import HISTORY_PAGE_SIZE
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
    scheduled_in: int | None = None  # the history seq of the step that scheduled it
    fired_in: int | None = None  # the history seq of the step its fire applied
    steps: int = 0  # the execution's history length: which admin page shows a seq

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

    def _page(self, seq: int | None) -> int | None:
        """The admin history page (newest first) that shows step ``seq``."""
        if seq is None or not 1 <= seq <= self.steps:
            return None
        return (self.steps - seq) // HISTORY_PAGE_SIZE + 1

    @property
    def scheduled_page(self) -> int | None:
        return self._page(self.scheduled_in)

    @property
    def fired_page(self) -> int | None:
        return self._page(self.fired_in)

    @property
    def cancelled_in(self) -> int | None:
        """The history seq of the step whose ``<cancel>`` cancelled it (``cancelled_by``)."""
        by = self.timer.cancelled_by
        seq = by.get("seq") if isinstance(by, dict) else None
        return seq if isinstance(seq, int) else None

    @property
    def cancelled_page(self) -> int | None:
        return self._page(self.cancelled_in)

    def document(self) -> dict[str, Any]:
        return {
            "id": self.timer.pk,
            "event": self.event,
            "send_id": self.send_id,
            "due": self.due.isoformat(),
            "expires_at": self.timer.expires_at.isoformat() if self.timer.expires_at else None,
            "status": self.status,
            "reason": self.reason,
            "settled": self.settled.isoformat() if self.settled else None,
            "due_in_seconds": round(self.seconds_left, 3) if self.pending else None,
            "scheduled_in": self.scheduled_in,
            "fired_in": self.fired_in,
            "cancelled_in": self.cancelled_in,
            "context": self.timer.context,
            "delivery": self.timer.delivery,
            "attempts": self.timer.attempts,
            "last_error": self.timer.last_error,
        }

    @property
    def steps_text(self) -> str:
        """``scheduled in step 3, fired in step 7`` (what is known of the two)."""
        parts = []
        if self.scheduled_in is not None:
            parts.append(f"scheduled in step {self.scheduled_in}")
        if self.fired_in is not None:
            parts.append(f"fired in step {self.fired_in}")
        if self.cancelled_in is not None:
            parts.append(f"cancelled in step {self.cancelled_in}")
        return ", ".join(parts)

    def line(self) -> str:
        text = f"  {self.event} [{self.send_id}] {self.status}, due {self.due.isoformat()}"
        if self.pending:
            text = f"{text} ({self.relative})"
        elif self.reason:
            text = f"{text}: {self.reason}"
        return f"{text} [{self.steps_text}]" if self.steps_text else text


@dataclass(frozen=True, slots=True)
class TimersSection:
    pending: tuple[TimerRow, ...]  # soonest first
    past: tuple[TimerRow, ...]  # most recently due first, at most PAST_LIMIT
    past_count: int
    now: datetime


def _row(timer: Timer, now: datetime, fired_in: dict[int, int], steps: int) -> TimerRow:
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
        scheduled_in=timer.scheduled_in,
        fired_in=fired_in.get(timer.pk),
        steps=steps,
    )


def fired_steps(execution: Any, timer_ids: list[int]) -> dict[int, int]:
    """Timer id -> the seq of the applied step its fire caused (``HistoryEntry.cause``), for
    those of ``timer_ids`` that caused one here (a timer delivered to another execution, or
    fired before causes were recorded, has none). A cause of the wrong shape is left out."""
    if not timer_ids:
        return {}
    entries = HistoryEntry.objects.filter(
        execution=execution, disposition=Disposition.APPLIED, cause__timer__in=timer_ids
    ).values_list("cause", "seq")
    found: dict[int, int] = {}
    for cause, seq in entries:
        timer = cause.get("timer") if isinstance(cause, dict) else None
        if isinstance(timer, int):
            found[timer] = seq
    return found


def read_timers(execution: Any, now: datetime) -> TimersSection:
    """The execution's pending timers (soonest first) and its settled ones (latest first),
    each with the steps that scheduled and fired it."""
    timers = Timer.objects.for_execution(execution)
    pending = list(timers.pending().order_by("due", "id"))
    past_query = timers.exclude(status=TimerStatus.PENDING).order_by("-due", "-id")
    past = list(past_query[:PAST_LIMIT])
    fired = fired_steps(execution, [t.pk for t in past if t.status == TimerStatus.FIRED])
    steps = getattr(execution, "steps", 0)
    return TimersSection(
        pending=tuple(_row(timer, now, fired, steps) for timer in pending),
        past=tuple(_row(timer, now, fired, steps) for timer in past),
        past_count=past_query.count(),
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
