"""The Python examples in the README and docs/ run as written (docs are part of done)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", ROOT / "docs" / "embedding.md"]


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), re.DOTALL)


@pytest.mark.django_db
@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.name)
def test_python_examples_run(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocks = python_blocks(path)
    assert blocks, f"{path.name} has no python example"
    for number, block in enumerate(blocks, 1):
        exec(compile(block, f"{path.name} example {number}", "exec"), {})


@pytest.mark.django_db
def test_durable_executions_examples_run_in_order() -> None:
    namespace: dict[str, object] = {}
    path = ROOT / "docs" / "durable-executions.md"
    blocks = python_blocks(path)
    assert len(blocks) >= 2
    for number, block in enumerate(blocks, 1):
        if "STATECHARTS = {" in block:
            continue  # a settings excerpt, not a runnable example
        exec(compile(block, f"{path.name} example {number}", "exec"), namespace)


@pytest.mark.django_db(transaction=True)
def test_durable_demo_runs_the_example_across_two_processes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from demo import durable

    # A 1 ms reminder: the test waits for the worker process, not for a timer's delay.
    assert durable.run(durable.EXAMPLE, remind_after="1ms") == 0
    out = capsys.readouterr().out
    assert "payment.reminder fired by the worker after" in out
    assert "payment.received {amount: 99.5}, sent by another process" in out
    assert "active, in packing, drafting" in out
    assert "timeout   payment.timeout" in out and "cancelled by <cancel> in step 3" in out
    assert "replay: replayed 5 step(s): every position matches" in out
    assert 'finished: completed, donedata: {"total": 99.5}' in out


def test_memory_demo_runs_the_example_to_completion(capsys: pytest.CaptureFixture[str]) -> None:
    from demo.__main__ import main

    assert main(["--memory"]) == 0
    out = capsys.readouterr().out
    assert "reminder sent: order 42, reminder #1" in out
    assert 'donedata: {"total": 99.5}' in out
