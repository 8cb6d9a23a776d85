"""The invocation crash matrix: a process SIGKILLed while starting a child, while delivering
the child's answer to its parent, or while cancelling a child on state exit; after recovery
(the sweeper's ``deliver_pending``) there is exactly one child, one ``done.invoke``, and no
event processed after the cancellation. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable
from typing import IO

import pytest

from invocations.models import Invocation
from statecharts import stepper
from statecharts.models import Chart, Execution, HistoryEntry

pytestmark = pytest.mark.django_db(transaction=True)
TIMEOUT = 30.0
Spawn = Callable[..., "subprocess.Popen[str]"]  # the conftest's ``spawn`` fixture
NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'

QUICK_CHILD = f"""<scxml {NS} initial="f"><final id="f"><donedata>
  <param name="n" expr="7"/></donedata></final></scxml>"""
SLOW_CHILD = f"""<scxml {NS} initial="w">
  <state id="w"><onexit><send target="#_parent" event="bye"/></onexit>
    <transition event="never" target="f"/></state>
  <final id="f"/></scxml>"""


def parent_of(child: str) -> str:
    return f"""<scxml {NS} initial="s">
  <datamodel><data id="got" expr="0"/><data id="byes" expr="0"/></datamodel>
  <state id="s">
    <invoke id="kid" type="scxml"><content>{child}</content></invoke>
    <transition event="done.invoke.kid" target="done">
      <assign location="got" expr="_event.data.n"/></transition>
    <transition event="leave" target="gone"/>
  </state>
  <state id="gone"><transition event="bye"><assign location="byes" expr="byes + 1"/>
  </transition></state>
  <final id="done"/>
</scxml>"""


def kill_at(spawn: Spawn, phase: str, occurrence: int, event: str, pk: int = 0) -> bool:
    """Run the crash worker until it freezes at (phase, occurrence), then SIGKILL it.
    Returns False if it finished without reaching that point."""
    with tempfile.TemporaryFile("w+") as stderr:
        worker = spawn(
            ["crash_worker.py", phase, str(occurrence), str(pk), event, json.dumps(None)],
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
        assert worker.stdout is not None
        line = _first_line(worker.stdout)
        try:
            if line == f"AT {phase}":
                worker.send_signal(signal.SIGKILL)
                assert worker.wait(timeout=TIMEOUT) == -signal.SIGKILL
                return True
            worker.wait(timeout=TIMEOUT)
            stderr.seek(0)
            assert line == "DONE", f"worker: {line!r}; stderr:\n{stderr.read()}"
            return False
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait(timeout=TIMEOUT)
            worker.stdout.close()


def _first_line(stream: IO[str]) -> str | None:
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=lambda: lines.put(stream.readline().strip() or None),
                     daemon=True).start()
    try:
        return lines.get(timeout=TIMEOUT)
    except queue.Empty:
        return None


# The child's start step, then the delivery of its done.invoke to the parent.
START_PHASES = [("advanced", 1), ("before_commit", 1), ("committed", 1)]
ANSWER_PHASES = [("locked", 1), ("advanced", 2), ("before_commit", 2), ("committed", 2)]


@pytest.mark.parametrize(
    ("phase", "occurrence"),
    START_PHASES + ANSWER_PHASES,
    ids=[f"starting-{p}" for p, _ in START_PHASES] + [f"answer-{p}" for p, _ in ANSWER_PHASES],
)
def test_killed_while_starting_a_child_or_delivering_its_answer(
    spawn: Spawn, phase: str, occurrence: int
) -> None:
    # The parent's step commits; its process "dies" before delivering the child's start.
    parent = stepper.start_internal(
        stepper.StartRequest(chart=Chart.objects.load(parent_of(QUICK_CHILD))), outbox=[]
    ).execution
    assert kill_at(spawn, phase, occurrence, "__deliver_pending__")

    stepper.deliver_pending()  # the sweeper, after the crash
    stepper.deliver_pending()

    parent.refresh_from_db()
    assert parent.status == "completed"
    assert Execution.objects.filter(parent=parent).count() == 1  # exactly one child
    done = HistoryEntry.objects.filter(
        execution=parent, disposition="applied", input__event__name="done.invoke.kid"
    )
    assert done.count() == 1  # exactly one done.invoke applied
    assert Invocation.objects.get(parent=parent).status == "done"


CANCEL_PHASES = [("locked", 2), ("advanced", 2), ("before_commit", 2), ("committed", 2)]
LEAVE_PHASES = [("before_commit", 1), ("committed", 1)]


@pytest.mark.parametrize(
    ("phase", "occurrence"),
    LEAVE_PHASES + CANCEL_PHASES,
    ids=[f"leaving-{p}" for p, _ in LEAVE_PHASES] + [f"cancelling-{p}" for p, _ in CANCEL_PHASES],
)
def test_killed_while_cancelling_a_child_on_state_exit(
    spawn: Spawn, phase: str, occurrence: int
) -> None:
    parent = stepper.start(Chart.objects.load(parent_of(SLOW_CHILD)))
    child = Execution.objects.get(parent=parent)
    assert child.status == "active"
    assert kill_at(spawn, phase, occurrence, "leave", parent.pk)

    if not HistoryEntry.objects.filter(execution=parent, input__event__name="leave").exists():
        stepper.send(parent, "leave")  # the caller retries: its step had not committed
    stepper.deliver_pending()
    stepper.deliver_pending()

    parent.refresh_from_db()
    child.refresh_from_db()
    assert parent.configuration == ["gone"]
    assert (child.status, child.outcome) == ("cancelled", "cancelled_by_parent")
    assert child.history.filter(input__kind="cancel").count() == 1  # cancelled once
    # Its onexit's "bye" was sent while it was being cancelled: never processed.
    assert not HistoryEntry.objects.filter(
        execution=parent, disposition="applied", input__event__name="bye"
    ).exists()
    assert Invocation.objects.get(parent=parent).status == "cancelled"
