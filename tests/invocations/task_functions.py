"""Functions the test settings register in STATECHARTS["TASKS"] (demo/settings/test.py), for
the task handler run by a real django-q2 cluster (tests/invocations/test_cluster.py)."""

from __future__ import annotations

import os
import threading
from pathlib import Path


def double(amount: int) -> dict[str, int]:
    return {"doubled": amount * 2}


def stall_first(marker: str) -> dict[str, int]:
    """Appends this process's id to the file ``marker``; the first call in a file then hangs
    forever (until its process is SIGKILLed: tests/invocations/test_handler_crash.py), every
    later call answers how many calls the file has seen."""
    path = Path(marker)
    with path.open("a", encoding="utf-8") as file:
        file.write(f"{os.getpid()}\n")
    calls = path.read_text(encoding="utf-8").split()
    if len(calls) == 1:
        threading.Event().wait()
    return {"calls": len(calls)}
