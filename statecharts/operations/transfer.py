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
- **checked like every other door**: the session id, business key and metadata pass
  ``statecharts.policies.validation`` (lengths against their columns, no NUL, metadata bounded as
  the
  API bounds it), and a part that cannot be read or stored (a value its column cannot hold)
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
from statecharts.core.position import Position, PositionError, decode, encode
from statecharts.drivers.durable import status_of
from statecharts.models import Chart, Execution, HistoryEntry
from statecharts.models.history import Disposition
from statecharts.policies import addresses, validation
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
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ImportRefused(f"not an execution document (no {FORMAT!r} format marker)")
    version = document.get("version")
    if version != VERSION:
        raise ImportRefused(
            f"document version {version!r} is not supported (this release reads {VERSION})"
        )
    sha256 = _field(document, "chart", "sha256")
    chart = Chart.objects.filter(content_hash=sha256).first() if isinstance(sha256, str) else None
    if chart is None:
        raise ImportRefused(
            f"no stored chart has the identity sha256 {str(sha256)[:12]}... the position was "
            "written for: load that chart first"
        )
    text = _field(document, "position")
    if not isinstance(text, str):
        raise ImportRefused("not an execution document: the position is not text")
    blob = text.encode("utf-8")
    compiled = compiled_chart(chart)
    try:
        position = decode(blob, chart=compiled, require_running=True)
    except PositionError as exc:
        raise ImportRefused(f"{type(exc).__name__}: {exc}") from None
    if position.state.io_processors:  # (an older release's export: no address travels)
        position = Position(position.chart, position.state.evolve(io_processors=None))
        blob = encode(position.state, position.chart)
        text = blob.decode("utf-8")
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
    # The document comes from outside: its text and JSON pass the one validator, as at
    # every other door (lengths against the columns, no NUL in text, bounded metadata).
    try:
        validation.text(session_id, "execution.session_id", max_length=_length("session_id"))
        validation.text(
            business_key,
            "execution.business_key",
            max_length=_length("business_key"),
            optional=True,
        )
        validation.json_object(metadata, "execution.metadata", optional=False)
    except validation.InvalidInput as exc:
        raise ImportRefused(str(exc)) from None
    try:
        created = parse_datetime(str(fields.get("created") or ""))
    except ValueError:
        raise ImportRefused(
            f"execution.created: {str(fields.get('created'))[:40]!r} is not a date and time"
        ) from None
    part_values = document.get("parts") or {}
    if not isinstance(part_values, dict):
        raise ImportRefused("the parts are not an object")
    known = {part.name: part for part in parts()}
    unknown = sorted(set(part_values) - set(known))
    if unknown:
        raise ImportRefused(f"no installed app reads the part(s) {', '.join(unknown)}")
    database = stepper.database()
    now = now or statecharts_settings.now()
    with transaction.atomic(using=database):
        if Execution.objects.using(database).filter(session_id=session_id).exists():
            raise ImportRefused(f"an execution with session id {session_id!r} exists here")
        if (
            business_key is not None
            and Execution.objects.using(database)
            .filter(chart=chart, business_key=business_key)
            .exists()
        ):
            raise ImportRefused(
                f"chart {chart} has an execution with business key {business_key!r}"
            )
        states = compiled.states
        state = position.state
        created = created or now
        execution = Execution.objects.using(database).create(
            chart=chart,
            status=status if status == ExecutionStatus.HALTED else status_of(state),
            session_id=session_id,
            position=blob,
            configuration=[states[i].id for i in state.configuration if states[i].is_atomic],
            active_states=[states[i].id for i in state.configuration if i != 0],
            steps=1,
            business_key=business_key,
            metadata=metadata,
            created=created,
            updated=now,
        )
        HistoryEntry.objects.using(database).create(
            execution=execution,
            seq=1,
            input={
                "kind": IMPORT_INPUT,
                "chart": position.chart.to_dict(),
                "redacted": bool(document.get("redacted")),
                "steps_before": fields.get("steps"),
                "position": text,
            },
            disposition=Disposition.IMPORTED,
            status_after=execution.status,
            configuration_after=execution.configuration,
            position_sha256=hashlib.sha256(blob).hexdigest(),
            reason="imported from an export" + (" (redacted)" if document.get("redacted") else ""),
            created=now,
        )
        for name, value in part_values.items():
            try:
                known[name].load(execution, value)
            except (KeyError, TypeError, ValueError, RecursionError, DataError) as exc:
                reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise ImportRefused(f"the part {name!r} cannot be read: {reason}") from None
    return execution


def _length(name: str) -> int:
    return Execution._meta.get_field(name).max_length or 0
