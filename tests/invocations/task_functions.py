"""Functions the test settings register in STATECHARTS["TASKS"] (demo/settings/test.py), for
the task handler run by a real django-q2 cluster (tests/invocations/test_cluster.py)."""

from __future__ import annotations


def double(amount: int) -> dict[str, int]:
    return {"doubled": amount * 2}
