"""The crash matrix: a process SIGKILLed at any phase of a step loses nothing and doubles nothing.

tests/workers/crash_worker.py steps an execution on the test database (the SQLite file or the
PostgreSQL test database) and freezes at a phase; this test kills it there with SIGKILL and
checks that the database holds a committed state, that recovery applies the input exactly once,
and that the cross-execution send it makes reaches its peer exactly once.

The killed process' open transaction is rolled back by the database: PostgreSQL aborts it when
the connection drops; on SQLite the OS releases the file lock and the next connection rolls
back the hot journal.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import sqlite3
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from typing import IO, Any

import pytest
from django.db import DatabaseError, connection, transaction

from statecharts import stepper
from statecharts.core.position import decode
from statecharts.models import AppliedMessage, Chart, Execution, HistoryEntry, OutboxMessage
from statecharts.models.history import Disposition
from statecharts.models.outbox import OutboxStatus

TIMEOUT = 30.0
Spawn = Callable[..., "subprocess.Popen[str]"]  # the conftest's ``spawn`` fixture

# "go" counts (so a second application would show) and pings the peer named in the event.
SENDER = """<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0"
    datamodel="ecmascript" initial="s">
  <datamodel><data id="count" expr="0"/></datamodel>
  <state id="s">
    <transition event="go">
      <assign location="count" expr="count + 1"/>
      <send event="ping" targetexpr="'#_scxml_' + _event.data.peer"/>
    </transition>
  </state>
</scxml>"""

RECEIVER = """<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0"
    datamodel="ecmascript" initial="s">
  <datamodel><data id="pings" expr="0"/></datamodel>
  <state id="s"><transition event="ping"><assign location="pings" expr="pings + 1"/></transition>
  </state>
</scxml>"""

# (phase, occurrence): the first occurrence of a phase is in the sender's step; the second is
# in the step that delivers its outbox row to the peer.
SENDER_STEP = [("locked", 1), ("advanced", 1), ("before_commit", 1), ("committed", 1)]
DELIVERY_STEP = [("locked", 2), ("before_commit", 2), ("committed", 2)]


def kill_at(
    phase: str,
    occurrence: int,
    execution: Execution,
    data: dict[str, Any],
    while_frozen: Callable[[], None],
    spawn: Spawn,
) -> None:
    """Run the worker until it is frozen at ``phase``, call ``while_frozen``, SIGKILL it."""
    args = [str(occurrence), str(execution.pk), "go", json.dumps(data)]
    with tempfile.TemporaryFile("w+") as stderr:
        worker = spawn(["crash_worker.py", phase, *args], stdout=subprocess.PIPE, stderr=stderr)
        try:
            assert worker.stdout is not None
            line = _wait_for_line(worker.stdout, f"AT {phase}")
            if line != f"AT {phase}":
                if worker.poll() is None:
                    worker.kill()
                worker.wait(timeout=TIMEOUT)
                stderr.seek(0)
                pytest.fail(
                    f"the worker never reached {phase} #{occurrence} ({line}; exit "
                    f"{worker.returncode}); its stderr:\n{stderr.read()}"
                )
            while_frozen()
            os.kill(worker.pid, signal.SIGKILL)
            assert worker.wait(timeout=TIMEOUT) == -signal.SIGKILL
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait(timeout=TIMEOUT)
            if worker.stdout is not None:
                worker.stdout.close()


def _wait_for_line(stream: IO[str], wanted: str) -> str:
    """Read lines until ``wanted``; a description of what happened instead, on EOF or timeout."""
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        for line in stream:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + TIMEOUT
    seen: list[str] = []
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return f"timed out after {TIMEOUT}s; stdout {seen}"
        if line is None:
            return f"it exited; stdout {seen}"
        if line == wanted:
            return line
        seen.append(line)


def write_locked(pk: int) -> bool:
    """Whether another transaction holds the lock a step on ``pk`` needs (without waiting)."""
    if connection.vendor == "sqlite":
        # One writer at a time: a step holds the database's write lock (IMMEDIATE).
        probe = sqlite3.connect(connection.settings_dict["NAME"], timeout=0)
        try:
            probe.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            assert "locked" in str(exc)
            return True
        finally:
            probe.close()
        return False
    try:
        with transaction.atomic():
            Execution.objects.select_for_update(nowait=True).get(pk=pk)
    except DatabaseError:
        return True
    return False


def snapshot(pk: int) -> tuple[bytes, int, str]:
    position, steps, status = Execution.objects.values_list("position", "steps", "status").get(
        pk=pk
    )
    return bytes(position), steps, status


def datamodel(pk: int) -> dict[str, Any]:
    execution = Execution.objects.select_related("chart").get(pk=pk)
    return decode(bytes(execution.position), chart=execution.chart.content_hash).state.datamodel


def applied(pk: int, request: str) -> int:
    """How many times the input carrying ``request`` was applied, according to the history."""
    return HistoryEntry.objects.filter(
        execution_id=pk, disposition=Disposition.APPLIED, input__event__data__request=request
    ).count()


def recover(pk: int, request: str, data: dict[str, Any]) -> tuple[bool, int]:
    """What a caller that cannot know whether its step committed does: look at the history,
    feed the input only if it is not there, then deliver what is left in the outbox.
    Returns (whether it re-sent, how many outbox messages deliver_pending delivered)."""
    resent = applied(pk, request) == 0
    if resent:
        assert stepper.send(pk, "go", data).applied
    return resent, stepper.deliver_pending()


@pytest.mark.parametrize(
    ("phase", "occurrence"),
    SENDER_STEP + DELIVERY_STEP,
    ids=[f"sender-{p}" for p, _ in SENDER_STEP] + [f"delivery-{p}" for p, _ in DELIVERY_STEP],
)
@pytest.mark.django_db(transaction=True)
def test_killed_at_a_phase_recovers_exactly_once(
    phase: str, occurrence: int, spawn: Spawn
) -> None:
    peer = stepper.start(Chart.objects.load(RECEIVER))
    execution = stepper.start(Chart.objects.load(SENDER))
    request = f"crash-{phase}-{occurrence}"
    data = {"peer": peer.session_id, "request": request}
    before, peer_before = snapshot(execution.pk), snapshot(peer.pk)
    assert before[1:] == (1, "active")

    sender_committed = occurrence > 1 or phase == "committed"
    delivery_committed = occurrence > 1 and phase == "committed"
    stepping = execution if occurrence == 1 else peer

    def while_frozen() -> None:
        # The kill lands inside the step's open transaction, or after its commit.
        assert write_locked(stepping.pk) == (phase != "committed")

    kill_at(phase, occurrence, execution, data, while_frozen, spawn)

    # The database holds a committed state: the step's effects all or none.
    outbox = list(OutboxMessage.objects.filter(sender=execution))
    if not sender_committed:
        assert snapshot(execution.pk) == before
        assert HistoryEntry.objects.filter(execution=execution).count() == 1
        assert outbox == []
    else:
        position, steps, status = snapshot(execution.pk)
        assert (steps, status) == (2, "active") and position != before[0]
        assert applied(execution.pk, request) == 1
        assert datamodel(execution.pk)["count"] == 1
        assert len(outbox) == 1
        assert outbox[0].target_session_id == peer.session_id
        # The sender's row is bookkeeping, marked after the target's step commits: a kill
        # right after that commit leaves it pending; the target's own record says it applied.
        assert outbox[0].status == OutboxStatus.PENDING
        records = AppliedMessage.objects.filter(message=outbox[0])
        assert [(r.execution_id, r.seq) for r in records] == (
            [(peer.pk, 2)] if delivery_committed else []
        )
    if delivery_committed:
        assert datamodel(peer.pk)["pings"] == 1
    else:
        assert snapshot(peer.pk) == peer_before

    resent, delivered = recover(execution.pk, request, data)

    assert resent == (not sender_committed)
    # A retried step delivers its own outbox row; a committed one left it for deliver_pending,
    # which finds the target's record when the delivery had committed, and applies nothing.
    assert delivered == (1 if sender_committed and not delivery_committed else 0)
    assert stepper.deliver_pending() == 0
    assert AppliedMessage.objects.filter(execution=peer).count() == 1

    # Exactly one application of the input, exactly one ping delivered.
    assert applied(execution.pk, request) == 1
    assert HistoryEntry.objects.filter(execution=execution).count() == 2
    assert datamodel(execution.pk)["count"] == 1
    message = OutboxMessage.objects.get(sender=execution)
    assert message.status == OutboxStatus.DELIVERED
    assert datamodel(peer.pk)["pings"] == 1
    peer_history = HistoryEntry.objects.filter(execution=peer).order_by("seq")
    assert [(h.seq, (h.input.get("event") or {}).get("name")) for h in peer_history] == [
        (1, None),
        (2, "ping"),
    ]
