"""Shared test configuration, and the helpers the race and crash tests share.

Layout: ``tests/`` mirrors the project (``core``, ``drivers``, ``stepper``, ``timers``,
``api``, ``admin``, ``commands``, ...); ``tests/workers/`` holds the scripts the crash and race
tests run as real subprocesses (never collected by pytest).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from django.db import connection

from statecharts.testing import statecharts  # noqa: F401  (the fixture, without installing)
from tests import flush
from tests.conformance import suite as w3c

ROOT = Path(__file__).resolve().parents[1]
WORKERS = ROOT / "tests" / "workers"

Spawn = Callable[..., "subprocess.Popen[str]"]


def pytest_configure(config: pytest.Config) -> None:
    flush.install()  # the transactional tests' flush, made cheap (tests/flush.py)


# The longest tests (a wheel installed into a new project, the W3C suite run durably, a
# browser, the demo site's processes) start first: with pytest-xdist a worker that began one
# of them as the others finished would hold the whole run for its length.
LONGEST_FIRST = (
    "tests/packaging/",
    "tests/drivers/test_instruction_parity.py",
    "tests/conformance/test_w3c_durable.py",
    "tests/admin/test_admin_browser.py",
    "tests/demo/test_demo_site.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: not item.nodeid.startswith(LONGEST_FIRST))  # stable
    # Tests of row locking need PostgreSQL: SQLite ignores select_for_update. They are gated
    # on the vendor (and run in the PostgreSQL pass of scripts/test), never faked.
    if connection.vendor == "postgresql":
        return
    skip = pytest.mark.skip(reason="needs PostgreSQL (runs in the PostgreSQL pass)")
    for item in items:
        if "postgres" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def w3c_suite() -> Path:
    """The W3C suite's folder; the test skips without it, or fails when the run requires it
    (tests/conformance/suite.py)."""
    return w3c.require()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    # Said once per run, whatever the number of tests that skipped for it (and with xdist,
    # whichever worker skipped them: the reports reach this process).
    skipped = terminalreporter.stats.get("skipped", [])
    if not any(w3c.SKIP_REASON in str(getattr(report, "longrepr", "")) for report in skipped):
        return
    terminalreporter.section("W3C suite")
    terminalreporter.write_line(str(w3c.lookup()))


def test_database_env() -> dict[str, str]:
    """The environment of a subprocess that must use this test run's database."""
    from demo.database import url_for

    return {
        **os.environ,
        "DATABASE_URL": url_for(connection.settings_dict),
        "DJANGO_SETTINGS_MODULE": "demo.settings.test",
    }


test_database_env.__test__ = False  # type: ignore[attr-defined]  # (not a test)


def spawn_on_test_database(args: list[str], **popen: Any) -> subprocess.Popen[str]:
    """Start ``python ARGS...`` from the project root on the test database (a real process:
    crash tests SIGKILL it). ``args[0]`` may name a script in tests/workers/."""
    if connection.vendor == "sqlite":
        # The subprocess needs the write lock: this connection must not hold it.
        assert not connection.in_atomic_block
    script = WORKERS / args[0]
    argv = [str(script), *args[1:]] if script.is_file() else list(args)
    options: dict[str, Any] = {
        "cwd": ROOT,
        "env": test_database_env(),
        "stdin": subprocess.DEVNULL,
        "text": True,
        **popen,
    }
    return subprocess.Popen([sys.executable, *argv], **options)


@pytest.fixture
def spawn() -> Spawn:
    """``spawn(["crash_worker.py", ...], stdout=..., stderr=...)``: see spawn_on_test_database."""
    return spawn_on_test_database


@contextlib.contextmanager
def running_qcluster(log: IO[str], *, grace: float = 30.0) -> Iterator[subprocess.Popen[str]]:
    """A real ``manage.py qcluster`` on the test database, its output in ``log``; SIGTERMed
    when the block ends (its process group SIGKILLed if it does not stop in ``grace``)."""
    cluster = spawn_on_test_database(
        ["manage.py", "qcluster"],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: the fallback kills its children too
    )
    try:
        yield cluster
    finally:
        if cluster.poll() is None:
            cluster.send_signal(signal.SIGTERM)
            try:
                cluster.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                os.killpg(cluster.pid, signal.SIGKILL)
                cluster.wait(timeout=grace)


def wait_until(
    condition: Callable[[], bool],
    cluster: subprocess.Popen[str],
    log: IO[str],
    what: str,
    *,
    deadline: float = 60.0,
) -> float:
    """Poll the database until ``condition`` holds (another process is doing the work; this
    is not waiting for a timer); the seconds it took. Fails at ``deadline`` or if the cluster
    exits, with its log."""
    started = time.monotonic()
    while not condition():
        if cluster.poll() is not None or time.monotonic() - started > deadline:
            log.flush()
            log.seek(0)
            state = f"exited ({cluster.returncode})" if cluster.poll() is not None else "running"
            pytest.fail(f"no {what} (cluster {state}); its log:\n{log.read()[-10_000:]}")
        time.sleep(0.05)
    return time.monotonic() - started


@pytest.fixture
def qcluster() -> Callable[..., Any]:
    """``with qcluster(log) as cluster:`` a real django-q2 cluster (see running_qcluster)."""
    return running_qcluster


@pytest.fixture
def wait_for_cluster() -> Callable[..., float]:
    return wait_until
