"""The README's main job: the demo site starts the web server and the timer worker together,
in debug mode and saying so, serves the landing page, the admin and the API, and Ctrl-C stops
both. A second run keeps the admin user's password unless asked to change it."""

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

import pytest
from django.contrib.auth import authenticate

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
        assert "DEBUG is on: this is the demo (DJANGO_DEBUG=1)" in output
        assert "never expose the demo to a network" in output
        assert f"admin: http://127.0.0.1:{port}/admin/  (user 'admin', password 'demo-secret')" in (
            output
        ), output
        assert f"site:  http://127.0.0.1:{port}/" in output
        # The banner with the password comes last: after the cluster says it runs.
        running = [n for n, line in enumerate(lines) if "Q Cluster" in line and "running" in line]
        banner = [n for n, line in enumerate(lines) if line.startswith("admin: ")]
        assert running and banner and running[0] < banner[0], output
        assert f"docs: http://127.0.0.1:{port}/api/docs/" in output
        for name in ("order", "signup", "loan"):
            assert f"{name} v1  (docs/examples/{name}.scxml)" in output
        deadline = time.monotonic() + 30
        while status(f"http://127.0.0.1:{port}/admin/login/") != 200:
            assert time.monotonic() < deadline, "the web server did not come up"
            time.sleep(0.2)
        assert status(f"http://127.0.0.1:{port}/api/") == 401  # anonymous users can do nothing
        assert status(f"http://127.0.0.1:{port}/") == 200  # the landing page ("View site")
        # Debug's runserver serves the static files: the API docs page's Swagger UI.
        bundle = "static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js"
        assert status(f"http://127.0.0.1:{port}/{bundle}") == 200
        # The timer worker is a second process: Ctrl-C once it says it runs (on a loaded
        # machine it may still be starting when the web server already answers).
        deadline = time.monotonic() + 60
        while not any("Q Cluster" in line and "running" in line for line in lines):
            assert time.monotonic() < deadline, "the timer worker did not start"
            line = site.stdout.readline()
            if not line:
                break
            lines.append(line)
    finally:
        site.send_signal(signal.SIGINT)
        rest, _ = site.communicate(timeout=60)
    assert site.returncode == 0, rest
    assert "stopped the web server and the timer worker" in rest
    # The django-q2 cluster ran and was asked to stop (its last line, "has stopped", may not
    # come on a loaded machine before the site's grace period ends and it is killed).
    assert "Q Cluster" in rest and "stopping" in rest


@pytest.mark.django_db
def test_a_second_demo_run_keeps_the_admin_password_unless_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from demo.site import prepare

    monkeypatch.delenv("DEMO_ADMIN_PASSWORD", raising=False)
    monkeypatch.delenv("DEMO_ADMIN_USERNAME", raising=False)
    username, first = prepare()
    assert username == "admin" and first  # a new user: a fresh password, printed
    assert prepare() == ("admin", None)  # an existing user keeps it
    assert authenticate(username="admin", password=first)

    _, reset = prepare(reset_admin_password=True)  # --reset-admin-password
    assert reset and reset != first
    assert authenticate(username="admin", password=reset)
    assert not authenticate(username="admin", password=first)

    monkeypatch.setenv("DEMO_ADMIN_PASSWORD", "chosen-one")
    assert prepare() == ("admin", "chosen-one")
    assert authenticate(username="admin", password="chosen-one")
