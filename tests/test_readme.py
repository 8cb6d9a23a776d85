"""The README's thirty-second example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)
    assert blocks, "README has no python example"
    for block in blocks:
        exec(compile(block, str(README), "exec"), {})


def test_demo_runs_the_example_to_completion(capsys) -> None:
    from statecharts.demo import main

    assert main([]) == 0
    out = capsys.readouterr().out
    assert "reminder sent: order 42, reminder #1" in out
    assert 'donedata: {"total": 99.5}' in out
