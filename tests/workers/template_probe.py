"""Two database tests that tests/project/test_template_db.py runs in a ``pytest -n 2`` of its
own (``--dist each``: both workers run both): each writes down, in the folder
``STATECHARTS_TEMPLATE_PROBE`` names, which database its worker got and what it holds."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def write_down(kind: str) -> None:
    executor = MigrationExecutor(connection)
    unapplied = executor.migration_plan(executor.loader.graph.leaf_nodes())
    worker = os.environ["PYTEST_XDIST_WORKER"]
    seen = {
        "worker": worker,
        "database": connection.settings_dict["NAME"],
        "unapplied_migrations": len(unapplied),
        "applied_migrations": len(executor.loader.applied_migrations),
        # Written by post_migrate, kept by the transactional tests' flush (tests/flush.py).
        "content_types": ContentType.objects.count(),
    }
    Path(os.environ["STATECHARTS_TEMPLATE_PROBE"], f"{worker}-{kind}.json").write_text(
        json.dumps(seen)
    )


@pytest.mark.django_db
def test_in_a_transaction() -> None:
    write_down("transaction")


@pytest.mark.django_db(transaction=True)
def test_with_real_commits() -> None:
    write_down("transactional")
