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


def member_of_subject(user: Any, chart: Any, data: Any, subject: Any) -> bool | str:
    """A start check (STATECHARTS["START_CHECKS"]): only members of the group the new
    execution will be about may start it."""
    if subject is not None and user.groups.filter(pk=subject.pk).exists():
        return True
    return f"only a member of the group it is about may start {chart.name}"


def cancel_in_own_group(user: Any, execution: Any, reason: str | None) -> bool | str:
    """A cancel check (STATECHARTS["CANCEL_CHECKS"]): only members of the execution's group."""
    group = execution.subject
    if group is not None and user.groups.filter(pk=group.pk).exists():
        return True
    return f"only a member of {group} may cancel it"


def broken_start(user: Any, chart: Any, data: Any, subject: Any) -> bool:
    """A start check with a bug."""
    raise KeyError("branch")
