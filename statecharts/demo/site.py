"""The demo site: migrate, load the example charts, create an admin user, then run the web
server and the timer worker (a django-q2 cluster) together until Ctrl-C stops both.

    python -m statecharts.demo [--host 127.0.0.1] [--port 8000]

The admin credentials come from DEMO_ADMIN_USERNAME / DEMO_ADMIN_PASSWORD; without them the
user is "admin" with a fresh random password, printed.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

import django

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"


def prepare() -> tuple[str, str]:
    """Migrate, load the examples, make sure the admin user exists. Returns its credentials."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from statecharts.models import Chart
    from timers.dispatch import ensure_schedule, wake

    call_command("migrate", verbosity=0)
    for path in sorted(EXAMPLES.glob("*.scxml")):
        chart = Chart.objects.load(path.read_bytes(), name=path.stem)
        print(f"chart #{chart.pk} {chart}  ({path.relative_to(ROOT)})")
    ensure_schedule()  # a sweeper every minute...
    wake()  # ...and one right now, so due timers fire from the first second
    username = os.environ.get("DEMO_ADMIN_USERNAME", "admin")
    password = os.environ.get("DEMO_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
    user_model = get_user_model()
    user, _created = user_model.objects.get_or_create(
        username=username, defaults={"email": f"{username}@example.com"}
    )
    user.is_staff = user.is_superuser = True
    user.set_password(password)
    user.save()
    return username, password


def _signal_group(child: subprocess.Popen[bytes], signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # the whole group is gone already
        os.killpg(child.pid, signum)


def main(host: str = "127.0.0.1", port: int = 8000) -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    from statecharts.demo.durable import database_url

    username, password = prepare()
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
        subprocess.Popen([*manage, "qcluster"], env=env, cwd=ROOT, start_new_session=True),
    ]
    base = f"http://{host}:{port}"
    print(
        f"\nadmin: {base}/admin/  (user {username!r}, password {password!r})\n"
        f"api:   {base}/api/  (schema: {base}/api/schema/)\n"
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
        deadline = time.monotonic() + 15
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
