"""Shared test configuration."""

from __future__ import annotations

import pytest
from django.db import connection


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Tests of row locking need PostgreSQL: SQLite ignores select_for_update. They are gated
    # on the vendor (and run in the PostgreSQL pass of scripts/test), never faked.
    if connection.vendor == "postgresql":
        return
    skip = pytest.mark.skip(reason="needs PostgreSQL (runs in the PostgreSQL pass)")
    for item in items:
        if "postgres" in item.keywords:
            item.add_marker(skip)
