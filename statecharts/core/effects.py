"""Effects: what a step asks the host to do, as plain data, in the order the spec performs it.

Every effect is stamped with the macrostep, microstep and round that produced it. The
interpreter never performs an effect itself; drivers do, at the edge.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Kinds a driver must perform (or consciously ignore).
SEND = "send"  # immediate external send: {"target": Target, "event": {...}, "send_id"}
SEND_DELAYED = "send_delayed"  # + "delay_ms", "ordinal", "content_index", "owner", "id_from_author"
CANCEL = "cancel"  # {"send_id", "ordinal"}
INVOKE = "invoke"  # {"invokeid", "type", "src", "content", "data", "autoforward", "state"}
CANCEL_INVOKE = "cancel_invoke"  # {"invokeid"}
AUTOFORWARD = "autoforward"  # {"invokeid", "event"}
DONE = "done"  # {"donedata", "donedata_error": bool, "final": state id | None, "reason"}
BUDGET_EXHAUSTED = "budget_exhausted"  # {"rounds", "budget"}
LOG = "log"  # {"label", "value"}
DATAMODEL_CHANGE = "datamodel_change"  # {"datamodel": dict}
# Trace effects, only with tracing on.
TRACE_EVENT = "trace.event_dequeued"
TRACE_TRANSITIONS = "trace.transitions_selected"
TRACE_EXIT = "trace.exit_set"
TRACE_ENTRY = "trace.entry_set"
TRACE_STABLE = "trace.macrostep_stable"


@dataclass(frozen=True, slots=True)
class Effect:
    kind: str
    data: dict[str, Any]
    macrostep: int
    microstep: int
    round: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "macrostep": self.macrostep,
            "microstep": self.microstep,
            "round": self.round,
            **self.data,
        }
