"""The invocations section of an execution's read model (see ``statecharts.operations.inspection``).

Shown by every door: the admin's invocations panel (with links to the child and back to the
parent), the API's ``invocations`` field, ``statechart show``. It also says which states have
active invocations, for the diagram.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from invocations.models import OPEN_STATUSES, Invocation


@dataclass(frozen=True, slots=True)
class InvocationRow:
    invocation: Invocation

    def document(self) -> dict[str, Any]:
        i = self.invocation
        return {
            "id": i.pk,
            "invokeid": i.invokeid,
            "ordinal": i.ordinal,
            "type": i.type,
            "state": i.state,
            "status": i.status,
            "reason": i.reason,
            "child": i.child_id,
            "chart": i.chart_id,
            "attempts": i.attempts,
            "last_error": i.last_error,
            "created": i.created.isoformat(),
        }

    def line(self) -> str:
        i = self.invocation
        text = f"  {i.invokeid} #{i.ordinal} ({i.type}) in {i.state}: {i.status}"
        if i.child_id:
            text += f", child {i.child_id}"
        return f"{text}: {i.reason}" if i.reason else text


@dataclass(frozen=True, slots=True)
class InvocationsSection:
    rows: tuple[InvocationRow, ...]  # in invocation order
    parent: Any  # the execution that invoked this one, if it is a child
    active_states: tuple[str, ...]  # states whose invocations are open (for the diagram)


def read_invocations(execution: Any, now: datetime) -> InvocationsSection:
    rows = tuple(
        InvocationRow(i)
        for i in Invocation.objects.filter(parent=execution).order_by("ordinal")
    )
    active = tuple(sorted({r.invocation.state for r in rows if r.invocation.status in
                           OPEN_STATUSES}))
    parent = execution.parent if getattr(execution, "parent_id", None) else None
    return InvocationsSection(rows, parent, active)


def invocations_document(section: InvocationsSection) -> dict[str, Any]:
    return {
        "invocations": [row.document() for row in section.rows],
        "parent": section.parent.pk if section.parent is not None else None,
        "active_states": list(section.active_states),
    }


def invocations_lines(section: InvocationsSection) -> list[str]:
    lines = [f"invocations: {len(section.rows)}"]
    lines += [row.line() for row in section.rows]
    if section.parent is not None:
        lines.append(f"  invoked by execution {section.parent.pk}")
    return lines
