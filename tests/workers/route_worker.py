"""A route timer firer in its own process, to be SIGKILLed between the take-and-decide write
and the delivery, then replaced by a new one.

Run by tests/routes/test_route_crash.py, never collected by pytest::

    DATABASE_URL=... python tests/workers/route_worker.py PATH FIRE PHASE K [CHUNK] [retry]

The route ``file`` appends each delivered key to PATH (the outside action). The worker fires
everything due at FIRE (``firing.fire_all_due``) with the fault hook of PHASE installed
(``taken``: timers.routequeue, the row deleted and the key claimed, committed; ``claimed``:
routes.delivering, just before the route is called): the K-th time it gets there it prints
``AT <phase>`` and blocks forever, waiting for its SIGKILL. K = 0 never freezes; it prints
``REPORT <json outcomes>`` at the end. CHUNK is ``TIMER_ROUTE_FIRE_CHUNK`` (default: the
settings'; "-" for them). ``retry``: the ``file`` route's first attempt of each key is not
sent and retried (``retry_file_route_settings``), and the phases of routes.retrying
(``not_sent``, ``retry_scheduled``) can be frozen too.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str]) -> int:
    path, fire, phase, freeze_at = argv[0], datetime.fromisoformat(argv[1]), argv[2], int(argv[3])
    chunk = {"TIMER_ROUTE_FIRE_CHUNK": int(argv[4])} if len(argv) > 4 and argv[4] != "-" else {}
    retry = len(argv) > 5 and argv[5] == "retry"
    if not os.environ.get("DATABASE_URL"):
        raise SystemExit("DATABASE_URL must name the test database")
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "demo.settings.test")

    import django

    django.setup()

    from django.test import override_settings

    from routes import delivering, retrying
    from tests.routes.recording import file_route_settings, retry_file_route_settings
    from timers import firing, routequeue

    seen = 0

    def freeze(at: str) -> None:
        nonlocal seen
        if at != phase:
            return
        seen += 1
        if seen == freeze_at:
            print(f"AT {at}", flush=True)
            threading.Event().wait()

    routequeue.fault_hook = freeze
    delivering.fault_hook = freeze
    retrying.fault_hook = freeze
    routes = retry_file_route_settings(path) if retry else file_route_settings(path)
    with override_settings(STATECHARTS={**routes, **chunk}):
        report = firing.fire_all_due(now=fire)
    print(f"REPORT {json.dumps(report.outcomes)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
