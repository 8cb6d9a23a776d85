"""The stepper works with ``timers`` and ``invocations`` absent from INSTALLED_APPS.

An absent app contributes nothing to the registered-types snapshot: a delayed send has no
timer queue and is refused with ``error.communication`` into the chart, and an ``<invoke>``
is ``error.execution``; neither is ever silently dropped. A real process, configured with
only ``statecharts``, shows it (tests/workers/without_apps.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_without_the_timers_and_invocations_apps_the_chart_is_told(tmp_path: Path) -> None:
    worker = ROOT / "tests" / "workers" / "without_apps.py"
    done = subprocess.run(
        [sys.executable, str(worker), str(tmp_path / "db.sqlite3")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["delayed"] == ["refused"]
    assert "timer queue" in result["why"]
    assert result["types"] == {"send": {}, "invoke": [], "timers": False}
    assert result["invoking"] == ["refused"]
