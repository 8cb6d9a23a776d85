"""Effects: what a step asks the host to do, as plain data, in the order the spec performs it.

Every effect is stamped with the macrostep, microstep and round that produced it. The
interpreter never performs an effect itself; the planner (``statecharts.core.plan``) turns
each one into a typed instruction, and drivers perform instructions, at the edge.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from statecharts.core.targets import Target


class EffectKind(StrEnum):
    """The effect vocabulary. Members are ``str``: ``EffectKind.SEND == "send"``, and an
    effect's ``to_dict()`` (stored in history rows) holds the plain value."""

    SEND = "send"  # immediate send: {"target": Target, "event": {...}, "send_id", "send_ordinal"}
    # + "delay_ms", "ordinal", "content_index", "owner", "id_from_author", "expires_ms" (only
    # with ds:expires: statecharts.core.expiry)
    SEND_DELAYED = "send_delayed"
    CANCEL = "cancel"  # {"send_id", "ordinal", "content_index", "owner"}
    # {"invokeid", "type", "src", "content", "data", "autoforward", "state", "base_path",
    #  "invoke_ordinal"}
    INVOKE = "invoke"
    CANCEL_INVOKE = "cancel_invoke"  # {"invokeid", "invoke_ordinal"}
    AUTOFORWARD = "autoforward"  # {"invokeid", "invoke_ordinal", "event"}
    # {"donedata", "donedata_error": bool, "final": state id | None, "reason", "error"?}
    DONE = "done"
    BUDGET_EXHAUSTED = "budget_exhausted"  # {"rounds", "budget"}
    LOG = "log"  # {"label", "value"}
    DATAMODEL_CHANGE = "datamodel_change"  # {"datamodel": dict}
    # The platform raised error.execution or error.communication in the chart: {"name",
    # "message", "sendid", and where: "tagname", "line", "column", "reason"} (recorded in the
    # history; nothing to perform).
    ERROR = "error"
    # Once per session, at the end of its start: the datamodel as the start left it, the
    # observers' baseline that later datamodel_change effects change ({"datamodel": dict}).
    DATAMODEL_INIT = "datamodel_init"
    # Trace effects, only with tracing on (docs/durable-executions.md, "Tracing").
    TRACE_EVENT = "trace.event_dequeued"  # {"event"}: taken off a queue
    TRACE_TRANSITIONS = "trace.transitions_selected"  # {"transitions": [...]}
    TRACE_EXIT = "trace.exit_set"  # {"states"}, in exit order
    TRACE_ENTRY = "trace.entry_set"  # {"states"}, in entry order
    TRACE_STABLE = "trace.macrostep_stable"  # {"configuration"}
    TRACE_RAISED = "trace.internal_event_raised"  # {"event"}: put on the internal queue
    TRACE_GUARD = "trace.guard_evaluated"  # {"transition": {"index", "source"}, "cond", "result"}
    TRACE_HISTORY = "trace.history_recorded"  # {"history", "states"}
    TRACE_MICROSTEP = "trace.microstep_completed"  # {"configuration"}

    @property
    def is_trace(self) -> bool:
        return self.value.startswith("trace.")


# The module-level names the code has always used.
SEND = EffectKind.SEND
SEND_DELAYED = EffectKind.SEND_DELAYED
CANCEL = EffectKind.CANCEL
INVOKE = EffectKind.INVOKE
CANCEL_INVOKE = EffectKind.CANCEL_INVOKE
AUTOFORWARD = EffectKind.AUTOFORWARD
DONE = EffectKind.DONE
BUDGET_EXHAUSTED = EffectKind.BUDGET_EXHAUSTED
LOG = EffectKind.LOG
DATAMODEL_CHANGE = EffectKind.DATAMODEL_CHANGE
ERROR = EffectKind.ERROR
TRACE_EVENT = EffectKind.TRACE_EVENT
TRACE_TRANSITIONS = EffectKind.TRACE_TRANSITIONS
TRACE_EXIT = EffectKind.TRACE_EXIT
TRACE_ENTRY = EffectKind.TRACE_ENTRY
TRACE_STABLE = EffectKind.TRACE_STABLE
DATAMODEL_INIT = EffectKind.DATAMODEL_INIT
TRACE_RAISED = EffectKind.TRACE_RAISED
TRACE_GUARD = EffectKind.TRACE_GUARD
TRACE_HISTORY = EffectKind.TRACE_HISTORY
TRACE_MICROSTEP = EffectKind.TRACE_MICROSTEP


@dataclass(frozen=True, slots=True)
class Effect:
    kind: EffectKind
    data: dict[str, Any]
    macrostep: int
    microstep: int
    round: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-compatible: the stamps and ``data`` flattened (a target as its dict)."""
        raw: dict[str, Any] = {
            "kind": str(self.kind),
            "macrostep": self.macrostep,
            "microstep": self.microstep,
            "round": self.round,
            **self.data,
        }
        target = raw.get("target")
        if isinstance(target, Target):
            raw["target"] = target.to_dict()
        return raw
