"""Re-encoding stored rows with the payload codec (and key) that writes now.

After a key rotation (a new key put first in ``STATECHARTS["PAYLOAD_KEYS"]``) or after
turning encryption on (``PAYLOAD_CODEC`` changed), rows written before still hold their
event data as they were written: under the old key, or in clear. :func:`reencrypt` rewrites
them, so the old key can be dropped (or a dump of the database holds nothing in clear).
``manage.py statechart reencrypt`` calls it.

**Apps register their row kinds** (``statecharts`` knows nothing of timers, invocations or
routes): an app calls :func:`register` from its ``AppConfig.ready()`` with an
:class:`EncodedRows` that names the model, the column holding the owning execution's id, the
columns its codec wrote, and how to apply a conversion to the encoded parts of them::

    reencryption.register(reencryption.EncodedRows(
        app="timers", name="timers", description="timer events", model=Timer,
        owner="execution_id", fields=("event",),
        convert=lambda values, f: {"event": codecs.map_event(values["event"], f)},
    ))

``statecharts`` registers ``history`` (inputs and effect summaries) and ``outbox`` (event
messages); the timers app ``timers`` and ``route_timers``; the invocations app
``invocations`` (their params).

Guarantees:

- **Batched, each batch its own transaction**, with the lock order of every step: the
  owning executions are locked first (ascending ids, ``stepper.lock_many``), then the rows
  (``select_for_update``) and rewritten. A step, a fire or an erasure of the same execution
  waits for the batch, or the batch for it; nothing is rewritten under a running step.
- **Idempotent and resumable**: a row already written by the writing codec (and, for the
  encrypting codec, under its newest key: ``codecs.is_current``) is left alone, so running
  it again (after an interruption, or twice) changes only what is left. ``after`` (per kind)
  starts past a row id.
- **Nothing is dropped**: a row whose codec or key is not deployed here
  (``CodecUnavailable``), or whose payload cannot be decoded (``CorruptPayload``), is
  reported (kind, id, reason) and left as it is.
- **Content unchanged**: a rewritten row decodes to exactly what it decoded to before.
- ``dry_run`` reads in the same batches and counts what would change; it writes nothing and
  takes no lock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import Model, Q

from statecharts import stepper
from statecharts.conf import statecharts_settings
from statecharts.extensions import Registry
from statecharts.policies import codecs

# (stored field values, conversion of one encoded value) -> the values, converted.
Convert = Callable[[dict[str, Any], Callable[[Any], Any]], dict[str, Any]]


def _every_row() -> Q:
    return Q()


@dataclass(frozen=True, slots=True)
class EncodedRows:
    """One kind of row whose columns the payload codec writes (see the module docstring).

    - ``owner``: the column holding the id of the execution the row belongs to (locked
      before the row is rewritten).
    - ``fields``: the columns the codec wrote (read, and rewritten with ``codec``).
    - ``convert(values, f)``: ``values`` (those columns, as stored) with ``f`` applied to
      every part the codec encodes, the rest as it is.
    - ``rows()``: which rows hold encoded data at all (default: every row).
    """

    app: str
    name: str
    description: str
    model: type[Model]
    owner: str
    fields: tuple[str, ...]
    convert: Convert
    rows: Callable[[], Q] = _every_row


_registered: Registry[EncodedRows] = Registry("encoded row kind")


def register(kind: EncodedRows) -> None:
    """Register a row kind (from ``AppConfig.ready()``). A name belongs to the app that
    registered it first; the same app registering it again replaces it."""
    _registered.add(kind)


def registered() -> list[EncodedRows]:
    """The installed apps' row kinds, in registration order."""
    return list(_registered)


def kind_names() -> list[str]:
    return [kind.name for kind in registered()]


class ReencryptRefused(ValueError):
    """Nothing was rewritten: the writing codec cannot write here (the message says why)."""


@dataclass(frozen=True, slots=True)
class Skipped:
    """A row left as it is: its codec or key is not deployed here, or it is undecodable."""

    kind: str
    pk: int
    codec: str
    reason: str

    def __str__(self) -> str:
        return f"{self.kind} #{self.pk} ({self.codec}): {self.reason}"


@dataclass(slots=True)
class KindReport:
    name: str
    description: str
    examined: int = 0
    changed: int = 0  # rewritten (dry run: would be)
    current: int = 0  # already written by the writing codec and key
    skipped: list[Skipped] = field(default_factory=list)
    batches: int = 0
    last: int = 0  # the last row id examined (``after`` to resume from)

    def __str__(self) -> str:
        skipped = f", {len(self.skipped):,} skipped" if self.skipped else ""
        return (
            f"{self.name}: {self.examined:,} row(s) examined, {self.changed:,} re-encoded, "
            f"{self.current:,} already current{skipped}"
        )


@dataclass(slots=True)
class ReencryptReport:
    codec: str  # the writing codec's name
    dry_run: bool = False
    kinds: list[KindReport] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def examined(self) -> int:
        return sum(kind.examined for kind in self.kinds)

    @property
    def changed(self) -> int:
        return sum(kind.changed for kind in self.kinds)

    @property
    def current(self) -> int:
        return sum(kind.current for kind in self.kinds)

    @property
    def skipped(self) -> list[Skipped]:
        return [row for kind in self.kinds for row in kind.skipped]

    def rate(self) -> float | None:
        """Rows examined per second (None: too quick to tell)."""
        return self.examined / self.seconds if self.seconds > 0 else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "codec": self.codec,
            "dry_run": self.dry_run,
            "kinds": {
                kind.name: {
                    "examined": kind.examined,
                    "changed": kind.changed,
                    "current": kind.current,
                    "skipped": [
                        {"id": s.pk, "codec": s.codec, "reason": s.reason} for s in kind.skipped
                    ],
                }
                for kind in self.kinds
            },
        }


Progress = Callable[[KindReport], None]


class _Writer:
    """The writing codec, and whether a stored value is already as it would write it."""

    def __init__(self) -> None:
        try:
            self.name, self.codec = codecs.writing()
            self.codec.encode({"probe": True})
        except codecs.CodecUnavailable as exc:
            raise ReencryptRefused(f"the writing codec cannot write here: {exc}") from exc

    def current(self, kind: EncodedRows, values: dict[str, Any], codec: str) -> bool:
        if codec != self.name:
            return False
        verdicts: list[bool] = []

        def look(stored: Any) -> Any:
            verdicts.append(codecs.is_current(self.codec, stored))
            return stored

        kind.convert(values, look)
        return all(verdicts)

    def encode(self, kind: EncodedRows, plain: dict[str, Any]) -> dict[str, Any]:
        return kind.convert(plain, self.codec.encode)


def _decode(kind: EncodedRows, values: dict[str, Any], codec: str) -> dict[str, Any]:
    if codec == codecs.JSON:
        return values
    return kind.convert(values, codecs.resolve(codec).decode)


def reencrypt(
    *,
    only: Iterable[str] | None = None,
    batch: int | None = None,
    dry_run: bool = False,
    after: dict[str, int] | None = None,
    progress: Progress | None = None,
    monotonic: Callable[[], float] = time.monotonic,
) -> ReencryptReport:
    """Rewrite every registered kind's rows (or those named in ``only``) with the writing
    codec and key (see the module docstring). ``batch`` rows per transaction (default
    ``PRUNE_BATCH``); ``after`` maps a kind to the row id to resume after; ``progress(kind)``
    is called after each batch. Raises :class:`ReencryptRefused` (before any write) when the
    writing codec cannot write here, ``ValueError`` for an unknown kind."""
    limit = statecharts_settings.PRUNE_BATCH if batch is None else batch
    if limit < 1:
        raise ValueError("the batch size must be at least 1")
    kinds = {kind.name: kind for kind in registered()}
    names = list(kinds) if only is None else list(only)
    unknown = [name for name in names if name not in kinds]
    if unknown:
        raise ValueError(
            f"no encoded row kind named {', '.join(map(repr, unknown))}; "
            f"kinds: {', '.join(kinds)}"
        )
    writer = _Writer()
    report = ReencryptReport(codec=writer.name, dry_run=dry_run)
    started = monotonic()
    for name in names:
        kind = kinds[name]
        done = KindReport(name, kind.description, last=(after or {}).get(name, 0))
        report.kinds.append(done)
        while _batch(kind, writer, done, limit, dry_run):
            done.batches += 1
            if progress is not None:
                progress(done)
    report.seconds = monotonic() - started
    return report


def _batch(
    kind: EncodedRows, writer: _Writer, done: KindReport, limit: int, dry_run: bool
) -> bool:
    """One batch of ``kind`` after ``done.last``; False when none was left."""
    database = stepper.database()
    manager = kind.model._default_manager.using(database)
    candidates = list(
        manager.filter(kind.rows(), pk__gt=done.last)
        .order_by("pk")
        .values_list("pk", kind.owner)[:limit]
    )
    if not candidates:
        return False
    ids = [pk for pk, _ in candidates]
    columns = ("pk", "codec", *kind.fields)
    if dry_run:
        _examine(kind, writer, done, manager.filter(pk__in=ids).order_by("pk").values(*columns))
    else:
        with transaction.atomic(using=database, durable=True):
            stepper.lock_many({owner for _, owner in candidates if owner is not None})
            rows = manager.filter(pk__in=ids).order_by("pk").select_for_update()
            rewrites = [
                kind.model(pk=pk, codec=writer.name, **values)
                for pk, values in _examine(kind, writer, done, rows.values(*columns))
            ]
            if rewrites:  # one statement for the batch
                manager.bulk_update(rewrites, [*kind.fields, "codec"])
    done.last = ids[-1]
    return True


def _examine(
    kind: EncodedRows, writer: _Writer, done: KindReport, rows: Iterable[dict[str, Any]]
) -> list[tuple[int, dict[str, Any]]]:
    """Which of ``rows`` to rewrite, and with what; counts them all in ``done``."""
    rewrites: list[tuple[int, dict[str, Any]]] = []
    for row in rows:
        done.examined += 1
        pk, codec = row["pk"], row["codec"] or codecs.JSON
        values = {name: row[name] for name in kind.fields}
        try:
            plain = _decode(kind, values, codec)
        except (codecs.CodecUnavailable, codecs.CorruptPayload) as exc:
            unavailable = isinstance(exc, codecs.CodecUnavailable)
            what = "not deployed here" if unavailable else "undecodable"
            done.skipped.append(Skipped(kind.name, pk, codec, f"{what}: {exc}"))
            continue
        if writer.current(kind, values, codec):
            done.current += 1
            continue
        done.changed += 1
        rewrites.append((pk, writer.encode(kind, plain)))
    return rewrites


# ---- the statecharts app's own kinds ---------------------------------------------------------


def _history(values: dict[str, Any], convert: Callable[[Any], Any]) -> dict[str, Any]:
    return {
        "input": codecs.map_input(values["input"], convert),
        "effects": codecs.map_effects(values["effects"], convert),
    }


def _outbox(values: dict[str, Any], convert: Callable[[Any], Any]) -> dict[str, Any]:
    return {"event": codecs.map_event(values["event"], convert)}


def _event_messages() -> Q:
    from statecharts.stepper.delivery import EVENT

    return Q(kind=EVENT)  # other kinds (an invocation's start, ...) carry only row ids


def register_own() -> None:
    from statecharts.models import HistoryEntry, OutboxMessage

    register(
        EncodedRows(
            app="statecharts",
            name="history",
            description="history inputs and the events their steps sent",
            model=HistoryEntry,
            owner="execution_id",
            fields=("input", "effects"),
            convert=_history,
        )
    )
    register(
        EncodedRows(
            app="statecharts",
            name="outbox",
            description="events sent to other executions",
            model=OutboxMessage,
            owner="sender_id",
            fields=("event",),
            convert=_outbox,
            rows=_event_messages,
        )
    )
