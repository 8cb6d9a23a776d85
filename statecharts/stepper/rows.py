"""A raw row of a query the ORM compiled once (``sql._LockPlan``, ``postgres.NarrowLock``),
turned into the values ``Model.from_db`` takes: what the ORM's own iterator does per row."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper

# (column position, its converters, the expression they were made for): the compiler's
# ``get_converters`` as a list.
Converters = list[tuple[int, Sequence[Any], Any]]


def converters_of(compiler: Any, select: Sequence[Any]) -> Converters:
    """The converters of a compiled query's selected columns, by position."""
    return [
        (pos, convs, expression)
        for pos, (convs, expression) in compiler.get_converters(select).items()
    ]


def converted(found: Sequence[Any], converters: Converters, conn: BaseDatabaseWrapper) -> list[Any]:
    """``found`` with each column's converters (``from_db_value``, the backend's) applied."""
    row = list(found)
    for pos, convs, expression in converters:
        value = row[pos]
        for converter in convs:
            value = converter(value, expression, conn)
        row[pos] = value
    return row
