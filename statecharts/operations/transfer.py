"""Exporting an execution's position to a JSON document, and importing one: to move an
execution between databases, or to attach it to a bug report (``redact``).

The document (``FORMAT``, ``VERSION``)::

    {"format": "statecharts-execution", "version": 1,
     "chart": {"sha256": "...", "name": "order", "version": "3"},
     "execution": {"session_id": ..., "status": ..., "business_key": ..., "metadata": {...},
                   "steps": 12, "created": "...", "updated": "..."},
     "position": "<the position blob's text>",
     "redacted": false,
     "parts": {"timers": [...]}}       # what apps keep for it (their own format)

Guarantees:

- **identity-checked**: importing needs a stored chart whose identity is the document's
  ``chart.sha256`` (load that chart first), and the position is decoded against it with the
  core's typed refusals (``statecharts.core.position``: not a position, a format version this
  release does not read, another chart's position, a stopped one): an :class:`ImportRefused`
  names the reason and nothing is written;
- **apps contribute their rows** without ``statecharts`` importing them: an app registers a
  :class:`Part` (``register_part``) whose ``export(execution, redact)`` returns JSON and whose
  ``load(execution, value)`` writes its rows for the imported execution, in the import's
  transaction (the timers app exports its pending timers: their due times, send ids and
  ordinals are kept, so they fire into the imported execution as they would have);
- **redacted** exports (``redact=True``) replace every datamodel value, the metadata, the
  business key and the data of pending events with ``"(redacted)"`` markers: the shape stays
  (state ids, variable names, timers) for a bug report. A redacted document can be imported
  (into a scratch database) like any other; it says it is redacted;
- **checked like every other door**: the session id, business key and metadata pass the
  stepper's gate (an ``ImportRequest``: lengths against their columns, no NUL, metadata
  bounded as the API bounds it; an app's part checks its rows' text with an
  ``ImportedRowRequest``), and a part that cannot be read or stored (a value its column cannot hold)
  is an :class:`ImportRefused` too, never a database error or a ``RecursionError``;
- **no capability travels**: the Event I/O processor addresses a host gave the execution
  (``_ioprocessors`` entries such as the Basic HTTP address: whoever holds one can post events
  into it) are left out of the position, and hidden by value wherever the chart copied them
  into its data (``statecharts.policies.addresses``), redacted or not; an import never carries one
  either (a document from an older release may: it is dropped). The app that owns an address
  mints a new one from its part (the routes app's ``basichttp`` part: a new secret, recorded
  as a ``readdress`` input after the import's entry);
- an import is one transaction: the execution row, one ``imported`` history entry holding
  the position (replay starts from it), and every part's rows.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.apps import apps
from django.db import DataError, transaction
from django.utils.dateparse import parse_datetime

from statecharts import stepper
from statecharts.conf import statecharts_settings
from statecharts.core.model import Chart as CompiledChart
from statecharts.core.position import Position, PositionError, decode, encode
from statecharts.drivers.durable import status_of
from statecharts.exceptions import InvalidInput
from statecharts.models import Chart, Execution, HistoryEntry
from statecharts.models.history import Disposition
from statecharts.policies import addresses
from statecharts.runtime import compiled_chart
from statecharts.statuses import ExecutionStatus

FORMAT = "statecharts-execution"
VERSION = 1
REDACTED = "(redacted)"
IMPORT_INPUT = "import"  # the history input's kind
# What an import may create: an execution that can go on (or is held for an operator).
IMPORTABLE_STATUSES = frozenset({ExecutionStatus.ACTIVE, ExecutionStatus.HALTED})


class ImportRefused(ValueError):
    """The document cannot be imported (the message says why); nothing was written."""


class ExportRefused(ValueError):
    """The execution cannot be exported (a stopped or unreadable position)."""


@dataclass(frozen=True, slots=True)
class Part:
    """What an app keeps for an execution, carried in the document under ``name``."""

    app: str
    name: str
    export: Callable[[Execution, bool], Any]  # (execution, redact) -> JSON
    load: Callable[[Execution, Any], None]  # (imported execution, value): write its rows


_parts: dict[str, Part] = {}


def register_part(part: Part) -> None:
    """Register an app's part (from its ``AppConfig.ready()``; again replaces it)."""
    _parts[part.name] = part


def parts() -> list[Part]:
    return [p for p in _parts.values() if apps.is_installed(p.app)]


def redact_value(value: Any) -> Any:
    """``value`` with every leaf replaced by the marker (keys and nesting kept)."""
    if isinstance(value, dict):
        return {k: redact_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_value(v) for v in value]
    return REDACTED


def export_execution(execution: Execution, *, redact: bool = False) -> dict[str, Any]:
    """The document for ``execution`` (see the module docstring)."""
    try:
        position = decode(bytes(execution.position), chart=compiled_chart(execution.chart))
    except PositionError as exc:
        raise ExportRefused(
            f"execution {execution.pk}: its position cannot be read: {exc}"
        ) from None
    if not position.state.running:
        raise ExportRefused(f"execution {execution.pk} has finished: there is nothing to move")
    state = position.state
    if state.invocations:
        raise ExportRefused(
            f"execution {execution.pk} has running invocations (children): exporting them "
            "with it is not supported yet"
        )
    datamodel = addresses.hide(state.datamodel, addresses.secrets_of(state.io_processors))
    if redact:
        datamodel = redact_value(datamodel)
    state = state.evolve(
        datamodel_json=json.dumps(datamodel, separators=(",", ":"), ensure_ascii=False),
        io_processors=None,  # capabilities: the owning app mints new ones at import
    )
    blob = encode(state, position.chart)
    return {
        "format": FORMAT,
        "version": VERSION,
        "chart": position.chart.to_dict(),
        "execution": {
            "session_id": execution.session_id,
            "status": execution.status,
            "business_key": REDACTED
            if redact and execution.business_key
            else (execution.business_key),
            "metadata": redact_value(execution.metadata) if redact else execution.metadata,
            "steps": execution.steps,
            "created": execution.created.isoformat(),
            "updated": execution.updated.isoformat(),
        },
        "position": blob.decode("utf-8"),
        "redacted": redact,
        "parts": {part.name: part.export(execution, redact) for part in parts()},
    }


def _field(document: dict[str, Any], *path: str) -> Any:
    value: Any = document
    for key in path:
        if not isinstance(value, dict) or key not in value:
            raise ImportRefused(f"not an execution document: no {'.'.join(path)}")
        value = value[key]
    return value


def import_execution(document: Any, *, now: datetime | None = None) -> Execution:
    """Create the execution a document describes (see the module docstring); raises
    ``ImportRefused`` with the reason, writing nothing, when it cannot."""
    _check_format(document)
    chart = _stored_chart(document)
    compiled = compiled_chart(chart)
    position, blob = _position(document, compiled)
    fields = _execution_fields(document, position)
    parts_given = _parts_given(document)
    database = stepper.database()
    now = now or statecharts_settings.now()
    with transaction.atomic(using=database):
        _refuse_taken(database, chart, fields)
        execution = _create_execution(database, chart, compiled, position, blob, fields, now)
        _record_import(database, execution, document, position, blob, fields, now)
        _load_parts(execution, parts_given)
    return execution


@dataclass(frozen=True, slots=True)
class _ExecutionFields:
    """The document's ``execution`` object, read and checked."""

    session_id: str
    status: str
    business_key: str | None
    metadata: dict[str, Any]
    created: datetime | None
    steps: Any


def _check_format(document: Any) -> None:
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ImportRefused(f"not an execution document (no {FORMAT!r} format marker)")
    version = document.get("version")
    if version != VERSION:
        raise ImportRefused(
            f"document version {version!r} is not supported (this release reads {VERSION})"
        )


def _stored_chart(document: dict[str, Any]) -> Chart:
    """The stored chart whose identity the document's position was written for."""
    sha256 = _field(document, "chart", "sha256")
    chart = Chart.objects.filter(content_hash=sha256).first() if isinstance(sha256, str) else None
    if chart is None:
        raise ImportRefused(
            f"no stored chart has the identity sha256 {str(sha256)[:12]}... the position was "
            "written for: load that chart first"
        )
    return chart


def _position(document: dict[str, Any], compiled: CompiledChart) -> tuple[Position, bytes]:
    """The document's position, decoded against the chart (a running one), without the
    I/O processor addresses an older release's export may carry: no capability travels."""
    text = _field(document, "position")
    if not isinstance(text, str):
        raise ImportRefused("not an execution document: the position is not text")
    blob = text.encode("utf-8")
    try:
        position = decode(blob, chart=compiled, require_running=True)
    except PositionError as exc:
        raise ImportRefused(f"{type(exc).__name__}: {exc}") from None
    if position.state.io_processors:
        position = Position(position.chart, position.state.evolve(io_processors=None))
        blob = encode(position.state, position.chart)
    return position, blob


def _execution_fields(document: dict[str, Any], position: Position) -> _ExecutionFields:
    """The ``execution`` object: its session id the position's, a status an import may
    create, and what comes from outside checked by the stepper's gate (lengths against the
    columns, no NUL in text, bounded metadata), as at every other door."""
    fields = _field(document, "execution")
    session_id = fields.get("session_id") if isinstance(fields, dict) else None
    if session_id != position.state.session_id:
        raise ImportRefused("the document's session id is not its position's")
    status = fields.get("status")
    if status not in IMPORTABLE_STATUSES:
        raise ImportRefused(f"an execution that is {status!r} cannot be imported")
    business_key = fields.get("business_key")
    metadata = fields.get("metadata") or {}
    if business_key is not None and not isinstance(business_key, str):
        raise ImportRefused("the business key is not text")
    if not isinstance(metadata, dict):
        raise ImportRefused("the metadata is not an object")
    try:
        stepper.admit(
            stepper.ImportRequest(
                session_id=session_id, business_key=business_key, metadata=metadata
            )
        )
    except InvalidInput as exc:
        raise ImportRefused(str(exc)) from None
    try:
        created = parse_datetime(str(fields.get("created") or ""))
    except ValueError:
        raise ImportRefused(
            f"execution.created: {str(fields.get('created'))[:40]!r} is not a date and time"
        ) from None
    return _ExecutionFields(
        session_id, status, business_key, metadata, created, fields.get("steps")
    )


def _parts_given(document: dict[str, Any]) -> dict[str, tuple[Part, Any]]:
    """Each part the document carries, with the installed app's :class:`Part` that reads it."""
    part_values = document.get("parts") or {}
    if not isinstance(part_values, dict):
        raise ImportRefused("the parts are not an object")
    known = {part.name: part for part in parts()}
    unknown = sorted(set(part_values) - set(known))
    if unknown:
        raise ImportRefused(f"no installed app reads the part(s) {', '.join(unknown)}")
    return {name: (known[name], value) for name, value in part_values.items()}


def _refuse_taken(database: str, chart: Chart, fields: _ExecutionFields) -> None:
    """Refuse a session id or a business key (of this chart) an execution here has."""
    executions = Execution.objects.using(database)
    if executions.filter(session_id=fields.session_id).exists():
        raise ImportRefused(f"an execution with session id {fields.session_id!r} exists here")
    business_key = fields.business_key
    if (
        business_key is not None
        and executions.filter(chart=chart, business_key=business_key).exists()
    ):
        raise ImportRefused(f"chart {chart} has an execution with business key {business_key!r}")


def _create_execution(
    database: str,
    chart: Chart,
    compiled: CompiledChart,
    position: Position,
    blob: bytes,
    fields: _ExecutionFields,
    now: datetime,
) -> Execution:
    states = compiled.states
    state = position.state
    halted = fields.status == ExecutionStatus.HALTED
    return Execution.objects.using(database).create(
        chart=chart,
        status=fields.status if halted else status_of(state),
        session_id=fields.session_id,
        position=blob,
        configuration=[states[i].id for i in state.configuration if states[i].is_atomic],
        active_states=[states[i].id for i in state.configuration if i != 0],
        steps=1,
        business_key=fields.business_key,
        metadata=fields.metadata,
        created=fields.created or now,
        updated=now,
    )


def _record_import(
    database: str,
    execution: Execution,
    document: dict[str, Any],
    position: Position,
    blob: bytes,
    fields: _ExecutionFields,
    now: datetime,
) -> None:
    """The ``imported`` history entry: it holds the position, so replay starts from it."""
    redacted = bool(document.get("redacted"))
    HistoryEntry.of(
        execution,
        seq=1,
        input={
            "kind": IMPORT_INPUT,
            "chart": position.chart.to_dict(),
            "redacted": redacted,
            "steps_before": fields.steps,
            "position": blob.decode("utf-8"),
        },
        disposition=Disposition.IMPORTED,
        position_sha256=hashlib.sha256(blob).hexdigest(),
        reason="imported from an export" + (" (redacted)" if redacted else ""),
        created=now,
    ).save(using=database, force_insert=True)


def _load_parts(execution: Execution, parts_given: dict[str, tuple[Part, Any]]) -> None:
    """Each app writes its rows for the imported execution (in the import's transaction)."""
    for name, (part, value) in parts_given.items():
        try:
            part.load(execution, value)
        except (KeyError, TypeError, ValueError, RecursionError, DataError) as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ImportRefused(f"the part {name!r} cannot be read: {reason}") from None
