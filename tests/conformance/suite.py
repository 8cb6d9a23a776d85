"""The W3C suite for every test that reads it (the conformance gate, the driver-parity test,
the diagram test): one lookup per run that honours ``STATECHARTS_W3C_SUITE`` (a folder
elsewhere) and ``STATECHARTS_W3C_REQUIRED=1`` (CI: a missing suite fails instead of skipping).

Without the suite each such test skips with one short line; the explanation of what the suite
is and where it comes from is printed once, at the end of the run (``tests/conftest.py``).
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from conformance.runner import REQUIRED_ENV, SuiteNotFound, find_suite, suite_required

SKIP_REASON = "W3C suite not found: conformance test skipped (the 'W3C suite' section says why)"


@functools.cache
def lookup() -> Path | SuiteNotFound:
    """The suite's folder, or why it was not found (looked up once per process)."""
    try:
        return find_suite()
    except SuiteNotFound as missing:
        return missing


def missing() -> SuiteNotFound | None:
    """Why the suite was not found, if it was looked for and not found in this process."""
    if lookup.cache_info().currsize == 0:
        return None
    found = lookup()
    return found if isinstance(found, SuiteNotFound) else None


def require() -> Path:
    """The suite's folder; otherwise skip the calling test (a checkout without the suite) or
    fail it (``STATECHARTS_W3C_REQUIRED=1``)."""
    found = lookup()
    if isinstance(found, Path):
        return found
    if suite_required():
        pytest.fail(f"{found} ({REQUIRED_ENV}=1: this run requires it)", pytrace=False)
    pytest.skip(SKIP_REASON)


def available() -> Path | None:
    """The suite's folder, or None; for parametrizing at collection time, where a test must
    then call :func:`require` for the ``None`` case (so it skips or fails as above)."""
    found = lookup()
    return found if isinstance(found, Path) else None
