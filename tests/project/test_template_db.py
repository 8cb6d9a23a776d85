"""With pytest-xdist, each worker's test database is a clone of one template migrated once
per run (tests/template_db.py): a run of its own on two workers, started with a stale template
left behind by an earlier run under the same run id, gets two databases of its own, fully
migrated, and leaves no template behind."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection

from demo.database import database_from_url
from tests import template_db

ROOT = Path(__file__).resolve().parents[2]
PROBE = "tests/workers/template_probe.py"
STALE_RUN = "an-earlier-run"


def template_exists(name: str) -> bool:
    if connection.vendor == "sqlite":
        return Path(name).exists()
    with connection.creation._nodb_cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
        return cursor.fetchone() is not None


def leave_a_stale_template(name: str) -> None:
    """What a run killed midway leaves: a template (here one without the migrations) and its
    run id beside the lock."""
    if connection.vendor == "sqlite":
        stale = sqlite3.connect(name)
        stale.execute("CREATE TABLE left_by_an_earlier_run (id integer)")
        stale.commit()
        stale.close()
    else:
        with connection.creation._nodb_cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {connection.ops.quote_name(name)}")
            cursor.execute(f"CREATE DATABASE {connection.ops.quote_name(name)}")
    with template_db.template_lock(connection, name) as lock:
        lock.record(STALE_RUN)


def test_database_name() -> str:
    """The test database DATABASE_URL and DATABASE_TEST_NAME give (demo.settings)."""
    settings = database_from_url(os.environ.get("DATABASE_URL"), default_sqlite=ROOT / "db.sqlite3")
    return settings["TEST"]["NAME"]


test_database_name.__test__ = False  # type: ignore[attr-defined]  # (not a test)


@pytest.fixture
def probe_database(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The probe's test database name (``DATABASE_TEST_NAME`` set for its run), apart from
    this run's and any other's; its template and lock file are gone afterwards, whatever
    happened."""
    monkeypatch.setenv("DATABASE_TEST_NAME", f"test_template_probe_{os.getpid()}")
    name = test_database_name()
    yield name
    template = template_db.template_name(name)
    template_db.drop(connection, template)
    template_db.lock_path(connection, template).unlink(missing_ok=True)


def run_the_probe(folder: Path) -> subprocess.CompletedProcess[str]:
    """tests/workers/template_probe.py on two workers, each running both of its tests, under
    the run id of the stale template."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTEST_XDIST_", "PYTEST_ADDOPTS"))
    }
    xdist = ["-n", "2", "--dist", "each", "--testrunuid", STALE_RUN]
    return subprocess.run(
        [sys.executable, "-m", "pytest", PROBE, "-q", "-p", "no:cacheprovider", *xdist],
        cwd=ROOT,
        env={**env, "STATECHARTS_TEMPLATE_PROBE": str(folder)},
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.mark.django_db
def test_each_worker_gets_a_migrated_clone_and_the_template_is_dropped(
    probe_database: str, tmp_path: Path
) -> None:
    template = template_db.template_name(probe_database)
    leave_a_stale_template(template)

    done = run_the_probe(tmp_path)

    assert done.returncode == 0, done.stdout + done.stderr
    seen = [json.loads(path.read_text()) for path in sorted(tmp_path.glob("*.json"))]
    assert len(seen) == 4  # two tests on each of two workers
    assert {(s["worker"], s["database"]) for s in seen} == {
        ("gw0", f"{probe_database}_gw0"),
        ("gw1", f"{probe_database}_gw1"),
    }
    assert all(s["unapplied_migrations"] == 0 for s in seen), seen  # not the stale template
    assert all(s["applied_migrations"] > 50 for s in seen), seen
    assert all(s["content_types"] > 0 for s in seen), seen
    assert not template_exists(template)
    with template_db.template_lock(connection, template) as lock:
        assert lock.built_by() == ""


def test_each_test_database_has_its_own_template_and_lock() -> None:
    # Two runs side by side (DATABASE_TEST_NAME) never wait for, nor use, each other's.
    mine = template_db.worker_template_name("test_mine_gw0", "gw0")
    theirs = template_db.worker_template_name("test_theirs_gw3", "gw3")
    assert (mine, theirs) == ("test_mine_template", "test_theirs_template")
    assert template_db.worker_template_name("test_mine_gw1", "gw1") == mine
    assert template_db.lock_path(connection, mine) != template_db.lock_path(connection, theirs)


def test_a_database_not_named_by_pytest_django_for_the_worker_is_refused() -> None:
    with pytest.raises(ValueError, match="not the database of xdist worker gw1"):
        template_db.worker_template_name("test_mine_gw0", "gw1")
