"""The README's main job: the demo site starts the web server and the timer worker together,
serves the admin and the API, and Ctrl-C stops both."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            code: int = response.status
            return code
    except urllib.error.HTTPError as exc:
        return exc.code
    except urllib.error.URLError:
        return 0  # not listening yet


def test_demo_site_serves_admin_and_api_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'demo.sqlite3'}",
        "DEMO_ADMIN_PASSWORD": "demo-secret",
        "PYTHONUNBUFFERED": "1",
    }
    site = subprocess.Popen(
        [sys.executable, "-m", "demo", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    try:
        assert site.stdout is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = site.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("api:"):
                break
        output = "".join(lines)
        assert f"admin: http://127.0.0.1:{port}/admin/  (user 'admin', password 'demo-secret')" in (
            output
        ), output
        for name in ("order", "signup", "loan"):
            assert f"{name}  (docs/examples/{name}.scxml)" in output
        deadline = time.monotonic() + 30
        while status(f"http://127.0.0.1:{port}/admin/login/") != 200:
            assert time.monotonic() < deadline, "the web server did not come up"
            time.sleep(0.2)
        assert status(f"http://127.0.0.1:{port}/api/") == 401  # anonymous users can do nothing
    finally:
        site.send_signal(signal.SIGINT)
        rest, _ = site.communicate(timeout=30)
    assert site.returncode == 0, rest
    assert "stopped the web server and the timer worker" in rest
    assert "Q Cluster" in rest and "has stopped" in rest  # the django-q2 cluster ran and stopped
