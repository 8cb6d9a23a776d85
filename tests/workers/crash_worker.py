"""A process that feeds one event through the stepper and freezes at a phase, to be SIGKILLed.

Run by tests/stepper/test_crash.py, never collected by pytest::

    DATABASE_URL=... python tests/workers/crash_worker.py PHASE OCCURRENCE EXECUTION_PK EVENT DATA

It installs ``step_transaction.fault_hook``; the OCCURRENCE-th time the stepper reaches PHASE
("locked", "advanced", "before_commit", "committed"; the sender's step reaches each phase
first, then every outbox delivery step does), it prints ``AT <phase>`` to stdout and blocks
forever, holding whatever it holds (the row lock, the SQLite write lock, an open transaction).
If it never gets there it prints ``DONE`` and exits.

EVENT ``__deliver_pending__`` (EXECUTION_PK and DATA ignored) delivers the outbox messages
left pending instead (``stepper.deliver_pending``): the invocation crash tests start a child,
or deliver its answer, that way.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("phase", choices=["locked", "advanced", "before_commit", "committed"])
    parser.add_argument("occurrence", type=int)
    parser.add_argument("execution", type=int)
    parser.add_argument("event")
    parser.add_argument("data", type=json.loads)
    args = parser.parse_args(argv)

    if not os.environ.get("DATABASE_URL"):
        # Without it the worker would step the development database, not the test one.
        parser.error("DATABASE_URL must name the test database")
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "demo.settings.test")

    import django

    django.setup()

    from statecharts import stepper
    from statecharts.stepper import transaction as step_transaction

    seen = 0

    def freeze(phase: str) -> None:
        nonlocal seen
        if phase != args.phase:
            return
        seen += 1
        if seen == args.occurrence:
            print(f"AT {phase}", flush=True)
            threading.Event().wait()

    step_transaction.fault_hook = freeze
    if args.event == "__deliver_pending__":
        stepper.deliver_pending()
    else:
        stepper.send(args.execution, args.event, args.data)
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
