"""The read model of an execution: the one place that says what an execution looks like.

The admin's execution page, the API's execution detail and ``manage.py statechart show`` all
display :func:`inspect`'s :class:`ExecutionView`, so they cannot disagree: the same active
states (the whole configuration, compound and parallel ancestors included, in document
order), the same datamodel, the same history rows, the same contributed sections (timers,
...; see ``statecharts.extensions``). It only reads.

It never raises on a damaged row: a position that cannot be decoded, a configuration that is
not a list of state ids, a chart whose stored source no longer compiles, a history entry of
the wrong shape or a contributed section that fails are each shown as an :class:`Unreadable`
marker with the reason (and listed in :attr:`ExecutionView.unreadable`), and the rest of the
execution is still shown.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from django.core.paginator import Paginator
from django.db import transaction
from django.db.models import QuerySet

from statecharts.conf import statecharts_settings
from statecharts.core.datamodel import plain
from statecharts.core.errors import StatechartError
from statecharts.core.model import Chart as CompiledChart
from statecharts.core.model import Expr, Transition
from statecharts.core.position import decode
from statecharts.extensions import sections as registered_sections
from statecharts.models import Chart, Execution, HistoryEntry
from statecharts.policies import addresses, attribution, codecs
from statecharts.policies.addresses import HIDDEN_ADDRESS as HIDDEN_ADDRESS  # (re-exported)
from statecharts.policies.addresses import shown_input

logger = logging.getLogger(__name__)

HISTORY_PAGE_SIZE = 50


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A part of a row that could not be read for display, and why. Falsy-free on purpose:
    test for it with ``isinstance`` (Python) or ``value.unreadable`` (templates)."""

    reason: str
    unreadable: ClassVar[bool] = True

    def __str__(self) -> str:
        return f"unreadable: {self.reason}"


# ---- values as JSON ---------------------------------------------------------------------------


# How deep a stored value is shown; deeper parts are replaced by TOO_DEEP. Input is bounded
# on the way in (statecharts.policies.validation), but a row written before that must still display.
DISPLAY_DEPTH = 100
TOO_DEEP = "(nested too deeply to show)"


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float written as JavaScript spells it (``"NaN"``,
    ``"Infinity"``, ``"-Infinity"``): strict JSON has no such numbers, and the plain view of a
    datamodel (``statecharts.core.datamodel.plain``) makes them from ``number`` tags.

    Never recursive and never deeper than :data:`DISPLAY_DEPTH` levels (what lies deeper is
    shown as :data:`TOO_DEEP`), so any stored value can be shown and rendered as JSON."""
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any, int]] = [(value, root, 0, 0)]
    while stack:
        item, parent, slot, depth = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            parent[slot] = (
                "NaN" if math.isnan(item) else ("Infinity" if item > 0 else "-Infinity")
            )
        elif isinstance(item, list | tuple | dict) and depth >= DISPLAY_DEPTH:
            parent[slot] = TOO_DEEP
        elif isinstance(item, list | tuple):
            items: list[Any] = [None] * len(item)
            parent[slot] = items
            stack.extend((child, items, i, depth + 1) for i, child in enumerate(item))
        elif isinstance(item, dict):
            copy: dict[Any, Any] = dict.fromkeys(item)
            parent[slot] = copy
            stack.extend((child, copy, key, depth + 1) for key, child in item.items())
        else:
            parent[slot] = item
    return root[0]


def json_text(value: Any, *, indent: int | None = None) -> str:
    """``value`` as strict JSON text, keys sorted, non-ASCII kept: how every page shows data."""
    return json.dumps(
        json_safe(value),
        indent=indent,
        sort_keys=True,
        ensure_ascii=False,
        default=repr,  # never raises: a value JSON cannot hold is shown as Python sees it
    )


# ---- the configuration ------------------------------------------------------------------------


def compiled_chart_of(chart: Chart) -> CompiledChart | Unreadable:
    """The compiled chart, or why its stored source cannot be compiled any more."""
    try:
        return chart.compiled()
    except (StatechartError, ValueError) as exc:
        return Unreadable(f"chart {chart.pk} cannot be compiled from its source: {exc}")


def atomic_states_of(execution: Execution) -> tuple[str, ...] | Unreadable:
    """The stored configuration (the active atomic states), checked for its shape."""
    stored = execution.configuration
    if not isinstance(stored, list) or not all(isinstance(item, str) for item in stored):
        return Unreadable(f"the stored configuration is not a list of state ids: {stored!r:.200}")
    return tuple(stored)


def active_states(compiled: CompiledChart | Unreadable, atomic: Iterable[str]) -> tuple[str, ...]:
    """Every active state id, compound and parallel ancestors included, in document order.

    A legal configuration is exactly the atomic states and their ancestors. Ids the chart
    does not have (a configuration recorded against another source) are left out, as the
    diagram leaves them out; without a compiled chart the atomic states are all there is.
    """
    atomic = list(atomic)
    if isinstance(compiled, Unreadable):
        return tuple(atomic)
    indexes: set[int] = set()
    for state_id in atomic:
        index = compiled.ids.get(state_id)
        if index is None:
            continue
        indexes.add(index)
        for ancestor in compiled.states[index].ancestors:  # up to one already counted
            if ancestor == 0 or ancestor in indexes:
                break
            indexes.add(ancestor)
    return tuple(compiled.states[i].id for i in sorted(indexes))


def datamodel_of(execution: Execution) -> dict[str, Any] | Unreadable:
    """The datamodel of the last committed step as plain values (a lossy, read-only view: see
    docs/embedding.md, "Reading from Python"), or why the position cannot be read (or that
    it was erased: ``statecharts.operations.erasure.erase``)."""
    if execution.erased is not None:
        return Unreadable(f"personal data erased at {execution.erased.isoformat()}")
    try:
        state = decode(bytes(execution.position or b"")).state
        # A chart may have copied its I/O processor addresses (capabilities) into its data.
        values = addresses.hide(plain(state.datamodel), addresses.secrets_of(state.io_processors))
    except StatechartError as exc:  # PositionError and its kinds: refused, with the reason
        return Unreadable(f"the position cannot be read: {exc}")
    except (KeyError, ValueError, TypeError, AttributeError, RecursionError) as exc:  # malformed
        return Unreadable(f"the datamodel cannot be read: {type(exc).__name__}: {exc}")
    if not isinstance(values, dict):
        return Unreadable(f"the datamodel is not an object: {type(values).__name__}")
    return values


def where(status: str, atomic: Sequence[str] | Unreadable) -> str:
    """``status: active; in state invited`` (the status is never mixed up with a state)."""
    if isinstance(atomic, Unreadable) or not atomic:
        return f"status: {status}"
    noun = "state" if len(atomic) == 1 else "states"
    return f"status: {status}; in {noun} {', '.join(atomic)}"


def title_of(execution: Execution) -> str:
    """What a person calls an execution: its chart, then its business key or its id."""
    chart = execution.chart
    label = chart.name or f"chart {chart.pk}"
    if chart.version:
        label += f" v{chart.version}"
    if execution.business_key:
        return f"{label} · {execution.business_key}"
    return f"{label} · execution {execution.pk}"


# ---- history ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EffectSummary:
    text: str  # "send_delayed nudge.due", "log nudge", "invoke (unhandled)"
    detail: str  # the whole recorded effect, as JSON


@dataclass(frozen=True, slots=True)
class Cause:
    """What caused an input, as the timeline shows it: a fired timer links to the step that
    scheduled it (``seq``)."""

    text: str  # "timer 12 (ordinal 3), scheduled in step 2"
    seq: int | None = None  # the step to link to, in this execution's history
    page: int | None = None  # the history page that step is on (newest first), when known


def cause_of(cause: Any) -> Cause | None:
    """The recorded cause (``HistoryEntry.cause``) as the timeline shows it; never fails."""
    if not isinstance(cause, dict) or not cause:
        return None
    if "timer" in cause:
        seq = cause.get("scheduled_in")
        text = f"timer {cause['timer']} (ordinal {cause.get('ordinal')})"
        if isinstance(seq, int):
            return Cause(f"{text}, scheduled in step {seq}", seq)
        return Cause(text)
    if "message" in cause:
        text = f"message {cause['message']} from execution {cause.get('sender')}"
        if cause.get("invocation") is not None:
            text += f" (invocation {cause['invocation']})"
        return Cause(text)
    if "undeliverable" in cause:
        return Cause(f"message {cause['undeliverable']} could not be delivered")
    return Cause(", ".join(f"{k} {v}" for k, v in sorted(cause.items()))[:200])


@dataclass(frozen=True, slots=True)
class HistoryRow:
    """One history entry as every page shows it."""

    seq: int
    created: datetime
    input: str  # "start", "event pay", "cancel"
    data: str  # the event's (or the start's) data as JSON text; "" when there is none
    disposition: str
    status_after: str
    configuration_after: tuple[str, ...]
    effects: tuple[EffectSummary, ...]  # datamodel changes and trace effects left out
    entry: HistoryEntry
    # who fed it: "alice via admin, request r-1" (statecharts.policies.attribution)
    caller: str = ""
    cause: Cause | None = None  # what caused it (a timer, a message)
    # The core's trace of the step, one line each (kept only while the execution traces).
    trace: tuple[str, ...] = ()

    @property
    def after(self) -> str:
        return where(self.status_after, self.configuration_after)


def history_entries(execution: Execution) -> QuerySet[HistoryEntry]:
    """The execution's history, oldest first (what the API pages and ``show`` prints)."""
    return HistoryEntry.objects.filter(execution=execution).order_by("seq")


def readable(entry: HistoryEntry) -> tuple[Any, Any, str]:
    """The entry's input and effect summaries decoded with its payload codec
    (``statecharts.policies.codecs``), and why not ("" when they were): an entry whose codec or key
    is
    not deployed here is shown as stored, with the reason."""
    codec = getattr(entry, "codec", codecs.JSON) or codecs.JSON
    try:
        return (
            codecs.decode_input(entry.input, codec),
            codecs.decode_effects(entry.effects, codec),
            "",
        )
    except (codecs.CodecUnavailable, codecs.CorruptPayload) as exc:
        return entry.input, entry.effects, f"(encoded with {codec!r}: {exc})"


def history_row(entry: HistoryEntry) -> HistoryRow:
    decoded, decoded_effects, unreadable = readable(entry)
    raw = decoded if isinstance(decoded, dict) else {}
    event = raw.get("event") if isinstance(raw.get("event"), dict) else {}
    kind = str(raw.get("kind", "")) if raw else "(unreadable input)"
    label = f"{kind} {event['name']}" if event.get("name") else kind
    # who sent it, when a door checked (statecharts.policies.authorization)
    sender = raw.get("sender")
    if isinstance(sender, dict) and sender.get("username"):
        label += f" by {sender['username']}"
    if unreadable:
        data = unreadable
    elif event.get("data") is not None:
        data = json_text(event["data"])
    elif raw.get("data") is not None:
        data = json_text(raw["data"])
    else:
        data = ""
    effects = decoded_effects if isinstance(decoded_effects, list) else []
    after = entry.configuration_after
    return HistoryRow(
        seq=entry.seq,
        created=entry.created,
        input=label,
        data=data,
        disposition=entry.disposition,
        status_after=entry.status_after,
        configuration_after=tuple(str(s) for s in after) if isinstance(after, list) else (),
        effects=tuple(_effect_summary(e) for e in effects if _shown(e)),
        entry=entry,
        caller=attribution.describe(entry.caller_context),
        cause=cause_of(entry.cause),
        trace=tuple(trace_line(e) for e in effects if _traced(e)),
    )


_NOT_SHOWN = frozenset({"datamodel_change", "datamodel_init"})


def error_text(effect: dict[str, Any]) -> str:
    """An ``error`` effect (the platform raised error.execution or error.communication in
    the chart) as one line: the event, the failing element and where it is, the reason."""
    name = str(effect.get("name") or "error")
    tagname, line, column = effect.get("tagname"), effect.get("line"), effect.get("column")
    if tagname:
        where = f"<{tagname}> at line {line}:{column}" if line else f"<{tagname}>"
        return f"{name} in {where}: {effect.get('reason') or effect.get('message') or ''}"
    return f"{name}: {effect.get('message') or ''}"


def _shown(effect: Any) -> bool:
    if not isinstance(effect, dict):
        return True
    kind = str(effect.get("kind", ""))
    return kind not in _NOT_SHOWN and not kind.startswith("trace.")


def _traced(effect: Any) -> bool:
    return isinstance(effect, dict) and str(effect.get("kind", "")).startswith("trace.")


def trace_line(effect: dict[str, Any]) -> str:
    """One trace effect as a line of the timeline's trace (the whole effect is in the
    history entry's JSON)."""
    kind = str(effect.get("kind", "")).removeprefix("trace.")
    round_ = f"[{effect.get('macrostep')}.{effect.get('microstep')}.{effect.get('round')}] "

    def ids(key: str) -> str:
        value = effect.get(key)
        return ", ".join(map(str, value)) if isinstance(value, list) else "-"

    event = effect.get("event") if isinstance(effect.get("event"), dict) else {}
    if kind == "event_dequeued":
        said = f"dequeued {event.get('name')} ({event.get('type')})"
    elif kind == "internal_event_raised":
        said = f"raised {event.get('name')}"
    elif kind == "transitions_selected":
        transitions = (
            effect.get("transitions") if isinstance(effect.get("transitions"), list) else []
        )
        said = "selected " + "; ".join(
            f"{t.get('source')} --{t.get('event') or '(eventless)'}--> "
            f"{', '.join(map(str, t.get('targets') or [])) or '(targetless)'}"
            for t in transitions
            if isinstance(t, dict)
        )
    elif kind == "guard_evaluated":
        transition = effect.get("transition") if isinstance(effect.get("transition"), dict) else {}
        said = (
            f"guard of {transition.get('source')}'s transition: {effect.get('cond')} -> "
            f"{'true' if effect.get('result') else 'false'}"
        )
    elif kind == "exit_set":
        said = f"exited {ids('states')}"
    elif kind == "entry_set":
        said = f"entered {ids('states')}"
    elif kind == "history_recorded":
        said = f"history {effect.get('history')} recorded {ids('states')}"
    elif kind == "microstep_completed":
        said = f"microstep done: {ids('configuration')}"
    elif kind == "macrostep_stable":
        said = f"stable: {ids('configuration')}"
    else:
        said = kind
    return round_ + said


def _effect_summary(effect: Any) -> EffectSummary:
    if not isinstance(effect, dict):
        return EffectSummary("(unreadable effect)", json_text(effect))
    if effect.get("kind") == "error":
        return EffectSummary(error_text(effect), json_text(effect))
    parts = [str(effect.get("kind", "?"))]
    event = effect.get("event")
    if isinstance(event, dict) and event.get("name"):
        parts.append(str(event["name"]))
    if effect.get("label"):
        parts.append(str(effect["label"]))
    if effect.get("unhandled"):
        parts.append("(unhandled)")
    return EffectSummary(" ".join(parts), json_text(effect))


@dataclass(frozen=True, slots=True)
class HistoryPage:
    rows: tuple[HistoryRow, ...]
    number: int
    pages: int
    count: int
    newest_first: bool

    @property
    def previous(self) -> int | None:
        return self.number - 1 if self.number > 1 else None

    @property
    def next(self) -> int | None:
        return self.number + 1 if self.number < self.pages else None


def history_page(
    execution: Execution,
    number: Any = 1,
    *,
    size: int = HISTORY_PAGE_SIZE,
    newest_first: bool = True,
) -> HistoryPage:
    """One page of history rows; a page number out of range (or not a number) gives the
    nearest page, never an error."""
    entries = history_entries(execution)
    if newest_first:
        entries = entries.order_by("-seq")
    page = Paginator(entries, size).get_page(number)
    rows = [history_row(entry) for entry in page.object_list]
    if newest_first:
        rows = [_with_cause_page(row, execution, size) for row in rows]
    return HistoryPage(
        rows=tuple(rows),
        number=page.number,
        pages=page.paginator.num_pages,
        count=page.paginator.count,
        newest_first=newest_first,
    )


def _with_cause_page(row: HistoryRow, execution: Execution, size: int) -> HistoryRow:
    """The page (newest first) the step that caused ``row`` is on, for the timeline's link."""
    cause = row.cause
    if cause is None or cause.seq is None:
        return row
    newer = HistoryEntry.objects.filter(execution=execution, seq__gt=cause.seq).count()
    return dataclasses.replace(row, cause=dataclasses.replace(cause, page=newer // size + 1))


# ---- the whole view ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExecutionView:
    """One execution as every door displays it. Build it with :func:`inspect`."""

    execution: Execution
    title: str
    status: str
    atomic_states: tuple[str, ...] | Unreadable
    active_states: tuple[str, ...]
    compiled: CompiledChart | Unreadable
    datamodel: dict[str, Any] | Unreadable
    donedata: Any
    outcome: str
    failure_reason: str
    now: datetime
    sections: Mapping[str, Any] = field(default_factory=dict)  # name -> value | Unreadable

    @property
    def chart(self) -> Chart:
        return self.execution.chart

    @property
    def invoking_states(self) -> tuple[str, ...]:
        """States with running invocations, as the sections that know say (for the diagram)."""
        marked: set[str] = set()
        for section in registered_sections:
            value = self.sections.get(section.name)
            if section.name in self.sections and not isinstance(value, Unreadable):
                marked.update(section.invoking(value))
        return tuple(sorted(marked))

    @property
    def where(self) -> str:
        return where(self.status, self.atomic_states)

    @property
    def unreadable(self) -> dict[str, str]:
        """What could not be read, by part: ``{"datamodel": "the position cannot be ..."}``."""
        parts: dict[str, Any] = {
            "configuration": self.atomic_states,
            "chart": self.compiled,
            "datamodel": self.datamodel,
            **self.sections,
        }
        return {name: v.reason for name, v in parts.items() if isinstance(v, Unreadable)}

    def history_page(self, number: Any = 1, **options: Any) -> HistoryPage:
        return history_page(self.execution, number, **options)

    def history(self) -> Iterator[HistoryRow]:
        """Every history row, oldest first."""
        for entry in history_entries(self.execution).iterator(chunk_size=500):
            yield history_row(entry)

    def document(self, *, history: bool = True) -> dict[str, Any]:
        """The view as one JSON document (``statechart show --json``). Contributed sections
        appear under their names, each as its app's ``Section.document`` writes it."""
        execution = self.execution
        chart = execution.chart
        document: dict[str, Any] = {
            "id": execution.pk,
            "session_id": execution.session_id,
            "title": self.title,
            "status": self.status,
            "where": self.where,
            "chart": {
                "id": chart.pk,
                "name": chart.name,
                "version": chart.version,
                "sha256": chart.content_hash,
            },
            "business_key": execution.business_key,
            "metadata": json_safe(execution.metadata),
            "configuration": json_safe(execution.configuration),
            "active_states": list(self.active_states),
            "datamodel": None if isinstance(self.datamodel, Unreadable) else self.datamodel,
            "donedata": json_safe(self.donedata),
            "outcome": self.outcome,
            "failure_reason": self.failure_reason,
            "steps": execution.steps,
            "created": _when(execution.created),
            "updated": _when(execution.updated),
            "ended": _when(execution.ended),
            "erased": _when(execution.erased),
            "unreadable": self.unreadable,
        }
        document["datamodel"] = json_safe(document["datamodel"])
        for section in registered_sections:
            value = self.sections.get(section.name)
            if isinstance(value, Unreadable) or section.name not in self.sections:
                document[section.name] = None
            else:
                document[section.name] = _contributed(section.document, value, section.name)
        if history:
            document["history"] = [_history_document(row) for row in self.history()]
        return document

    def section_lines(self) -> list[str]:
        """What each contributed section says in ``statechart show``."""
        lines: list[str] = []
        for section in registered_sections:
            value = self.sections.get(section.name)
            if isinstance(value, Unreadable):
                lines.append(f"{section.name}: {value}")
            elif section.name in self.sections:
                lines.extend(_contributed(section.lines, value, section.name) or [])
        return lines


def inspect(execution: Execution, *, now: datetime | None = None) -> ExecutionView:
    """Read ``execution`` for display. Never writes, never raises on a damaged row."""
    now = now if now is not None else statecharts_settings.now()
    compiled = compiled_chart_of(execution.chart)
    atomic = atomic_states_of(execution)
    return ExecutionView(
        execution=execution,
        title=title_of(execution),
        status=str(execution.status),
        atomic_states=atomic,
        active_states=() if isinstance(atomic, Unreadable) else active_states(compiled, atomic),
        compiled=compiled,
        datamodel=datamodel_of(execution),
        donedata=execution.donedata,
        outcome=execution.outcome,
        failure_reason=execution.failure_reason,
        now=now,
        sections={
            s.name: _read_section(s.name, s.read, execution, now) for s in registered_sections
        },
    )


def _read_section(name: str, read: Any, execution: Execution, now: datetime) -> Any:
    # A section belongs to another app: whatever goes wrong in it is shown on the page
    # instead of taking the page down. The savepoint keeps a failed query from breaking the
    # surrounding transaction (PostgreSQL refuses every statement after an error in one).
    try:
        with transaction.atomic():
            return read(execution, now)
    except Exception as exc:
        logger.exception("the %r section of execution %s cannot be read", name, execution.pk)
        return Unreadable(f"{type(exc).__name__}: {exc}")


def _contributed(render: Any, value: Any, name: str) -> Any:
    try:
        return render(value)
    except Exception as exc:  # another app's renderer: shown, not raised (see _read_section)
        logger.exception("the %r section cannot be rendered", name)
        return str(Unreadable(f"{type(exc).__name__}: {exc}"))


def _when(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _history_document(row: HistoryRow) -> dict[str, Any]:
    entry = row.entry
    decoded, effects, unreadable = readable(entry)
    document = {
        "seq": entry.seq,
        "input": json_safe(shown_input(decoded)),
        "disposition": entry.disposition,
        "status_after": entry.status_after,
        "configuration_after": json_safe(entry.configuration_after),
        "effects": json_safe(effects),
        "created": _when(entry.created),
    }
    if unreadable:  # shown as stored, with the codec it needs
        document["codec"] = entry.codec
        document["unreadable"] = unreadable
    return document


# ---- hints for people sending events ----------------------------------------------------------

_EVENT_DATA_KEY = re.compile(
    r"_event\s*\.\s*data\s*(?:\.\s*([A-Za-z_$][\w$]*)|\[\s*['\"]([^'\"\]]+)['\"]\s*\])"
)
_PLATFORM_PREFIXES = ("done.", "error.")
_QUOTED = re.compile(r"'([^'\\]*)'")
# The _event.data keys a hint lists at most: a placeholder, and each of a transition's
# descriptors would repeat them all (a transition with thousands of descriptors and of keys
# made the hints, and the admin's pages, quadratic in the chart).
MAX_DATA_KEYS = 20


@dataclass(frozen=True, slots=True)
class EventHint:
    """An event a transition of the chart accepts, and the ``_event.data`` keys it reads (the
    first :data:`MAX_DATA_KEYS` of them)."""

    name: str
    data_keys: tuple[str, ...]
    states: tuple[str, ...]  # the states whose transitions accept it, document order

    @property
    def data_example(self) -> str:
        """``{"score": …}``: a placeholder, not a value."""
        if not self.data_keys:
            return ""
        return "{" + ", ".join(f'"{key}": …' for key in self.data_keys) + "}"


@dataclass(frozen=True, slots=True)
class ChartHints:
    data_ids: tuple[str, ...]  # the top-level <data> ids: what start data may set
    start_example: str  # {"amount": 10000, "score": 0}: their initial expressions, as JSON
    events: tuple[EventHint, ...]  # in document order of their first transition

    def accepted_in(self, active: Iterable[str]) -> tuple[EventHint, ...]:
        """The events a transition of one of the ``active`` states accepts."""
        states = set(active)
        return tuple(hint for hint in self.events if states.intersection(hint.states))


def chart_hints(compiled: CompiledChart) -> ChartHints:
    """What a person starting or sending events to this chart may want to type: derived from
    the chart (its ``<data>`` and its transitions), never guessed."""
    datas = compiled.root.datas
    example = {data.id: _literal(data.expr) for data in datas}
    found: dict[str, tuple[dict[str, None], dict[str, None]]] = {}
    for transition in compiled.transitions:
        if transition.event_text is None:
            continue
        keys = _data_keys(transition)
        source = compiled.states[transition.source].id
        for descriptor in transition.event_text.split():
            name = descriptor.removesuffix(".*").removesuffix(".")
            if not name or name == "*" or name.startswith(_PLATFORM_PREFIXES):
                continue
            seen_keys, seen_states = found.setdefault(name, ({}, {}))
            for key in keys:  # (at most MAX_DATA_KEYS: each name would repeat them all)
                if len(seen_keys) >= MAX_DATA_KEYS:
                    break
                seen_keys[key] = None
            seen_states[source] = None
    events = tuple(
        EventHint(name, tuple(keys), tuple(states)) for name, (keys, states) in found.items()
    )
    return ChartHints(
        data_ids=tuple(data.id for data in datas),
        start_example=json.dumps(example, ensure_ascii=False) if datas else "",
        events=events,
    )


def _literal(expr: Expr | None) -> Any:
    """A ``<data expr>`` as a JSON value when it is a literal (``10000``, ``'3d'``, ``[]``)."""
    if expr is None:
        return None
    text = expr.source.strip()
    quoted = _QUOTED.fullmatch(text)
    if quoted:
        return quoted.group(1)
    try:
        return json.loads(text)
    except ValueError:
        return None


def _data_keys(transition: Transition) -> list[str]:
    keys: dict[str, None] = {}
    for expr in _expressions((transition.cond, transition.body.actions)):
        for match in _EVENT_DATA_KEY.finditer(expr.source):
            keys[match.group(1) or match.group(2)] = None
    return list(keys)


def _expressions(value: Any) -> Iterator[Expr]:
    """Every expression in a piece of executable content, depth first."""
    if isinstance(value, Expr):
        yield value
    elif isinstance(value, tuple | list):
        for item in value:
            yield from _expressions(item)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from _expressions(getattr(value, f.name))
