"""The demo site: migrate, load the example charts, create an admin user, then run the web
server and the timer worker (a django-q2 cluster) together until Ctrl-C stops both.

    python -m demo [--host 127.0.0.1] [--port 8000]

The admin user is DEMO_ADMIN_USERNAME ("admin" by default). Its password is set only when
asked: DEMO_ADMIN_PASSWORD, or ``--reset-admin-password`` (a fresh random one, printed); a
new user gets a fresh random password, printed. An existing user keeps the password it has,
so a second run does not lock you out of a browser session you had.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

import django

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "docs" / "examples"


def prepare(*, reset_admin_password: bool = False) -> tuple[str, str | None]:
    """Migrate, load the examples, make sure the admin user exists. Returns its name and the
    password set now (None when an existing user kept its own)."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from statecharts.models import Chart
    from timers.dispatch import ensure_schedule, wake

    call_command("migrate", verbosity=0)
    for path in sorted(EXAMPLES.glob("*.scxml")):
        # The demo owns its examples: an edited one becomes their next version.
        chart = Chart.objects.load(path.read_bytes(), name=path.stem, new_version=True)
        print(f"chart #{chart.pk} {chart}  ({path.relative_to(ROOT)})")
    ensure_schedule()  # a sweeper every minute...
    wake()  # ...and one right now, so due timers fire from the first second
    username = os.environ.get("DEMO_ADMIN_USERNAME", "admin")
    user_model = get_user_model()
    user, created = user_model.objects.get_or_create(
        username=username, defaults={"email": f"{username}@example.com"}
    )
    user.is_staff = user.is_superuser = True
    password = os.environ.get("DEMO_ADMIN_PASSWORD") or None
    if password is None and (created or reset_admin_password):
        password = secrets.token_urlsafe(12)
    if password is not None:
        user.set_password(password)
    user.save()
    return username, password


def _signal_group(child: subprocess.Popen[Any], signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # the whole group is gone already
        os.killpg(child.pid, signum)


CLUSTER_START_SECONDS = 60  # a loaded machine's cluster can be slow to start


def _relay(cluster: subprocess.Popen[str], ready: threading.Event) -> None:
    """Print the cluster's output as it comes; set ``ready`` at its "running" line."""
    assert cluster.stdout is not None
    for line in cluster.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        if "Q Cluster" in line and "running" in line:
            ready.set()


def main(host: str = "127.0.0.1", port: int = 8000, *, reset_admin_password: bool = False) -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "demo.settings.site")
    django.setup()
    from demo.durable import database_url

    username, password = prepare(reset_admin_password=reset_admin_password)
    env = {**os.environ, "DATABASE_URL": database_url(), "PYTHONUNBUFFERED": "1"}
    manage = [sys.executable, str(ROOT / "manage.py")]
    # Each child leads its own process group, so stopping reaches the cluster's workers too.
    children = [
        subprocess.Popen(
            [*manage, "runserver", f"{host}:{port}", "--noreload"],
            env=env,
            cwd=ROOT,
            start_new_session=True,
        ),
        subprocess.Popen(
            [*manage, "qcluster"],
            env=env,
            cwd=ROOT,
            start_new_session=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        ),
    ]
    # The cluster's lines pass through; the banner (with the password) waits for its
    # "running" line, so that it comes last, not buried among the cluster's start-up lines.
    ready = threading.Event()
    threading.Thread(target=_relay, args=(children[1], ready), daemon=True).start()
    deadline = time.monotonic() + CLUSTER_START_SECONDS
    while not ready.wait(0.2) and time.monotonic() < deadline:
        if children[1].poll() is not None:
            break
    base = f"http://{host}:{port}"
    credentials = (
        f"password {password!r}"
        if password is not None
        else "its password unchanged; --reset-admin-password gives it a new one"
    )
    print(
        f"\nsite:  {base}/  (what this is, and links)\n"
        f"admin: {base}/admin/  (user {username!r}, {credentials})\n"
        f"api:   {base}/api/  (docs: {base}/api/docs/, schema: {base}/api/schema/)\n"
        "the timer worker (django-q2 cluster) is running; Ctrl-C stops both\n",
        flush=True,
    )
    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        while not stopping and all(child.poll() is None for child in children):
            time.sleep(0.2)
    finally:
        for child in children:
            _signal_group(child, signal.SIGINT)
        # A loaded machine's cluster can take a while to finish its work and stop.
        deadline = time.monotonic() + 30
        for child in children:
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(child, signal.SIGKILL)
                child.wait()
            _signal_group(child, signal.SIGKILL)  # whatever of the group is left
    failed = [child.args[2] for child in children if child.returncode not in (0, -2, -15)]
    if failed and not stopping:
        print(f"stopped: {', '.join(map(str, failed))} exited unexpectedly", file=sys.stderr)
        return 1
    print("stopped the web server and the timer worker")
    return 0
