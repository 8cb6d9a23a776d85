"""Settings of the test suite (pyproject's ``DJANGO_SETTINGS_MODULE``), of the worker
processes the tests start, and of the repository's tools (benchmarks, ``conformance.durable``).

Never for serving: the key below is public. ``DEBUG`` stays off (pytest-django forces it off
anyway), so the tests see what a deployed site shows.
"""

from __future__ import annotations

import os

from demo.settings.base import *  # noqa: F403

SECRET_KEY = "tests-only-key-never-used-to-serve-anything"
ALLOWED_HOSTS = ["testserver", "localhost", "127.0.0.1"]

# A task function for the invoke-handler test that runs a real django-q2 cluster (the
# cluster reads these settings, so it cannot be given the task any other way).
# A host project's own app with StatechartField models (tests/fields).
INSTALLED_APPS = [*INSTALLED_APPS, "tests.fields.hostapp"]  # noqa: F405

STATECHARTS = {
    "TASKS": {
        "double": "tests.invocations.task_functions.double",
        "stall_first": "tests.invocations.task_functions.stall_first",
    },
    # Where a handler's start runs, for the crash test that runs both ways
    # (tests/invocations/test_handler_crash.py): its worker processes read these settings.
    "INVOKE_HANDLER_QUEUE": os.environ.get("STATECHARTS_TEST_INVOKE_HANDLER_QUEUE", "django_q"),
}

# Django's own advice for test suites ("Speeding up the tests"): the default PBKDF2 hasher
# costs about a third of a second per password by design, and the suite creates a user with a
# password in hundreds of tests. The subprocesses the tests start (workers, clusters) read
# these settings too; the site's own settings (demo.settings.site, .production) keep Django's
# hashers, and tests/demo checks those.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# SQLite: a commit returns once the operating system has the pages, without waiting for the
# disk (PRAGMA synchronous=OFF). What the tests kill is a process, never the machine, and a
# killed process loses nothing this way: the crash tests keep their meaning. The durable
# steps' commits no longer wait for an fsync each.
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    DATABASES["default"]["OPTIONS"]["init_command"] = "PRAGMA synchronous=OFF"  # noqa: F405
