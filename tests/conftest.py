"""Shared test configuration, and the helpers the race and crash tests share.

Layout: ``tests/`` mirrors the project (``core``, ``drivers``, ``stepper``, ``timers``,
``api``, ``admin``, ``commands``, ...); ``tests/workers/`` holds the scripts the crash and race
tests run as real subprocesses (never collected by pytest).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[1]
WORKERS = ROOT / "tests" / "workers"

Spawn = Callable[..., "subprocess.Popen[str]"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Tests of row locking need PostgreSQL: SQLite ignores select_for_update. They are gated
    # on the vendor (and run in the PostgreSQL pass of scripts/test), never faked.
    if connection.vendor == "postgresql":
        return
    skip = pytest.mark.skip(reason="needs PostgreSQL (runs in the PostgreSQL pass)")
    for item in items:
        if "postgres" in item.keywords:
            item.add_marker(skip)


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
