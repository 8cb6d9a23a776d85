"""Migrating running executions to another version of their chart: plans, dry runs, applying.

A :class:`MigrationPlan` names the target chart (a version of the executions' chart name),
the renames (old state id -> new state id; every other state keeps its id) and optionally a
datamodel transform: a NAME registered in ``STATECHARTS["MIGRATION_TRANSFORMS"]`` (never a
dotted path taken from a request). ``dry_run`` reports, per execution, whether it maps and
why not; ``migrate`` applies it.

Guarantees of ``migrate_one`` (and so of ``migrate``, which calls it per execution):

- one execution per transaction, under its lock (``stepper.lock``; no other lock is taken);
- nothing of the chart runs (no ``<onentry>``/``<onexit>``, no ``<data>`` expression); only
  the transform, if named. This is decided, not pending (docs/versions-and-migration.md,
  "No chart code runs"): each report says what did not run (``onentry_not_run``: newly
  active states with an ``<onentry>``; ``data_not_set``: variables the target declares that
  the migrated datamodel does not hold), in the dry run and in the ``migrated`` history entry;
- the execution's history gets one ``migrated`` entry whose input holds the resulting
  position (so replay starts from it and never needs the transform again), the charts it
  moved between, the renames and the transform's name;
- the counters (send, invoke, timer ordinal, invocation) are carried over: timer rows are
  keyed on the execution and a send ordinal unique forever, so a counter starting again
  would make every later timer a silently ignored duplicate;
- pending timers are untouched: they hold their event and target, not the chart, and fire
  into the new version (the timers app needs no hook);
- idempotent: an execution already on the target (its chart and its position's identity)
  is reported ``up_to_date`` and left alone, so a re-run migrates nothing twice;
- a ``halted`` or ``needs_migration`` execution that maps becomes ``active`` again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils.module_loading import import_string

from statecharts import stepper
from statecharts.conf import statecharts_settings
from statecharts.core.datamodel import check_tagged
from statecharts.core.model import Chart as CompiledChart
from statecharts.core.position import ChartIdentity, PositionError, decode, encode
from statecharts.core.state import State
from statecharts.exceptions import InvalidInput
from statecharts.models import Chart, Execution, HistoryEntry
from statecharts.models.charts import ChartOrigin
from statecharts.models.history import Disposition
from statecharts.operations.chart_migration.mapping import Mapped, Unmappable, map_state
from statecharts.runtime import compiled_chart
from statecharts.statuses import ExecutionStatus
from statecharts.stepper import sql

# What may be migrated: a live execution, or one stopped for a reason a new version can cure.
MIGRATABLE_STATUSES = frozenset(
    {ExecutionStatus.ACTIVE, ExecutionStatus.HALTED, ExecutionStatus.NEEDS_MIGRATION}
)
MIGRATION_INPUT = "migration"  # the history input's kind


class PlanError(ValueError):
    """The plan itself is wrong (no such target, a rename onto a state the target does not
    have, an unregistered transform): nothing was looked at or changed."""


class Verdict(StrEnum):
    MIGRATES = "migrates"  # dry run: it maps, and would be migrated
    MIGRATED = "migrated"
    UP_TO_DATE = "up_to_date"  # already on the target: left alone
    REFUSED = "refused"  # it does not map (the reason says why): left alone


@dataclass(frozen=True, slots=True)
class ExecutionReport:
    execution_id: int
    session_id: str
    verdict: Verdict
    reason: str = ""
    configuration: list[str] = field(default_factory=list)  # after the migration
    entered: list[str] = field(default_factory=list)  # states entered by default entry
    dropped_history: list[str] = field(default_factory=list)
    # Newly active states whose <onentry> did not run (a migration runs no chart code).
    onentry_not_run: list[str] = field(default_factory=list)
    # <data> ids the target declares (for its bound states) that the datamodel lacks.
    data_not_set: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "execution": self.execution_id,
            "session_id": self.session_id,
            "verdict": self.verdict.value,
            "reason": self.reason,
            "configuration": self.configuration,
            "entered": self.entered,
            "dropped_history": self.dropped_history,
            "onentry_not_run": self.onentry_not_run,
            "data_not_set": self.data_not_set,
        }


@dataclass(frozen=True, slots=True)
class TransformContext:
    """What a datamodel transform is told besides the datamodel."""

    execution_id: int
    session_id: str
    source: dict[str, Any]  # the identity of the chart it leaves (sha256, name, version)
    target: dict[str, Any]  # the identity of the chart it moves to
    configuration: list[str]  # its active atomic states in the target


Transform = Callable[[dict[str, Any], TransformContext], dict[str, Any]]


def registered_transforms() -> dict[str, Any]:
    configured = statecharts_settings.MIGRATION_TRANSFORMS
    return dict(configured) if isinstance(configured, Mapping) else {}


def transform_named(name: str) -> Transform:
    """The transform registered as ``name`` (``PlanError`` if there is none)."""
    known = registered_transforms()
    if name not in known:
        names = ", ".join(sorted(known)) or "none is registered"
        raise PlanError(
            f"no datamodel transform is registered as {name!r} in "
            f"STATECHARTS['MIGRATION_TRANSFORMS'] ({names})"
        )
    found = known[name]
    try:
        loaded = import_string(found) if isinstance(found, str) else found
    except ImportError as exc:
        raise PlanError(f"the transform {name!r} cannot be imported: {exc}") from None
    if not callable(loaded):
        raise PlanError(f"the transform {name!r} is not callable")
    return loaded  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class MigrationPlan:
    target: Chart
    renames: Mapping[str, str] = field(default_factory=dict)
    transform: str | None = None

    @classmethod
    def make(
        cls,
        target: Chart,
        renames: Mapping[str, str] | None = None,
        transform: str | None = None,
    ) -> MigrationPlan:
        """A checked plan: ``PlanError`` for a target that is not a loaded chart with a name,
        that cannot be compiled, a rename onto a state it does not have, or a transform
        that is not registered."""
        if target.origin != ChartOrigin.LOADED or not target.name:
            raise PlanError(f"chart {target.pk} has no name: it has no versions to migrate to")
        try:
            compiled = compiled_chart(target)
        except PositionError as exc:
            raise PlanError(f"the target chart {target} cannot be used: {exc}") from None
        renames = dict(renames or {})
        for old_id, new_id in renames.items():
            if not isinstance(old_id, str) or not isinstance(new_id, str) or not old_id:
                raise PlanError(f"a rename maps a state id to a state id, not {old_id!r}")
        try:  # (recorded with the migration's history entry: text a row holds; the gate's)
            stepper.admit(stepper.MigrationRequest(renames=renames))
        except InvalidInput as exc:
            raise PlanError(str(exc.problems[0])) from None
        for old_id, new_id in renames.items():
            if new_id not in compiled.ids:
                raise PlanError(
                    f"{old_id!r} is renamed to {new_id!r}, which {target} does not have"
                )
        if transform:
            transform_named(transform)
        return cls(target, renames, transform or None)

    def compiled(self) -> CompiledChart:
        return compiled_chart(self.target)

    def identity(self) -> ChartIdentity:
        return ChartIdentity(
            self.compiled().source_hash, self.target.name or None, self.target.version or None
        )

    def executions(self) -> QuerySet[Execution]:
        """The executions this plan is for: those of any version of the target's name that
        may be migrated (``MIGRATABLE_STATUSES``) and are not on the target already, in id
        order."""
        return (
            Execution.objects.using(stepper.database())
            .filter(
                chart__name=self.target.name,
                chart__origin=ChartOrigin.LOADED,
                status__in=MIGRATABLE_STATUSES,
            )
            .filter(~Q(chart=self.target) | Q(status=ExecutionStatus.NEEDS_MIGRATION))
            .order_by("pk")
        )


@dataclass(slots=True)
class _Prepared:
    report: ExecutionReport
    blob: bytes = b""
    source: dict[str, Any] = field(default_factory=dict)
    active_states: list[str] = field(default_factory=list)


def _refused(execution: Execution, reason: str) -> _Prepared:
    return _Prepared(ExecutionReport(execution.pk, execution.session_id, Verdict.REFUSED, reason))


def _compiled_for(execution: Execution, sha256: str) -> CompiledChart | None:
    """The compiled chart a position was written for: its own chart's, or any stored row's
    with that identity (a source edited in place leaves the row's hash behind)."""
    try:
        own = compiled_chart(execution.chart)
    except PositionError:
        own = None
    if own is not None and own.source_hash == sha256:
        return own
    for row in Chart.objects.filter(content_hash=sha256).exclude(pk=execution.chart_id):
        try:
            compiled = compiled_chart(row)
        except PositionError:
            continue
        if compiled.source_hash == sha256:
            return compiled
    return None


def prepare(
    plan: MigrationPlan, execution: Execution, taken_keys: dict[str, int] | None = None
) -> _Prepared:
    """What migrating ``execution`` would do: the report, and the new position blob.
    ``taken_keys`` (business key -> execution id on the target), when the caller read them
    for a batch, saves a query per execution."""
    if execution.status not in MIGRATABLE_STATUSES:
        return _refused(
            execution,
            f"it is {execution.status}: only active, halted and needs_migration executions "
            "can be migrated",
        )
    if execution.chart.name != plan.target.name:
        return _refused(
            execution,
            f"it is an execution of {execution.chart}, not of a version of {plan.target.name!r}",
        )
    target = plan.compiled()
    blob = bytes(execution.position)
    try:
        stored = decode(blob)
    except PositionError as exc:
        return _refused(execution, f"its position cannot be read: {exc}")
    if execution.chart_id == plan.target.pk and stored.chart.sha256 == target.source_hash:
        return _Prepared(
            ExecutionReport(
                execution.pk,
                execution.session_id,
                Verdict.UP_TO_DATE,
                "already on the target",
                list(execution.configuration),
            )
        )
    old = _compiled_for(execution, stored.chart.sha256)
    if old is not None:
        try:
            stored = decode(blob, chart=old)
        except PositionError as exc:
            return _refused(execution, f"its position does not fit its chart: {exc}")
    if not stored.state.running:
        return _refused(execution, "its position has stopped")
    try:
        mapped: Mapped = map_state(
            stored.state,
            old,
            target,
            plan.renames,
            atomic_ids=list(execution.configuration),
        )
    except Unmappable as exc:
        return _refused(execution, str(exc))
    state = mapped.state
    source = {"chart_id": execution.chart_id, **stored.chart.to_dict()}
    identity = plan.identity()
    if plan.transform:
        context = TransformContext(
            execution.pk, execution.session_id, source, identity.to_dict(), mapped.configuration
        )
        try:
            datamodel = transform_named(plan.transform)(state.datamodel, context)
            if not isinstance(datamodel, dict):
                raise ValueError(f"it returned {type(datamodel).__name__}, not a dict")
            check_tagged(datamodel, "datamodel")
        except Exception as exc:  # a transform is the project's code: any failure refuses
            return _refused(
                execution, f"the transform {plan.transform!r} failed: {type(exc).__name__}: {exc}"
            )
        state = state.evolve(
            datamodel_json=json.dumps(datamodel, separators=(",", ":"), ensure_ascii=False)
        )
    key = execution.business_key
    if key is not None and (
        (taken_keys.get(key, execution.pk) != execution.pk)
        if taken_keys is not None
        else Execution.objects.using(stepper.database())
        .filter(chart=plan.target, business_key=key)
        .exclude(pk=execution.pk)
        .exists()
    ):
        return _refused(
            execution, f"another execution of {plan.target} has its business key {key!r}"
        )
    try:
        new_blob = encode(state, identity)
        checked = decode(new_blob, chart=target, require_running=True).state
    except PositionError as exc:
        return _refused(execution, f"the mapped position is not one of the target's: {exc}")
    active = [target.states[i].id for i in checked.configuration if i != 0]
    report = ExecutionReport(
        execution.pk,
        execution.session_id,
        Verdict.MIGRATES,
        configuration=mapped.configuration,
        entered=mapped.entered,
        dropped_history=mapped.dropped_history,
        onentry_not_run=mapped.onentry_not_run,
        data_not_set=_data_not_set(target, checked, mapped.newly_active),
    )
    return _Prepared(report, new_blob, source, active)


def _data_not_set(target: CompiledChart, state: State, newly_active: list[str]) -> list[str]:
    """The ``<data>`` ids of ``target`` the migrated ``state``'s datamodel does not hold: of
    every state with early binding; with late binding, of the root, the states the position
    has bound and the newly active ones (entered without binding their data)."""
    if target.datamodel != "ecmascript":
        return []
    if target.binding == "late":
        owners = {0, *state.bound, *(target.ids[i] for i in newly_active)}
    else:
        owners = set(range(len(target.states)))
    held = state.datamodel
    return [data.id for index in sorted(owners) for data in target.states[index].datas
            if data.id not in held]  # fmt: skip


def dry_run(
    plan: MigrationPlan, executions: Iterable[Execution] | None = None
) -> Iterator[ExecutionReport]:
    """Per execution, whether it maps and why not; nothing is written, nothing locked."""
    rows = plan.executions() if executions is None else executions
    if isinstance(rows, QuerySet):
        rows = rows.select_related("chart").iterator(chunk_size=DRY_RUN_BATCH)
    batch: list[Execution] = []
    for execution in rows:
        batch.append(execution)
        if len(batch) >= DRY_RUN_BATCH:
            yield from _dry_run_batch(plan, batch)
            batch = []
    yield from _dry_run_batch(plan, batch)


DRY_RUN_BATCH = 500


def _dry_run_batch(plan: MigrationPlan, batch: list[Execution]) -> Iterator[ExecutionReport]:
    keys = [e.business_key for e in batch if e.business_key is not None]
    taken = dict(
        Execution.objects.using(stepper.database())
        .filter(chart=plan.target, business_key__in=keys)
        .values_list("business_key", "pk")
    ) if keys else {}  # fmt: skip
    for execution in batch:
        yield prepare(plan, execution, taken).report


def migrate(
    plan: MigrationPlan,
    execution_ids: Iterable[int] | None = None,
    *,
    now: datetime | None = None,
) -> Iterator[ExecutionReport]:
    """Apply the plan to each execution (``plan.executions()`` unless ids are given), each in
    its own transaction (``migrate_one``), yielding each report as it is done."""
    ids = (
        list(plan.executions().values_list("pk", flat=True))
        if execution_ids is None
        else (list(execution_ids))
    )
    for pk in ids:
        yield migrate_one(plan, pk, now=now)


def migrate_one(plan: MigrationPlan, pk: int, *, now: datetime | None = None) -> ExecutionReport:
    """Migrate one execution in one transaction, under its lock (the module's guarantees)."""
    database = stepper.database()
    with transaction.atomic(using=database, durable=True):
        execution = stepper.lock(pk)
        prepared = prepare(plan, execution)
        if prepared.report.verdict is not Verdict.MIGRATES:
            return prepared.report
        now = now or statecharts_settings.now()
        _write(plan, execution, prepared, now)
    report = prepared.report
    return ExecutionReport(
        report.execution_id,
        report.session_id,
        Verdict.MIGRATED,
        f"migrated from {prepared.source.get('name')} v{prepared.source.get('version')} "
        f"to {plan.target}",
        report.configuration,
        report.entered,
        report.dropped_history,
        report.onentry_not_run,
        report.data_not_set,
    )


# The columns a migration writes (the rest of the row: session, key, metadata, stay).
_WRITTEN = (
    "chart",
    "position",
    "status",
    "configuration",
    "active_states",
    "steps",
    "updated",
    "failure_reason",
)


def _write(plan: MigrationPlan, execution: Execution, prepared: _Prepared, now: datetime) -> None:
    """The row and its history entry, with the stepper's precompiled statements (a migration
    writes what a step writes, and the chart)."""
    was = execution.status
    execution.chart = plan.target
    execution.position = prepared.blob
    execution.status = ExecutionStatus.ACTIVE
    execution.configuration = prepared.report.configuration
    execution.active_states = prepared.active_states
    execution.steps += 1
    execution.updated = now
    execution.failure_reason = ""
    sql.update_row(execution, _WRITTEN)
    entry = HistoryEntry.of(
        execution,
        input={
            "kind": MIGRATION_INPUT,
            "from": prepared.source,
            "to": {"chart_id": plan.target.pk, **plan.identity().to_dict()},
            "renames": dict(plan.renames),
            "transform": plan.transform,
            "was": was,
            # The blob's own text (a JSON column may reorder an object's keys, and replay
            # compares the blob's sha256).
            "position": prepared.blob.decode("utf-8"),
        },
        disposition=Disposition.MIGRATED,
        effects=[
            {
                "kind": "migrated",
                "entered": prepared.report.entered,
                "dropped_history": prepared.report.dropped_history,
                "onentry_not_run": prepared.report.onentry_not_run,
                "data_not_set": prepared.report.data_not_set,
            }
        ],
        position_sha256=hashlib.sha256(prepared.blob).hexdigest(),
        reason=f"migrated to {plan.target} (chart {plan.target.pk})",
        created=now,
    )
    sql.insert_row(entry)
