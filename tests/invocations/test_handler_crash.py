"""A process SIGKILLed inside an invoke handler's ``start``: the timer workers start it again
within seconds (the start's lease runs out, the sweeper's heartbeat recovers it), with the
handler queue on django-q2 and ``inline``; the parent hears one answer. On SQLite and
PostgreSQL, with a real django-q2 cluster and real processes.

The task ``stall_first`` (tests/invocations/task_functions.py) writes its process id to a file
and hangs on its first call; the test SIGKILLs that process, then waits (bounded, polling the
database: another process does the work) for the parent to finish.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import pytest

from invocations.models import Invocation
from statecharts import stepper
from statecharts.conf import statecharts_settings
from statecharts.core.position import decode
from statecharts.models import Chart, Execution, HistoryEntry

pytestmark = pytest.mark.django_db(transaction=True)
Spawn = Callable[..., "subprocess.Popen[str]"]
NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
# From the kill to the parent's answer: the lease's remainder (at most 3 s) and a heartbeat's
# beat (1 s) when the machine is quiet. The bound leaves room for a loaded 2-CPU machine (a
# broken recovery waits for django-q2's redelivery, 180 s, or the timeout, 600 s).
RECOVERY_BOUND = 20.0
STARTED_BOUND = 60.0


def chart(marker: Path) -> str:
    return f"""<scxml {NS} initial="waiting">
  <datamodel><data id="result" expr="null"/></datamodel>
  <state id="waiting">
    <invoke id="job" type="task" src="stall_first">
      <param name="marker" expr="'{marker}'"/></invoke>
    <transition event="done.invoke.job" target="done">
      <assign location="result" expr="_event.data"/></transition>
  </state>
  <final id="done"/>
</scxml>"""


def _victim(marker: Path, cluster: subprocess.Popen[str], log: IO[str]) -> int:
    """The process id of the first start, once it is inside ``start`` (polling its file)."""
    started = time.monotonic()
    while not (marker.exists() and marker.read_text(encoding="utf-8").split()):
        if cluster.poll() is not None or time.monotonic() - started > STARTED_BOUND:
            log.seek(0)
            pytest.fail(f"the first start never began; the cluster's log:\n{log.read()[-5000:]}")
        time.sleep(0.05)  # polling a file another process writes, not waiting for a timer
    return int(marker.read_text(encoding="utf-8").split()[0])


@pytest.mark.parametrize("queue", ["django_q", "inline"])
def test_a_start_whose_process_was_sigkilled_is_started_again_within_seconds(
    queue: str,
    tmp_path: Path,
    spawn: Spawn,
    qcluster: Any,
    wait_for_cluster: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STATECHARTS_TEST_INVOKE_HANDLER_QUEUE", queue)  # (the subprocesses')
    marker = tmp_path / "calls"
    source = tmp_path / "chart.scxml"
    source.write_text(chart(marker), encoding="utf-8")
    with tempfile.TemporaryFile("w+") as log, qcluster(log) as cluster:
        wait_for_cluster(lambda: _running(log), cluster, log, "the cluster's start")
        starter = None
        if queue == "django_q":
            # This process's step hands the start to the cluster: one of its workers hangs.
            stepper.start(Chart.objects.load(source.read_text(encoding="utf-8")))
        else:
            # A web process, say: its step runs the start inline, and hangs in it.
            code = (
                "from pathlib import Path; from statecharts import stepper; "
                "from statecharts.models import Chart; "
                f"stepper.start(Chart.objects.load(Path({str(source)!r}).read_text()))"
            )
            starter = spawn(
                ["manage.py", "shell", "-c", code],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        try:
            victim = _victim(marker, cluster, log)
            assert victim != os.getpid()
            if starter is not None:
                assert victim == starter.pid  # the start ran inline, in the starting process
            invocation = Invocation.objects.get(type="task")
            assert invocation.status == "active" and invocation.claimed_until is not None
            os.kill(victim, signal.SIGKILL)
            killed = time.monotonic()
            execution_id = invocation.parent_id

            def answered() -> bool:
                return Execution.objects.filter(pk=execution_id, status="completed").exists()

            wait_for_cluster(answered, cluster, log, "the parent's answer", deadline=90.0)
            took = time.monotonic() - killed
        finally:
            if starter is not None and starter.poll() is None:
                starter.kill()
            if starter is not None:
                starter.wait(timeout=30)
    assert took < RECOVERY_BOUND, f"recovered {took:.2f} s after the kill"
    calls = marker.read_text(encoding="utf-8").split()
    assert len(calls) == 2 and calls[1] != calls[0]  # started again, by another process
    execution = Execution.objects.get(pk=execution_id)
    assert decode(bytes(execution.position)).state.datamodel["result"] == {"calls": 2}
    invocation.refresh_from_db()
    assert (invocation.status, invocation.attempts) == ("done", 2)
    assert invocation.claimed_until is None
    applied = HistoryEntry.objects.filter(
        execution=execution, disposition="applied", input__event__name="done.invoke.job"
    )
    assert applied.count() == 1  # one answer
    lease = statecharts_settings.INVOKE_HANDLER_LEASE_SECONDS
    print(f"{queue}: started again and answered {took:.2f} s after the kill (lease {lease} s)")


def _running(log: IO[str]) -> bool:
    log.flush()
    log.seek(0)
    return " running." in log.read()
