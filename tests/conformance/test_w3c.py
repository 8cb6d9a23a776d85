"""The W3C SCXML conformance gate: every test in conformance/passing.json must pass.

The pass list is committed and only grows. The suite is read from ../shared/w3c, never
copied into the project (the ``w3c_suite`` fixture, tests/conformance/conftest.py, skips
these tests without it, or fails them in CI).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance.runner import load_cases, report, run

ROOT = Path(__file__).resolve().parents[2]
PASSING = json.loads((ROOT / "conformance" / "passing.json").read_text())
# The bar: every ECMAScript-profile optional test.
ECMASCRIPT_PROFILE = {
    "278",
    "444",
    "445",
    "446",
    "448",
    "449",
    "451",
    "452",
    "453",
    "456",
    "457",
    "459",
    "460",
    "557",
    "558",
    "560",
    "561",
    "562",
    "569",
    "578",
}

# The Basic HTTP Event I/O Processor's tests (routes.basichttp, against a loopback server).
BASIC_HTTP = {"201", "509", "510", "518", "519", "520", "522", "531", "532", "534", "567", "577"}

pytestmark = pytest.mark.conformance


@pytest.fixture(scope="module")
def suite_report(w3c_suite: Path) -> dict[str, object]:
    outcomes, pending = run(w3c_suite)
    assert outcomes, "the W3C runner found no tests"
    return report(outcomes, pending)


def test_no_regression_against_the_committed_pass_list(suite_report: dict) -> None:
    for level in ("mandatory", "optional"):
        failed = suite_report[level]["failed"]
        regressions = {t: failed[t] for t in PASSING[level] if t in failed}
        assert not regressions, f"{level} tests that used to pass now fail: {regressions}"


def test_every_automated_mandatory_document_passes(suite_report: dict) -> None:
    mandatory = suite_report["mandatory"]
    assert mandatory["failed"] == {}
    assert len(mandatory["passed"]) == 160


def test_the_ecmascript_profile_passes(suite_report: dict) -> None:
    optional = suite_report["optional"]
    assert set(optional["passed"]) >= ECMASCRIPT_PROFILE


def test_the_basic_http_tests_pass_and_every_optional_test_with_them(suite_report: dict) -> None:
    optional = suite_report["optional"]
    assert set(optional["passed"]) >= BASIC_HTTP
    assert optional["failed"] == {}
    assert len(optional["passed"]) == 33
    assert suite_report["pending"]["tests"] == []


def test_without_a_server_the_http_tests_are_pending_not_run(w3c_suite: Path) -> None:
    cases, pending = load_cases(w3c_suite)
    ran = {c.test_id for c in cases}
    assert set(pending) == BASIC_HTTP and not ran & BASIC_HTTP
    # Mandatory tests whose numbers fall in the HTTP range still run.
    assert {"525", "530", "533"} <= ran
    cases, pending = load_cases(w3c_suite, http=True)
    assert pending == [] and {c.test_id for c in cases if c.basichttp} == BASIC_HTTP


def test_pass_list_only_contains_tests_that_exist(w3c_suite: Path) -> None:
    cases, _ = load_cases(w3c_suite, http=True)
    ids = {c.test_id for c in cases}
    assert set(PASSING["mandatory"]) | set(PASSING["optional"]) <= ids
