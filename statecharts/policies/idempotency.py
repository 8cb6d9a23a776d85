"""Retrying safely: idempotency keys for the inputs callers feed (start, send, cancel).

A client that loses the response to a send (a timeout, a dropped connection, a killed
process) cannot know whether the event was applied. It retries with the same key, and:

- the first input with a key is applied and the key is stored with its history entry
  (``HistoryEntry.idempotency_key``, unique per execution; a start's in
  :class:`~statecharts.models.StartKey`, unique per chart *name*, so a retry after a new
  version of the chart was loaded finds the execution its first attempt started);
- a repeat with the same key and the same content applies nothing and returns the first
  input's result (``StepResult.repeated``);
- a repeat with the same key and other content raises :class:`IdempotencyConflict` (the API
  answers 422): a key names one request, and two requests under one key is a client bug.

The check runs under the execution's row lock (a send, a cancel) or is settled by the
unique constraint (a start), so two concurrent attempts with one key apply it once.

The admin issues a key per rendered form (:func:`issue_token`), so a double click or a
re-POST after a lost response is one input. Keys are never part of a timer's or a message's
key, and are erased with the history's personal data (``statecharts.operations.retention``).
"""

from __future__ import annotations

import hashlib
import json
import secrets
from datetime import datetime
from typing import Any

from statecharts.exceptions import IdempotencyConflict
from statecharts.models import Chart, Execution, HistoryEntry, StartKey
from statecharts.models.history import Disposition

# The column the key is stored in (the history's and StartKey's are the same length): a key
# from outside is checked against it by the stepper's gate (``validation.idempotency_key``).
KEY_MAX_LENGTH = HistoryEntry._meta.get_field("idempotency_key").max_length or 0
# The admin's keys: "admin:" and 32 hex characters, told apart from a client's own keys.
ADMIN_PREFIX = "admin:"

__all__ = [
    "ADMIN_PREFIX",
    "KEY_MAX_LENGTH",
    "IdempotencyConflict",
    "earlier_start",
    "fingerprint",
    "issue_token",
    "remember_start",
    "start_scope",
]


def issue_token() -> str:
    """A fresh key for one rendered admin form (unguessable, so one user's form cannot
    collide with another's)."""
    return ADMIN_PREFIX + secrets.token_hex(16)


def fingerprint(content: dict[str, Any]) -> str:
    """sha256 of ``content`` as canonical JSON (sorted keys): what "the same request" means."""
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def start_content(
    data: Any, business_key: str | None, metadata: Any, session_id: str | None
) -> dict[str, Any]:
    """What a start asked for (the chart's version is not part of it: see the module doc)."""
    return {
        "data": data,
        "business_key": business_key,
        "metadata": metadata or {},
        "session_id": session_id,
    }


def start_scope(chart: Chart) -> str:
    """Where a start key is unique: the chart's name, or its hash when it has none."""
    return chart.name or f"sha256:{chart.content_hash}"


def earlier_start(
    chart: Chart, key: str, content: dict[str, Any], *, using: str
) -> tuple[Execution, HistoryEntry] | None:
    """The execution an earlier start with this key started, and its first history entry;
    None if there was none. Raises ``IdempotencyConflict`` when that start asked for
    something else."""
    row = (
        StartKey.objects.using(using)
        .select_related("execution", "execution__chart")
        .filter(scope=start_scope(chart), key=key)
        .first()
    )
    if row is None:
        return None
    if row.fingerprint != fingerprint(content):
        raise IdempotencyConflict(
            f"idempotency key {key!r} already started execution {row.execution_id} of "
            f"{start_scope(chart)} with other data; nothing was started"
        )
    execution = row.execution
    entry = HistoryEntry.objects.using(using).filter(execution=execution).order_by("seq").first()
    if entry is None:  # its history was pruned: what the start did is the execution itself
        entry = HistoryEntry.of(
            execution,
            seq=1,
            input={"kind": "start"},
            disposition=Disposition.APPLIED,
            idempotency_key=key,
            created=execution.created,
        )
    return execution, entry


def remember_start(
    execution: Execution, key: str, content: dict[str, Any], now: datetime, *, using: str
) -> None:
    """Store the start's key, in the start's transaction (the unique constraint settles a
    race between two attempts: the loser's transaction rolls back)."""
    StartKey.objects.using(using).create(
        scope=start_scope(execution.chart),
        key=key,
        execution=execution,
        fingerprint=fingerprint(content),
        created=now,
    )
