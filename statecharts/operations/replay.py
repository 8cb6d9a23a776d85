"""Replay: re-drive an execution from its history and compare with what was stored.

Every applied history row holds the input and the sha256 of the position blob the step
produced. Replay feeds the same inputs to a fresh interpreter, handing back what the host told
the core in that step (the registered-types snapshot and the answers to "is session X
reachable?", both recorded with the step), and compares positions step by step. The first
difference is reported precisely; determinism of the core is what makes it pass.

An execution migrated to another chart version (``statecharts.operations.chart_migration``) is
replayed
from its last ``migrated`` entry: that entry holds the position the migration gave it (checked
against the entry's sha256), so replay never runs the migration's transform again; the steps
before it belong to the earlier version.

Rows written before the snapshot was recorded hold ``{}``: they were stepped with SCXML
children and delayed sends allowed and no routes (``LEGACY_TYPES``), which is handed back.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from statecharts.conf import statecharts_settings
from statecharts.core.errors import StatechartError
from statecharts.core.host import (
    ROUTE_OK,
    SCXML_INVOKE_TYPES,
    Host,
    RegisteredTypes,
    RouteAnswer,
)
from statecharts.core.position import ChartIdentity, decode, encode
from statecharts.core.state import State
from statecharts.drivers.durable import Input, advance, status_of
from statecharts.models import Execution
from statecharts.models.history import Disposition
from statecharts.policies import codecs
from statecharts.runtime import compiled_chart, fresh_interpreter
from statecharts.stepper.applying import chart_facts

# What every step had before the snapshot was recorded (see the module docstring).
LEGACY_TYPES = RegisteredTypes.of(invoke=SCXML_INVOKE_TYPES, timers=True)


def recorded_encoding(state: State, identity: ChartIdentity, sha256: str) -> bytes:
    """The blob of ``state`` in the position format whose hash was recorded: the current one,
    or, for a step recorded by a release before position format 3, version 2 (the state is
    the same; only its encoding changed). The current format when neither matches."""
    blob = encode(state, identity)
    if hashlib.sha256(blob).hexdigest() != sha256:
        older = encode(state, identity, version=2)
        if hashlib.sha256(older).hexdigest() == sha256:
            return older
    return blob


def recorded_host(registered_types: dict[str, Any], reachability: dict[str, bool]) -> Host:
    """The host a step had, as its history row recorded it."""
    types = RegisteredTypes.from_dict(registered_types) if registered_types else LEGACY_TYPES
    answers = dict(reachability)
    # A route's answers, in the order the step asked them (the same sends ask again).
    routes = list((registered_types or {}).get("route_answers") or [])

    def check_route(route: str, send_type: str, target: str | None) -> RouteAnswer:
        for index, (r, t, address, text) in enumerate(routes):
            if (r, t, address) == (route, send_type, target):
                del routes[index]
                return RouteAnswer.from_text(text)
        return ROUTE_OK

    return Host(
        types, lambda session_id: answers.get(session_id, False), check_route=check_route
    )


@dataclass(frozen=True, slots=True)
class Mismatch:
    seq: int  # the history row whose recorded result differs from the replayed one
    input: dict[str, Any]
    differences: list[str]

    def __str__(self) -> str:
        event = (self.input.get("event") or {}).get("name")
        what = f"{self.input.get('kind')} {event}" if event else str(self.input.get("kind"))
        return f"step {self.seq} ({what}): " + "; ".join(self.differences)


class Verdict(StrEnum):
    MATCHES = "matches"  # every position matches the recorded one
    DIVERGED = "diverged"  # one does not (the mismatch says where)
    # not replayed: the inputs' data were erased (statecharts.operations.retention)
    ERASED = "erased"
    PRUNED = "pruned"  # not replayed: the history was pruned (retention)


@dataclass(frozen=True, slots=True)
class ReplayReport:
    execution_id: int
    steps_replayed: int
    mismatch: Mismatch | None = None
    notes: list[str] = field(default_factory=list)
    # For an execution replay cannot check (erased, history pruned): the marker entry's seq
    # and what it says.
    marker: tuple[int, str] | None = None
    verdict: Verdict = Verdict.MATCHES

    @property
    def ok(self) -> bool:
        """Replayed, and every position matches."""
        return self.verdict is Verdict.MATCHES

    @property
    def diverged(self) -> bool:
        return self.verdict is Verdict.DIVERGED

    def __str__(self) -> str:
        if self.verdict is Verdict.MATCHES:
            return f"replayed {self.steps_replayed} step(s): every position matches"
        if self.verdict is Verdict.DIVERGED:
            return f"replay diverged at {self.mismatch}"
        seq, reason = self.marker or (0, "")
        what = "erased" if self.verdict is Verdict.ERASED else "history pruned"
        return f"not replayed: {what} (step {seq}: {reason})"


MARKER_VERDICTS = {Disposition.ERASED: Verdict.ERASED, Disposition.PRUNED: Verdict.PRUNED}


def replay(execution: Execution | int) -> ReplayReport:
    """Re-drive the history and compare (see the module docstring). An execution whose
    personal data were erased, or whose history was pruned, is not replayed: the report says
    so (``Verdict.ERASED`` / ``PRUNED``, with the entry that recorded it), never a divergence.
    """
    if not isinstance(execution, Execution):
        execution = Execution.objects.select_related("chart").get(pk=execution)
    marker = (
        execution.history.filter(disposition__in=list(MARKER_VERDICTS))
        .order_by("-seq")
        .values_list("seq", "disposition", "reason")
        .first()
    )
    if marker is not None:
        seq, disposition, reason = marker
        verdict = MARKER_VERDICTS[Disposition(disposition)]
        return ReplayReport(execution.pk, 0, marker=(seq, reason), verdict=verdict)
    compiled = compiled_chart(execution.chart)
    stored = decode(bytes(execution.position), chart=compiled)
    identity: ChartIdentity = stored.chart
    interpreter = fresh_interpreter(compiled)
    state: State | None = None
    replayed = 0
    blob = b""
    entries = execution.history.order_by("seq")
    migrated = (  # (or imported: the same, a position recorded whole)
        execution.history.filter(disposition__in=[Disposition.MIGRATED, Disposition.IMPORTED])
        .order_by("-seq")
        .first()
    )
    if migrated is not None:
        blob = str(migrated.input.get("position") or "").encode()
        if hashlib.sha256(blob).hexdigest() != migrated.position_sha256:
            return ReplayReport(
                execution.pk,
                0,
                Mismatch(migrated.seq, {"kind": migrated.input.get("kind")}, [
                    "the position recorded with this entry is not the one it wrote"]),
                verdict=Verdict.DIVERGED,
            )  # fmt: skip
        state = decode(blob, chart=compiled).state
        entries = entries.filter(seq__gt=migrated.seq)
    facts = chart_facts(execution)  # (_x.chart: as the steps since the migration had it)
    for entry in entries:
        if entry.disposition != Disposition.APPLIED:
            continue
        host = replace(
            recorded_host(entry.registered_types, entry.reachability), chart=facts
        )
        step_input = Input.from_dict(codecs.decode_input(entry.input, entry.codec))
        outcome = advance(
            interpreter,
            state,
            step_input,
            send_budget=statecharts_settings.SEND_BUDGET,
            host=host,
        )
        state = outcome.state
        blob = recorded_encoding(state, identity, entry.position_sha256)
        replayed += 1
        if hashlib.sha256(blob).hexdigest() != entry.position_sha256:
            states = compiled.states
            atomic = [states[i].id for i in state.configuration if states[i].is_atomic]
            differences = ["the position differs from the one recorded"]
            if atomic != entry.configuration_after:
                differences.append(
                    f"configuration recorded {entry.configuration_after}, replayed {atomic}"
                )
            if status_of(state) != entry.status_after:
                differences.append(
                    f"status recorded {entry.status_after}, replayed {status_of(state)}"
                )
            return ReplayReport(
                execution.pk,
                replayed,
                Mismatch(entry.seq, entry.input, differences),
                verdict=Verdict.DIVERGED,
            )
    if blob != bytes(execution.position):
        return ReplayReport(
            execution.pk,
            replayed,
            Mismatch(
                execution.steps,
                {"kind": "stored position"},
                ["the execution's stored position is not the one its history leads to"],
            ),
            verdict=Verdict.DIVERGED,
        )
    return ReplayReport(execution.pk, replayed)


@dataclass(slots=True)
class ReplaySummary:
    """What replaying many executions found: a count per verdict, the reports of those that
    diverged, and those that could not be replayed at all (e.g. a stored position that is not
    its chart's), with the reason."""

    checked: int = 0
    verdicts: Counter[Verdict] = field(default_factory=Counter)
    diverged: list[ReplayReport] = field(default_factory=list)
    unreplayable: list[tuple[int, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.diverged and not self.unreplayable

    def __str__(self) -> str:
        counts = ", ".join(f"{n:,} {verdict}" for verdict, n in sorted(self.verdicts.items()))
        text = f"replayed {self.checked:,} execution(s): {counts or 'none'}"
        if self.unreplayable:
            text += f", {len(self.unreplayable):,} could not be replayed"
        return text


def replay_many(
    executions: Iterable[Execution],
    *,
    progress: Callable[[int, Execution, ReplayReport | None], None] | None = None,
) -> ReplaySummary:
    """:func:`replay` each execution in turn (read-only: nothing is written or locked), and
    sum up. An execution that cannot be replayed is counted and named, and the others are
    still replayed. ``progress(done, execution, report)`` is called after each (``report``
    is ``None`` for one that could not be replayed)."""
    summary = ReplaySummary()
    for execution in executions:
        report: ReplayReport | None = None
        try:
            report = replay(execution)
        except StatechartError as exc:  # e.g. the stored position is not its chart's
            summary.unreplayable.append((execution.pk, str(exc)))
        else:
            summary.verdicts[report.verdict] += 1
            if report.diverged:
                summary.diverged.append(report)
        summary.checked += 1
        if progress is not None:
            progress(summary.checked, execution, report)
    return summary
