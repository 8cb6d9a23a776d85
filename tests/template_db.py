"""One migrated template database per test run, cloned for each pytest-xdist worker (a speed
measure of the test suite only, issue 26; ``tests/conftest.py`` installs it).

pytest-django gives each xdist worker its own test database (``test_<name>_gw0``, ...) and
creates it the way Django does: a new database, then all the migrations (about 80). Each pass
of ``scripts/test`` starts three workers on two CPUs, and the three migrated at the same time:
5.5-6 s of wall clock per PostgreSQL migrate alone (2.4 s of client CPU), 13-14 s for the
first test's setup under the pass's load. Here the first worker that needs its database
migrates a template (``<test database name>_template``) while the others wait for it, and
every worker's database is a copy of it: PostgreSQL's ``CREATE DATABASE ... TEMPLATE``, a file
copy on SQLite (what Django's own ``clone_test_db`` does for ``manage.py test --parallel``).

- **Keyed by the test database's name.** The template and its lock are named after the test
  database (``DATABASE_TEST_NAME``), so two runs side by side never share one.
- **Never a template from an earlier run.** Beside the lock, a file holds the id of the run
  (pytest-xdist's ``testrunuid``) whose workers built the template, written once the build
  is complete: a worker of another run, or of this run after a build that failed midway,
  builds it again (Django drops the old one first). The controller (the ``pytest`` process
  the workers report to) forgets the id when the run starts and drops the template when it
  ends; a run killed midway leaves one behind, which the next run replaces. The lock file
  stays (a few bytes per test database name): removed while another process waits on it,
  the next to come would lock a new file beside the old one, and two would build at once.
- **Without xdist nothing changes** (``-n 0``, ``-p no:xdist``): the test database is
  created and migrated as before. Nor with ``--reuse-db``, or an in-memory SQLite database.

After the setup each worker's connection names its own database, exactly as before: the
processes the tests start are handed that one (``tests/conftest.py``, ``test_database_env``),
and settings a clone does not inherit (``ALTER DATABASE ... SET``) are set on it afterwards.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any
from unittest import mock

import pytest
from django.conf import settings
from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper

TEMPLATE_SUFFIX = "_template"
# SQLite's companions of a database file: a journal left by a killed process would be played
# back into a new file of the same name.
SQLITE_COMPANIONS = ("-journal", "-wal", "-shm")

CreateTestDb = Callable[..., str]


def clonable(database: BaseDatabaseWrapper) -> bool:
    """Whether this database's test databases can be cloned from a template: PostgreSQL, or
    SQLite in a file."""
    if database.vendor == "postgresql":
        return True
    if database.vendor == "sqlite":
        return not database.creation.is_in_memory_db(database.creation._get_test_db_name())
    return False


def template_name(test_database: str) -> str:
    """The template of the test database named ``test_database`` (before pytest-django adds
    the worker's suffix): on SQLite a file beside it."""
    return f"{test_database}{TEMPLATE_SUFFIX}"


def worker_template_name(worker_database: str, worker_id: str) -> str:
    """The template of a worker's database: pytest-django names it ``<test database>_<worker
    id>`` (``_set_suffix_to_test_databases``)."""
    suffix = f"_{worker_id}"
    if not worker_database.endswith(suffix):
        raise ValueError(f"{worker_database!r} is not the database of xdist worker {worker_id}")
    return template_name(worker_database.removesuffix(suffix))


def lock_path(database: BaseDatabaseWrapper, template: str) -> Path:
    """The lock (and run-id file) of a template, in the system's temporary folder: named after
    the template and the server it lives on (a path, on SQLite)."""
    where = database.settings_dict
    key = f"{database.vendor}\0{where.get('HOST')}\0{where.get('PORT')}\0{template}"
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(template).name)[:60]
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"statecharts-{readable}-{digest}.lock"


class TemplateLock:
    """An exclusive ``fcntl`` lock on the template's lock file, which holds the id of the run
    that built the template (empty while none is complete). Released when its process
    ends, however it ends."""

    def __init__(self, file: IO[str]) -> None:
        self.file = file

    def built_by(self) -> str:
        self.file.seek(0)
        return self.file.read().strip()

    def record(self, run_id: str) -> None:
        self.file.seek(0)
        self.file.truncate()
        self.file.write(run_id)
        self.file.flush()


@contextlib.contextmanager
def template_lock(database: BaseDatabaseWrapper, template: str) -> Iterator[TemplateLock]:
    with open(lock_path(database, template), "a+", encoding="utf-8") as file:
        fcntl.flock(file, fcntl.LOCK_EX)  # the others wait here while one builds
        try:
            yield TemplateLock(file)
        finally:
            fcntl.flock(file, fcntl.LOCK_UN)


def build_template(
    database: BaseDatabaseWrapper,
    create_test_db: CreateTestDb,
    template: str,
    verbosity: int,
    serialize: bool | None,
) -> None:
    """Django's own creation of a test database (an old one of the same name dropped first,
    the migrations, ``createcachetable``), under the template's name. Never serialized:
    Django 5.2 serializes unless told not to; 6.0 deprecates the argument (its
    ``setup_databases`` no longer passes it, ``serialize`` is None) and does not."""
    not_serialized = {} if serialize is None else {"serialize": False}
    test_settings = database.settings_dict["TEST"]
    chosen = test_settings["NAME"]
    test_settings["NAME"] = template
    try:
        create_test_db(verbosity=verbosity, autoclobber=True, keepdb=False, **not_serialized)
    finally:
        test_settings["NAME"] = chosen
    # Closed: PostgreSQL copies a database only when no session is connected to it, and the
    # SQLite file is complete on disk once its connection is closed.
    database.close()


def remove_sqlite_file(name: str) -> None:
    for path in [name, *(name + companion for companion in SQLITE_COMPANIONS)]:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


def clone(database: BaseDatabaseWrapper, template: str, target: str) -> None:
    """``target``, replaced by a copy of ``template`` (as Django's ``_clone_test_db`` does for
    each backend, with the names given)."""
    if database.vendor == "sqlite":
        remove_sqlite_file(target)
        shutil.copyfile(template, target)
        return
    quote = database.ops.quote_name
    with database.creation._nodb_cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {quote(target)}")
        cursor.execute(f"CREATE DATABASE {quote(target)} TEMPLATE {quote(template)}")


def drop(database: BaseDatabaseWrapper, name: str) -> None:
    if database.vendor == "sqlite":
        remove_sqlite_file(name)
        return
    with database.creation._nodb_cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {database.ops.quote_name(name)}")


def create_from_template(
    database: BaseDatabaseWrapper,
    create_test_db: CreateTestDb,
    run_id: str,
    worker_id: str,
    verbosity: int,
    serialize: bool | None,
) -> str:
    """What Django's ``create_test_db`` leaves (the worker's database, migrated, its name in
    the settings and on the connection, serialized if asked), from the run's template."""
    worker_database = database.creation._get_test_db_name()
    template = worker_template_name(worker_database, worker_id)
    with template_lock(database, template) as lock:
        if lock.built_by() != run_id:
            lock.record("")  # until the build is complete
            build_template(database, create_test_db, template, verbosity, serialize)
            lock.record(run_id)
        clone(database, template, worker_database)
    database.close()
    settings.DATABASES[database.alias]["NAME"] = worker_database
    database.settings_dict["NAME"] = worker_database
    if serialize:
        database._test_serialized_contents = database.creation.serialize_db_to_string()
    database.ensure_connection()
    return worker_database


@contextlib.contextmanager
def cloned_for_this_worker(config: pytest.Config) -> Iterator[None]:
    """While active, in an xdist worker, Django's creation of the test database makes it a
    clone of the run's template (pytest-django's ``django_db_setup`` calls it)."""
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    if workerinput is None or not clonable(connection):
        yield
        return
    create_test_db = connection.creation.create_test_db

    def create_test_db_from_template(
        verbosity: int = 1,
        autoclobber: bool = False,
        serialize: bool | None = None,
        keepdb: bool = False,
    ) -> str:
        if keepdb:  # --reuse-db: the worker's own database, kept from run to run
            given = {} if serialize is None else {"serialize": serialize}
            return create_test_db(
                verbosity=verbosity, autoclobber=autoclobber, keepdb=True, **given
            )
        return create_from_template(
            connection,
            create_test_db,
            run_id=workerinput["testrunuid"],
            worker_id=workerinput["workerid"],
            verbosity=verbosity,
            serialize=serialize,
        )

    with mock.patch.object(connection.creation, "create_test_db", create_test_db_from_template):
        yield


def is_xdist_controller(config: pytest.Config) -> bool:
    return config.pluginmanager.has_plugin("dsession") and not hasattr(config, "workerinput")


def forget_earlier_template(config: pytest.Config) -> None:
    """(the controller, before its workers start) A template left by an earlier run is never
    used, even one whose run id this run was given again (``--testrunuid``)."""
    if not is_xdist_controller(config) or not clonable(connection):
        return
    with template_lock(connection, template_name(connection.creation._get_test_db_name())) as lock:
        lock.record("")


def drop_template(config: pytest.Config) -> None:
    """(the controller, once its workers have ended) The run's template, if one was built."""
    if not is_xdist_controller(config) or not clonable(connection):
        return
    from pytest_django.plugin import blocking_manager_key

    template = template_name(connection.creation._get_test_db_name())
    with template_lock(connection, template) as lock:
        if not lock.built_by():
            return
        with config.stash[blocking_manager_key].unblock():
            drop(connection, template)
        lock.record("")
