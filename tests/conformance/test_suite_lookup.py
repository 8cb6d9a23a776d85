"""Without the W3C suite the conformance tests skip, saying what the suite is and where it
comes from; with STATECHARTS_W3C_REQUIRED=1 (CI, .ci/run) the same absence fails the run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.runner import REQUIRED_ENV, SUITE_ENV, SuiteNotFound, find_suite

ROOT = Path(__file__).resolve().parents[2]
# Two tests that read the suite, from two modules (one parametrized at collection time).
SUITE_READERS = [
    "tests/conformance/test_w3c.py::test_pass_list_only_contains_tests_that_exist",
    "tests/diagram/test_diagram.py::test_every_w3c_document_renders",
]


def run_without_the_suite(tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != REQUIRED_ENV}
    env.update({SUITE_ENV: str(tmp_path / "no-suite-here"), **extra})
    return subprocess.run(
        [sys.executable, "-m", "pytest", *SUITE_READERS, "-q", "-rs", "-p", "no:cacheprovider"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_missing_suite_is_explained(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SUITE_ENV, str(tmp_path))
    with pytest.raises(SuiteNotFound) as missing:
        find_suite()
    message = str(missing.value)
    assert str(tmp_path / "manifest.xml") in message
    assert "Implementation Report Plan" in message and "../shared/w3c" in message
    assert "docs/conformance.md" in message


def test_a_named_folder_is_used_and_nothing_else(tmp_path: Path) -> None:
    (tmp_path / "manifest.xml").write_text("<manifest/>")
    assert find_suite(str(tmp_path)) == tmp_path
    with pytest.raises(SuiteNotFound):
        find_suite(str(tmp_path / "elsewhere"))  # no fallback behind an explicit choice


def test_outside_ci_a_missing_suite_skips_the_conformance_tests(tmp_path: Path) -> None:
    done = run_without_the_suite(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 skipped" in done.stdout
    # One short line per skipped test; what the suite is and where it comes from, once.
    assert done.stdout.count("W3C suite not found: conformance test skipped") == 2
    assert done.stdout.count("Implementation Report Plan") == 1
    assert "../shared/w3c" in done.stdout


def test_in_ci_a_missing_suite_fails_the_run(tmp_path: Path) -> None:
    done = run_without_the_suite(tmp_path, **{REQUIRED_ENV: "1"})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed, 1 error" in done.stdout
    assert f"{REQUIRED_ENV}=1" in done.stdout and "W3C suite not found" in done.stdout
