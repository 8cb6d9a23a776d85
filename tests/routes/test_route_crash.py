"""A route timer firer SIGKILLed between the take-and-decide write and the delivery (and
between the ledger write and the route's action, and around the retry of a delivery that was
not sent): the state stays consistent, no key is delivered twice, and the lost delivery shows
"in doubt" (at most once: it is not retried).
One row per transaction (one key in doubt) and the default chunk (its unsettled keys in
doubt). Real processes (tests/workers/route_worker.py), SQLite and PostgreSQL."""

from __future__ import annotations

import queue
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO

import pytest
from django.test import override_settings

from routes.models import DeliveryStatus, RouteDelivery
from statecharts import stepper
from statecharts.models import Chart
from tests.routes.recording import file_route_settings, retry_file_route_settings
from timers.models import RouteTimer

Spawn = Callable[..., "subprocess.Popen[str]"]
LINE_TIMEOUT = 60.0
NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="null"'
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
CHART = f"""<scxml {NS} initial="s">
  <state id="s"><onentry>
    <send id="later" type="file" target="x" event="later" delay="3s"/></onentry></state>
</scxml>"""


Lines = queue.Queue[str | None]


def run_worker(spawn: Spawn, err: IO[str], *args: str) -> tuple[subprocess.Popen[str], Lines]:
    process = spawn(["route_worker.py", *args], stdout=subprocess.PIPE, stderr=err)
    lines: Lines = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return process, lines


def expect(lines: Lines, prefix: str, err: IO[str]) -> str:
    deadline = time.monotonic() + LINE_TIMEOUT
    while True:
        line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        if line is None:
            err.seek(0)
            pytest.fail(f"the worker exited before {prefix!r}: {err.read()}")
        if line.startswith(prefix):
            return line[len(prefix) :].strip()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("phase", ["taken", "claimed"])
def test_a_firer_killed_before_the_delivery_leaves_it_in_doubt_and_delivers_nothing_twice(
    spawn: Spawn, tmp_path: Path, phase: str
) -> None:
    """``TIMER_ROUTE_FIRE_CHUNK`` = 1: one row per transaction, so a crash leaves one key in
    doubt."""
    path, keys, fire = _three_sends(tmp_path)
    with (tmp_path / "err1.txt").open("w+") as err:
        process, lines = run_worker(spawn, err, str(path), fire.isoformat(), phase, "2", "1")
        assert expect(lines, "AT", err) == phase
        process.kill()
        process.wait(timeout=LINE_TIMEOUT)
    # Killed at its second delivery: one key delivered, one claimed and never acted on.
    assert len(path.read_text().split()) == 1
    statuses = Counter(RouteDelivery.objects.values_list("status", flat=True))
    assert statuses == {DeliveryStatus.DELIVERED: 1, DeliveryStatus.CLAIMED: 1}
    assert RouteTimer.objects.count() == 1  # the third, still claimed by the dead firer

    # A new firer, once the dead one's claim expired: it fires the third, and never the
    # claimed key again.
    later = fire + timedelta(minutes=10)
    delivered = _refire(spawn, tmp_path, path, later, phase)
    assert len(delivered) == 2 and len(set(delivered)) == 2  # at most once per key
    assert set(delivered) < set(keys.values())
    assert not RouteTimer.objects.exists()
    ledger = {d.key: d for d in RouteDelivery.objects.all()}
    assert set(ledger) == set(keys.values())
    [doubtful] = [d for d in ledger.values() if d.status == DeliveryStatus.CLAIMED]
    assert doubtful.key not in delivered
    assert list(RouteDelivery.objects.in_doubt(later, 300)) == [doubtful]  # shown "in doubt"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("phase", ["taken", "claimed"])
def test_a_chunk_firer_killed_between_deliveries_leaves_its_unsettled_keys_in_doubt(
    spawn: Spawn, tmp_path: Path, phase: str
) -> None:
    """The default chunk: the three rows are taken and their keys claimed in one commit,
    then delivered in turn and settled together. Killed at the second delivery: one key was
    delivered, none is settled yet, so all three are "in doubt" (the action may or may not
    have happened); no row is left, and a new firer delivers nothing again."""
    path, keys, fire = _three_sends(tmp_path)
    with (tmp_path / "err1.txt").open("w+") as err:
        process, lines = run_worker(spawn, err, str(path), fire.isoformat(), phase, "2")
        assert expect(lines, "AT", err) == phase
        process.kill()
        process.wait(timeout=LINE_TIMEOUT)
    assert len(path.read_text().split()) == 1
    assert Counter(RouteDelivery.objects.values_list("status", flat=True)) == {
        DeliveryStatus.CLAIMED: 3
    }
    assert not RouteTimer.objects.exists()  # every row of the chunk was taken

    later = fire + timedelta(minutes=10)
    delivered = _refire(spawn, tmp_path, path, later, phase)
    assert len(delivered) == 1 and set(delivered) < set(keys.values())  # never again
    in_doubt = RouteDelivery.objects.in_doubt(later, 300)
    assert sorted(d.key for d in in_doubt) == sorted(keys.values())


def _three_sends(tmp_path: Path) -> tuple[Path, dict[str, str], datetime]:
    """Three executions, each with one delayed send on the ``file`` route (due at T0 + 3 s)."""
    path = tmp_path / "delivered.txt"
    path.touch()
    with override_settings(STATECHARTS=file_route_settings(str(path))):
        chart = Chart.objects.load(CHART, name="crash")
        executions = [stepper.start(chart, now=T0) for _ in range(3)]
    keys = {e.session_id: f"{e.session_id}:1" for e in executions}
    return path, keys, T0 + timedelta(seconds=5)


def _refire(spawn: Spawn, tmp_path: Path, path: Path, when: datetime, phase: str) -> list[str]:
    """A new firer that runs to the end at ``when``; the keys delivered, ever."""
    with (tmp_path / "err2.txt").open("w+") as err:
        process, lines = run_worker(spawn, err, str(path), when.isoformat(), phase, "0")
        expect(lines, "REPORT", err)
        process.wait(timeout=LINE_TIMEOUT)
    return path.read_text().split()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("phase", ["not_sent", "retry_scheduled"])
def test_a_firer_killed_around_a_retry_never_delivers_twice(
    spawn: Spawn, tmp_path: Path, phase: str
) -> None:
    """The ``file`` route's first attempt of each key is not sent (``NotSent``), its policy
    retries it once. The firer takes the three rows in one chunk; the first key's retry is
    committed; the firer is killed at the second key, either after the route said "not sent"
    and before the retry was written (``not_sent``), or just after the first retry committed
    (``retry_scheduled``). A new firer delivers the first key once, by its retry row; the
    keys the dead firer was holding stay "in doubt" and are never tried again."""
    path = tmp_path / "delivered.txt"
    path.touch()
    with override_settings(STATECHARTS=retry_file_route_settings(str(path))):
        chart = Chart.objects.load(CHART, name="crash")
        executions = [stepper.start(chart, now=T0) for _ in range(3)]
    keys = [f"{e.session_id}:1" for e in executions]
    fire = T0 + timedelta(seconds=5)
    freeze_at = "2" if phase == "not_sent" else "1"
    with (tmp_path / "err1.txt").open("w+") as err:
        process, lines = run_worker(
            spawn, err, str(path), fire.isoformat(), phase, freeze_at, "-", "retry"
        )
        assert expect(lines, "AT", err) == phase
        process.kill()
        process.wait(timeout=LINE_TIMEOUT)
    tried = Path(f"{path}.tried").read_text().split()
    assert len(tried) == (2 if phase == "not_sent" else 1)
    assert path.read_text() == ""  # nothing delivered yet
    statuses = Counter(RouteDelivery.objects.values_list("status", flat=True))
    assert statuses == {DeliveryStatus.RETRYING: 1, DeliveryStatus.CLAIMED: 2}
    [retrying] = RouteDelivery.objects.filter(status=DeliveryStatus.RETRYING)
    assert retrying.key == tried[0]
    assert list(RouteTimer.objects.values_list("key", flat=True)) == [retrying.key]

    later = fire + timedelta(minutes=10)
    with (tmp_path / "err2.txt").open("w+") as err:
        process, lines = run_worker(
            spawn, err, str(path), later.isoformat(), phase, "0", "-", "retry"
        )
        expect(lines, "REPORT", err)
        process.wait(timeout=LINE_TIMEOUT)
    assert path.read_text().split() == [retrying.key]  # the retry, once, same key
    retrying.refresh_from_db()
    assert (retrying.status, retrying.attempts) == (DeliveryStatus.DELIVERED, 2)
    in_doubt = RouteDelivery.objects.in_doubt(later, 300)
    assert sorted(d.key for d in in_doubt) == sorted(set(keys) - {retrying.key})
    assert not RouteTimer.objects.exists()
