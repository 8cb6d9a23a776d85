"""The Django project boots on the configured database and its settings parse DATABASE_URL."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection

from demo.database import DatabaseURLError, database_from_url


def test_system_checks_pass() -> None:
    call_command("check", fail_level="WARNING")


@pytest.mark.django_db
def test_database_round_trip() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)


def test_database_url_postgres() -> None:
    db = database_from_url(
        "postgres://u:p%40ss@db.example:5433/app?sslmode=require", default_sqlite=Path("x.db")
    )
    assert db["ENGINE"] == "django.db.backends.postgresql"
    assert (db["USER"], db["PASSWORD"], db["HOST"], db["PORT"], db["NAME"]) == (
        "u",
        "p@ss",
        "db.example",
        "5433",
        "app",
    )
    assert db["OPTIONS"] == {"sslmode": "require"}


def test_database_connections_persist_as_long_as_the_environment_says(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = "postgres://u@db.example/app"
    monkeypatch.delenv("DJANGO_CONN_MAX_AGE", raising=False)
    db = database_from_url(url, default_sqlite=Path("x.db"))
    assert (db["CONN_MAX_AGE"], db["CONN_HEALTH_CHECKS"]) == (0, True)
    for given, kept in [("60", 60), (" 0 ", 0), ("none", None), ("None", None)]:
        monkeypatch.setenv("DJANGO_CONN_MAX_AGE", given)
        assert database_from_url(url, default_sqlite=Path("x.db"))["CONN_MAX_AGE"] == kept
    for wrong in ["-1", "1.5", "forever"]:
        monkeypatch.setenv("DJANGO_CONN_MAX_AGE", wrong)
        with pytest.raises(DatabaseURLError, match="DJANGO_CONN_MAX_AGE must be"):
            database_from_url(url, default_sqlite=Path("x.db"))


def test_database_url_default_is_sqlite_with_waiting_writers() -> None:
    db = database_from_url(None, default_sqlite=Path("/tmp/x.db"))
    assert db["ENGINE"] == "django.db.backends.sqlite3"
    assert db["OPTIONS"]["transaction_mode"] == "IMMEDIATE"


def test_the_test_database_name_keeps_two_runs_apart_on_sqlite_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DATABASE_TEST_NAME", raising=False)
    default = database_from_url(None, default_sqlite=Path("/tmp/app/db.sqlite3"))
    assert default["TEST"]["NAME"] == "/tmp/app/test_db.sqlite3"
    monkeypatch.setenv("DATABASE_TEST_NAME", "test_mine")
    chosen = database_from_url(None, default_sqlite=Path("/tmp/app/db.sqlite3"))
    assert chosen["TEST"]["NAME"] == "/tmp/app/test_mine.sqlite3"  # beside it, never elsewhere
    monkeypatch.setenv("DATABASE_TEST_NAME", "../elsewhere/other.db")
    assert database_from_url(None, default_sqlite=Path("/tmp/app/db.sqlite3"))["TEST"]["NAME"] == (
        "/tmp/app/other.db"
    )


def test_database_url_unknown_scheme_is_refused() -> None:
    with pytest.raises(DatabaseURLError, match="mysql"):
        database_from_url("mysql://root@localhost/x", default_sqlite=Path("x.db"))


def test_a_misconfigured_statecharts_setting_is_a_system_check_error() -> None:
    from django.core.checks import run_checks
    from django.test import override_settings

    bad = {
        "SEND_BUDGET": 0,
        "PERFORMERS": {"schedule": "no.such.module.performer", "teleport": print},
        "TYPO": 1,
    }
    with override_settings(STATECHARTS=bad):
        ids = sorted(message.id for message in run_checks())
    assert ids == [
        "statecharts.E002",  # TYPO
        "statecharts.E003",  # SEND_BUDGET
        "statecharts.E004",  # teleport
        "statecharts.E005",  # unimportable performer
    ]
    # EFFECT_HANDLERS, the deprecated alias of PERFORMERS, is gone: an unknown key now.
    with override_settings(STATECHARTS={"EFFECT_HANDLERS": {}}):
        ids = sorted(message.id for message in run_checks())
    assert ids == ["statecharts.E002"]


def test_url_for_round_trips_through_database_from_url(tmp_path: Path) -> None:
    from demo.database import url_for

    sqlite = database_from_url(f"sqlite:///{tmp_path / 'x.sqlite3'}", default_sqlite=Path("y"))
    assert database_from_url(url_for(sqlite), default_sqlite=Path("y"))["NAME"] == sqlite["NAME"]
    pg = database_from_url("postgres://u:p%40ss@db.example:5433/app", default_sqlite=Path("x"))
    again = database_from_url(url_for(pg), default_sqlite=Path("x"))
    assert {k: again[k] for k in ("USER", "PASSWORD", "HOST", "PORT", "NAME")} == {
        k: pg[k] for k in ("USER", "PASSWORD", "HOST", "PORT", "NAME")
    }


def test_fire_timers_help_says_no_flag_means_once_and_shows_the_defaults() -> None:
    from timers.management.commands.fire_timers import Command

    text = " ".join(Command().create_parser("manage.py", "fire_timers").format_help().split())
    assert "With no flag, or --once, it fires everything due now and exits" in text
    assert "fire what is due, then exit (the default)" in text
    assert "(default: STATECHARTS['TIMER_BATCH'], 100)" in text
    assert "seconds between polls with --loop (default: 0.2)" in text


def test_the_declared_versions_are_the_tested_ones() -> None:
    """pyproject's classifiers, Django range and CHANGELOG say what scripts/test runs: Python
    3.11 (the main passes) to 3.13 (the compatibility pass), Django 5.2 and 6.0."""
    import re
    import tomllib

    root = Path(__file__).resolve().parents[2]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    classifiers = project["classifiers"]
    pythons = sorted(c.rsplit(" ", 1)[1] for c in classifiers if re.fullmatch(
        r"Programming Language :: Python :: 3\.\d+", c
    ))  # fmt: skip
    assert pythons == ["3.11", "3.12", "3.13"]
    assert project["requires-python"] == ">=3.11"
    djangos = [c for c in classifiers if c.startswith("Framework :: Django ::")]
    assert djangos == ["Framework :: Django :: 5.2", "Framework :: Django :: 6.0"]
    assert "django>=5.2,<6.1" in project["dependencies"]
    matrix = (root / "scripts" / "_matrix.sh").read_text()
    assert "python3.13" in matrix and '"django==5.2"' in matrix
    assert '"django>=6.0,<6.1"' in matrix  # the Django 6.0 leg
    changelog = (root / "CHANGELOG.md").read_text()
    assert "Python 3.11" in changelog and "`django>=5.2,<6.1`" in changelog


@pytest.mark.django_db
def test_the_processes_a_test_starts_open_its_own_workers_database() -> None:
    # With pytest-xdist each worker has its own test database (test_..._gw0, ...): a crash or
    # cluster test's subprocess must open that one, never another worker's or the real one.
    from tests.conftest import test_database_env

    url = test_database_env()["DATABASE_URL"]
    name = connection.settings_dict["NAME"]
    assert database_from_url(url, default_sqlite=Path("unused"))["NAME"] == str(
        Path(name).resolve() if connection.vendor == "sqlite" else name
    )
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        assert name.endswith(f"_{worker}")


def test_every_folder_the_compatibility_pass_names_exists() -> None:
    # pytest collects nothing at all when one named path is missing (the pass then fails
    # with "no tests ran"): a folder moved without scripts/_matrix.sh following it.
    root = Path(__file__).resolve().parents[2]
    script = (root / "scripts" / "_matrix.sh").read_text()
    named = set(re.findall(r"\btests/[\w/.]+", script))
    assert named, "scripts/_matrix.sh names no tests"
    assert sorted(p for p in named if not (root / p.split("::")[0]).exists()) == []
