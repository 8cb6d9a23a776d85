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
from django.test import SimpleTestCase

from statecharts.testing import statecharts  # noqa: F401  (the fixture, without installing)
from tests import flush, template_db
from tests.conformance import suite as w3c

ROOT = Path(__file__).resolve().parents[1]
WORKERS = ROOT / "tests" / "workers"

Spawn = Callable[..., "subprocess.Popen[str]"]

DATABASE_TESTS_ONLY = "--database-tests-only"
# pytest-django's fixtures through which a test reaches the database: ``db``,
# ``transactional_db``, ``admin_client``... depend on the first; ``live_server`` asks for
# ``transactional_db`` when it runs, not in its signature.
DATABASE_FIXTURES = frozenset({"_django_db_helper", "django_db_setup", "live_server"})
# How many it deselected, for the closing summary (an xdist worker sends it to the controller).
DESELECTED_DATABASE_FREE = pytest.StashKey[int]()
WORKEROUTPUT_KEY = "statecharts_database_free_deselected"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        DATABASE_TESTS_ONLY,
        action="store_true",
        help="deselect the tests that cannot use the database (the PostgreSQL pass of "
        "scripts/test: they already ran in the SQLite pass)",
    )


def pytest_configure(config: pytest.Config) -> None:
    flush.install()  # the transactional tests' flush, made cheap (tests/flush.py)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist starts the workers
def pytest_sessionstart(session: pytest.Session) -> None:
    template_db.forget_earlier_template(session.config)


def pytest_sessionfinish(session: pytest.Session) -> None:
    template_db.drop_template(session.config)


# The longest tests (a wheel installed into a new project, the W3C suite run durably, a
# browser, the demo site's processes, the timer races on PostgreSQL: 5-20 s each, the hostile
# property tests: 10-30 s each, the template's own pytest run on two workers: 7-15 s) start
# first, spread over the workers (spread_longest_first): with pytest-xdist a worker that began
# one of them as the others finished would hold the whole run for its length.
LONGEST_FIRST = (
    "tests/packaging/",
    "tests/drivers/test_instruction_parity.py",
    "tests/conformance/test_w3c_durable.py",
    "tests/admin/test_admin_browser.py",
    "tests/demo/test_demo_site.py",
    "tests/timers/test_timer_races.py",
    "tests/hostile/test_hostile_property.py",
    "tests/project/test_template_db.py",
)
# Whose tests share a module-scoped fixture (the wheel and its project): kept on one worker.
KEPT_TOGETHER = ("tests/packaging/",)


def uses_the_database(item: pytest.Item) -> bool:
    """Whether pytest-django lets this test reach the database: a ``django_db`` mark, a
    fixture that depends on its database fixtures (``item.fixturenames`` is the closure of
    every fixture requested), a Django test case class with ``databases``, or a fixture that
    unblocks it by hand. Any other test that tried would fail on pytest-django's "Database
    access not allowed"."""
    if item.get_closest_marker("django_db") is not None:
        return True
    if DATABASE_FIXTURES.intersection(getattr(item, "fixturenames", ())):
        return True
    case = getattr(item, "cls", None)
    if isinstance(case, type) and issubclass(case, SimpleTestCase) and bool(case.databases):
        return True
    return unblocks_the_database(item)


def unblocks_the_database(item: pytest.Item) -> bool:
    """Whether the test, or a fixture it uses, asks for ``django_db_blocker`` (whose
    ``unblock()`` opens the database to anything). pytest-django's own autouse fixtures ask
    for it in every test, and open the database only as seen above."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    if "django_db_blocker" in info.argnames:
        return True
    return any(
        "django_db_blocker" in definition.argnames
        and not definition.func.__module__.startswith("pytest_django.")
        for definitions in info.name2fixturedefs.values()
        for definition in definitions
    )


def deselect_database_free(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With --database-tests-only: drop the tests that cannot touch the database (the pure
    core, the in-memory W3C runs, the diagram, parsing, settings...). The PostgreSQL pass runs
    them for nothing: whatever the database, they run the same code, and the SQLite pass runs
    them."""
    if not config.getoption(DATABASE_TESTS_ONLY):
        return
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        (kept if uses_the_database(item) else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    config.stash[DESELECTED_DATABASE_FREE] = len(dropped)
    if hasattr(config, "workeroutput"):  # an xdist worker: tell the controller
        config.workeroutput[WORKEROUTPUT_KEY] = len(dropped)


@pytest.hookimpl(optionalhook=True)  # an xdist hook: pytest runs without xdist too
def pytest_testnodedown(node: Any, error: Any) -> None:
    """(xdist controller) every worker collects the same tests: keep one worker's count."""
    count = getattr(node, "workeroutput", {}).get(WORKEROUTPUT_KEY)
    if count is not None:
        node.config.stash[DESELECTED_DATABASE_FREE] = count


def spread_longest_first(items: list[pytest.Item]) -> None:
    """Put the LONGEST_FIRST tests at the head of every worker's share. pytest-xdist's
    worksteal hands worker k the k-th contiguous slice of this list at the start (and later
    steals from the tails): sorted to the front, all of them would land on the first
    worker, one after the other, while the others steal its short tests."""
    workers = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    units: dict[str, tuple[int, list[pytest.Item]]] = {}  # a test, or KEPT_TOGETHER's module
    others: list[pytest.Item] = []
    for item in items:
        rank = next((n for n, p in enumerate(LONGEST_FIRST) if item.nodeid.startswith(p)), None)
        if rank is None:
            others.append(item)
            continue
        unit = LONGEST_FIRST[rank] if item.nodeid.startswith(KEPT_TOGETHER) else item.nodeid
        units.setdefault(unit, (rank, []))[1].append(item)
    longest = [unit for _rank, unit in sorted(units.values(), key=lambda u: u[0])]  # stable
    heads: list[list[pytest.Item]] = [[] for _ in range(workers)]
    for n, unit in enumerate(longest):
        heads[n % workers].extend(unit)
    ordered: list[pytest.Item] = []
    remaining = len(items)
    for worker, head in enumerate(heads):
        share = remaining // (workers - worker)  # as worksteal divides it
        fill = max(0, share - len(head))
        ordered += head + others[:fill]
        others = others[fill:]
        remaining -= len(head) + fill
    items[:] = ordered + others


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    deselect_database_free(config, items)
    spread_longest_first(items)
    # Tests of row locking need PostgreSQL: SQLite ignores select_for_update. They are gated
    # on the vendor (and run in the PostgreSQL pass of scripts/test), never faked.
    if connection.vendor == "postgresql":
        return
    skip = pytest.mark.skip(reason="needs PostgreSQL (runs in the PostgreSQL pass)")
    for item in items:
        if "postgres" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def django_db_modify_db_settings(
    django_db_modify_db_settings: None, request: pytest.FixtureRequest
) -> Iterator[None]:
    """(pytest-django's hook, run just before it creates the test database) With xdist, each
    worker's test database is a clone of one template migrated once per run
    (tests/template_db.py), not a database migrated by each worker at the same time."""
    with template_db.cloned_for_this_worker(request.config):
        yield


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None, django_db_blocker: Any) -> None:
    """pytest-django's test database, whose commits on PostgreSQL return once the server has
    the WAL record, without waiting for its fsync (``synchronous_commit = off``, set on the
    database so the processes the tests start get it too): as SQLite's ``PRAGMA synchronous=OFF``
    in demo.settings.test. What the tests kill is a client process, never the server, so a
    commit is never lost and the crash tests keep their meaning; WAL records are the same
    (tests/stepper/test_state_index.py counts them). Measured: 3.7-3.9 ms -> 0.06-0.09 ms per
    commit on this machine's disk. Only the suite's database: the benchmarks, which share the
    test settings, keep the server's setting, as django-fsm-2 has it."""
    if connection.vendor != "postgresql":
        return
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        name = connection.ops.quote_name(connection.settings_dict["NAME"])
        cursor.execute(f"ALTER DATABASE {name} SET synchronous_commit = off")
        cursor.execute("SET synchronous_commit = off")  # this session began before the ALTER


@pytest.fixture(scope="session")
def w3c_suite() -> Path:
    """The W3C suite's folder; the test skips without it, or fails when the run requires it
    (tests/conformance/suite.py)."""
    return w3c.require()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    deselected = terminalreporter.config.stash.get(DESELECTED_DATABASE_FREE, None)
    if deselected is not None:
        terminalreporter.write_line(
            f"{DATABASE_TESTS_ONLY}: {deselected} tests that cannot use the database were "
            "deselected (the SQLite pass runs them)"
        )
    report_missing_suite(terminalreporter)


def report_missing_suite(terminalreporter: Any) -> None:
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
