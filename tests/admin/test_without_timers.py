"""Without the timers app installed, the admin, the API, the schema and ``statechart show``
still work, show nothing of timers, and never import the timers app: ``statecharts`` knows
timers only through what the timers app registers (``statecharts.extensions``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_admin_api_schema_and_show_work_without_the_timers_app(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.admin.settings_without_timers",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "PYTHONPATH": str(ROOT),
    }
    env.pop("DATABASE_TEST_NAME", None)
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "admin" / "without_timers_site.py"), str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])

    page = report["admin_execution"]
    assert page["status"] == 200 and page["where"]
    assert page["active"] == ["outer", "inner"]
    assert not page["timers_panel"]
    assert report["admin_index"] == 200 and report["admin_chart"] == 200

    detail = report["api_detail"]
    assert detail["status"] == 200
    assert detail["body"]["active_states"] == ["outer", "inner"]
    assert detail["body"]["datamodel"] == {"n": 1}
    assert detail["body"]["unreadable"] == {}
    assert "pending_timers" not in detail["body"]
    # The API root lists charts and executions (and the schema, and docs where the site has
    # a docs page), but no timers.
    assert {"charts", "executions"} <= set(report["api_root"])
    assert "timers" not in report["api_root"]
    assert report["api_timers"] == 404

    assert report["schema"]["status"] == 200
    assert not [path for path in report["schema"]["paths"] if "timers" in path]
    assert "/api/executions/{id}/" in report["schema"]["paths"]

    show = report["show"]
    assert show["active_states"] == ["outer", "inner"] and "timers" not in show
    assert "timers:" not in report["show_text"]
    assert report["timers_imported"] == []
