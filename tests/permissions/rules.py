"""A named event check for the tests (STATECHARTS["EVENT_CHECKS"]["same_group"])."""

from __future__ import annotations

from typing import Any


def same_group(user: Any, execution: Any, event: str, data: Any) -> bool | str:
    """Only members of the group the execution is about may send the event."""
    group = execution.subject
    if group is not None and user.groups.filter(pk=group.pk).exists():
        return True
    return f"only a member of {group}"


def broken(user: Any, execution: Any, event: str, data: Any) -> bool:
    """A check with a bug."""
    raise KeyError("branch")
