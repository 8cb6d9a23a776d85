"""Where an execution stands in its tree of child charts: its invocation depth and root.

Read by the performers (written on the invocation row when a child is invoked) and by the
children's bounds (``invocations.children``); its own module so neither imports the other.
"""

from __future__ import annotations

from invocations.conf import invocation_settings
from invocations.models import Invocation
from statecharts.models import Execution
from statecharts.stepper import database


def lineage(execution: Execution) -> tuple[int, int]:
    """(the execution's invocation depth, its tree's root id): (0, itself) for a root.

    A child's are on the row that invoked it (one indexed read, no walk); for a child invoked
    before rows carried them, the chain is walked, at most ``INVOKE_MAX_DEPTH + 1`` rows up (a
    chain longer than that is over the bound whatever its exact length).
    """
    if execution.parent_id is None:
        return 0, execution.pk
    row = (
        Invocation.objects.using(database())
        .filter(parent_id=execution.parent_id, ordinal=execution.invoke_ordinal)
        .values_list("depth", "root_id")
        .first()
    )
    if row is not None and row[0] is not None and row[1] is not None:
        return row[0], row[1]
    depth, current = 0, execution.parent_id
    executions = Execution.objects.using(database())
    while current is not None and depth <= invocation_settings.INVOKE_MAX_DEPTH:
        depth += 1
        above = executions.filter(pk=current).values_list("parent_id", flat=True).first()
        if above is None:
            break
        current = above
    return depth, current if current is not None else execution.pk
