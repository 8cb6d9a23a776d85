"""A client that starts or sends with an idempotency key and is killed before it hears back.

Run by tests/policies/attribution/test_idempotent_inputs.py, never collected by pytest::

    DATABASE_URL=... python tests/workers/idempotent_client.py PHASE ACTION TARGET KEY DATA

ACTION ``send`` feeds the event ``go`` with DATA to the execution TARGET; ``start`` starts
the chart TARGET with start DATA. Both pass KEY as the idempotency key. It installs the
stepper's ``fault_hook``: the first time the step reaches PHASE ("locked", "before_commit",
"committed") it prints ``AT <phase>`` and blocks forever (holding the row lock and the open
transaction before the commit; after it, the answer is simply never delivered). The test
SIGKILLs it there and retries with the same key. If it never gets there it prints ``DONE``.
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
    parser.add_argument("phase", choices=["locked", "before_commit", "committed"])
    parser.add_argument("action", choices=["send", "start"])
    parser.add_argument("target", type=int)
    parser.add_argument("key")
    parser.add_argument("data", type=json.loads)
    args = parser.parse_args(argv)

    if not os.environ.get("DATABASE_URL"):
        parser.error("DATABASE_URL must name the test database")
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "demo.settings.test")

    import django

    django.setup()

    from statecharts import stepper
    from statecharts.models import Chart
    from statecharts.stepper import transaction as step_transaction

    def freeze(phase: str) -> None:
        if phase == args.phase:
            print(f"AT {phase}", flush=True)
            threading.Event().wait()

    step_transaction.fault_hook = freeze
    context = {"client": "killed"}
    if args.action == "send":
        stepper.send(args.target, "go", args.data, caller_context=context, idempotency_key=args.key)
    else:
        stepper.start(
            Chart.objects.get(pk=args.target),
            data=args.data,
            caller_context=context,
            idempotency_key=args.key,
        )
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
