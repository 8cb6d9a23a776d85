"""Settings of the test suite (pyproject's ``DJANGO_SETTINGS_MODULE``), of the worker
processes the tests start, and of the repository's tools (benchmarks, ``conformance.durable``).

Never for serving: the key below is public. ``DEBUG`` stays off (pytest-django forces it off
anyway), so the tests see what a deployed site shows.
"""

from __future__ import annotations

from demo.settings.base import *  # noqa: F403

SECRET_KEY = "tests-only-key-never-used-to-serve-anything"
ALLOWED_HOSTS = ["testserver", "localhost", "127.0.0.1"]

# A task function for the invoke-handler test that runs a real django-q2 cluster (the
# cluster reads these settings, so it cannot be given the task any other way).
STATECHARTS = {"TASKS": {"double": "tests.invocations.task_functions.double"}}
