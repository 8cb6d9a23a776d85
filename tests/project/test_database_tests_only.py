"""``--database-tests-only`` (the PostgreSQL pass of scripts/test) deselects exactly the tests
that cannot reach the database, as pytest-django decides it (tests/conftest.py): each way a
test gets the database is one test below, and so is a test that does not get it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test import SimpleTestCase, TestCase

ROOT = Path(__file__).resolve().parents[2]
THIS = "tests/project/test_database_tests_only.py"


def reaches_the_database() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        return cursor.fetchone() == (1,)


@pytest.fixture
def unblocked(django_db_blocker: Any) -> Iterator[None]:
    with django_db_blocker.unblock():
        yield


@pytest.mark.django_db
def test_the_django_db_mark_gives_the_database() -> None:
    assert reaches_the_database()


def test_the_db_fixture_gives_the_database(db: None) -> None:
    assert reaches_the_database()


def test_a_fixture_built_on_the_db_fixture_gives_the_database(admin_user: Any) -> None:
    assert admin_user.is_superuser and reaches_the_database()


def test_a_fixture_that_unblocks_the_database_gives_it(unblocked: None) -> None:
    assert reaches_the_database()


def test_the_live_server_gives_the_database(live_server: Any) -> None:
    assert live_server.url.startswith("http://") and reaches_the_database()


class DjangoTestCaseWithTheDatabase(TestCase):
    def test_a_django_test_case_gets_the_database(self) -> None:
        self.assertTrue(reaches_the_database())


class DjangoSimpleTestCase(SimpleTestCase):
    def test_a_simple_test_case_cannot_reach_the_database(self) -> None:
        # Django's refusal (SimpleTestCase) or pytest-django's, whichever comes first.
        with self.assertRaisesRegex(Exception, "not allowed"):
            reaches_the_database()


def test_a_test_without_them_cannot_reach_the_database() -> None:
    # What makes deselecting it safe: pytest-django refuses it the database.
    with pytest.raises(RuntimeError, match="Database access not allowed"):
        reaches_the_database()


def test_the_option_keeps_exactly_the_tests_that_get_the_database() -> None:
    collect = [THIS, "--collect-only", "-q", "--database-tests-only", "-p", "no:cacheprovider"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *collect, "-p", "no:xdist"],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    kept = {line.split("::")[-1] for line in done.stdout.splitlines() if line.startswith(THIS)}
    assert kept == {
        "test_the_django_db_mark_gives_the_database",
        "test_the_db_fixture_gives_the_database",
        "test_a_fixture_built_on_the_db_fixture_gives_the_database",
        "test_a_fixture_that_unblocks_the_database_gives_it",
        "test_the_live_server_gives_the_database",
        "test_a_django_test_case_gets_the_database",
    }
    assert "--database-tests-only: 3 tests that cannot use the database were deselected" in (
        done.stdout
    )
