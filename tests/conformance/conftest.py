"""The W3C suite for the conformance tests: found, or skipped with the reason (a checkout
without ../shared/w3c), or failed when STATECHARTS_W3C_REQUIRED=1 (CI sets it in .ci/run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.runner import REQUIRED_ENV, SuiteNotFound, find_suite, suite_required


@pytest.fixture(scope="session")
def w3c_suite() -> Path:
    try:
        return find_suite()
    except SuiteNotFound as missing:
        if suite_required():
            pytest.fail(f"{missing} ({REQUIRED_ENV}=1: this run requires it)", pytrace=False)
        pytest.skip(str(missing))
