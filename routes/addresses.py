"""Rotating an execution's Basic HTTP address (``routes.inbound``), and minting a new one at
import (docs/basichttp.md, "Rotating an address").

An address is ``<base_url>/<token>/``, the token signed over the session id and a secret nonce
(``routes.models.InboundAddress``). :func:`rotate` replaces the nonce, so every earlier address
of the execution answers 403, and gives the execution its new address in one transaction: the
``_ioprocessors`` the chart reads changes through a recorded ``readdress`` input (who rotated
it and why are in its history entry; replay re-applies it, so it sees the same
``_ioprocessors`` at every step). A chart that copied its old address into its own data keeps
that (now dead) value there: it must read ``_ioprocessors`` again. An execution that cannot
take inputs (finished, halted, needing repair or migration) has its address revoked all the
same; its input is recorded as discarded or refused, and its ``_ioprocessors`` keeps the dead
address until it is rotated again while it can run.

The permission is ``routes.rotate_address`` (:data:`PERMISSION`); without a user the caller
is trusted code and nothing is checked.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import transaction

from routes.basichttp import BASICHTTP_SHORT, BASICHTTP_TYPE
from routes.models import InboundAddress
from routes.tokens import address_of, canonical, io_processors, location, new_nonce
from statecharts import stepper
from statecharts.conf import statecharts_settings
from statecharts.core.errors import StatechartError
from statecharts.core.position import decode
from statecharts.models import Execution
from statecharts.operations.transfer import Part, register_part
from statecharts.policies import attribution
from statecharts.stepper import Input, StepResult

PERMISSION = "routes.rotate_address"
REASON_MAX_LENGTH = 1_000
IMPORT_REASON = "imported: a new Basic HTTP address (the exported one does not travel)"


class RotationNotPermitted(PermissionDenied):
    """This user may not rotate addresses (``routes.rotate_address``); nothing was written."""


class NoAddress(ValueError):
    """The execution has no Basic HTTP address to rotate (it was not started with one)."""


def base_of(address: str) -> str:
    """Where the view is mounted: the address without its token."""
    return address.rstrip("/").rsplit("/", 1)[0] + "/"


def _entries(position: Any) -> dict[str, str] | None:
    """The ``_ioprocessors`` host entries of a position blob, or None when it cannot be
    read."""
    try:
        state = decode(bytes(position or b"")).state
    except (StatechartError, KeyError, TypeError, ValueError):
        return None
    return dict(state.io_processors or {})


def remember(execution: Execution) -> str | None:
    """Store the nonce of the address in ``execution``'s position, if it has one and no row
    yet (after its start commits); the stored nonce, or None for an execution without an
    address minted with one."""
    database = stepper.database()
    stored = (
        InboundAddress.objects.using(database)
        .filter(execution_id=execution.pk)
        .values_list("nonce", flat=True)
        .first()
    )
    if stored is not None:
        return stored
    rows = Execution.objects.using(database).filter(pk=execution.pk)
    row = rows.values_list("position", "session_id", "created").first()
    if row is None:
        return None
    entries = _entries(row[0]) or {}
    where = entries.get(BASICHTTP_SHORT) or entries.get(BASICHTTP_TYPE)
    named = address_of(where.rstrip("/").rsplit("/", 1)[-1]) if where else None
    if named is None or named[0] != row[1] or named[1] is None:
        return None
    assert where is not None
    address, _ = InboundAddress.objects.using(database).get_or_create(
        execution_id=execution.pk,
        defaults={"nonce": named[1], "base_url": base_of(where), "created": row[2]},
    )
    return address.nonce


def is_current(execution: Execution, nonce: str | None) -> bool:
    """Whether a token with ``nonce`` (None: minted before nonces) is ``execution``'s current
    address: its stored nonce; an older token only while the address was never rotated."""
    stored = (
        InboundAddress.objects.using(stepper.database())
        .filter(execution_id=execution.pk)
        .values_list("nonce", flat=True)
        .first()
    )
    if stored is None:
        if nonce is None:
            return True
        # The start committed but its row was not written yet (a crash between the two):
        # the position, written by the start, names the nonce.
        stored = remember(execution)
    return stored is not None and nonce is not None and hmac.compare_digest(stored, nonce)


def may_rotate(user: Any) -> bool:
    return bool(user is not None and user.has_perm(PERMISSION))


def rotate(
    execution: Execution | int,
    *,
    reason: str,
    user: Any = None,
    now: datetime | None = None,
    caller_context: dict[str, Any] | None = None,
) -> StepResult:
    """Give ``execution`` a new Basic HTTP address and revoke every earlier one (the module
    docstring). ``reason`` (required) is recorded with the input, and so is ``user`` (who must
    have :data:`PERMISSION`, else :class:`RotationNotPermitted`). Raises :class:`NoAddress`
    for an execution without one, and ``InvalidInput`` (a ``ValueError``) for a bad reason;
    nothing is written then. Returns the step's result: ``applied``, or ``discarded`` /
    ``refused`` for an execution that cannot take inputs (its address is revoked anyway)."""
    stepper.admit(
        stepper.OperatorRequest(
            reason=reason, max_length=REASON_MAX_LENGTH, caller_context=caller_context
        )
    )
    sender = None
    if user is not None:
        if not may_rotate(user):
            raise RotationNotPermitted(
                f"rotating a Basic HTTP address needs the permission {PERMISSION}"
            )
        recorded = attribution.user_of(user) or {}
        sender = {
            "user_id": recorded.get("id"),
            "username": recorded.get("username", ""),
            "permission": PERMISSION,
        }
        caller_context = attribution.with_user(caller_context, user)
    pk = execution.pk if isinstance(execution, Execution) else execution
    now = now or statecharts_settings.now()
    outbox: list[int] = []
    with transaction.atomic(using=stepper.database(), durable=True):
        locked = stepper.lock(pk)
        result = _readdress(locked, reason, sender, now, outbox, caller_context)
    stepper.deliver(outbox)
    return result


def _readdress(
    locked: Execution,
    reason: str,
    sender: dict[str, Any] | None,
    now: datetime,
    outbox: list[int],
    caller_context: dict[str, Any] | None,
    base_url: str | None = None,
) -> StepResult:
    """A new nonce for ``locked`` (in the caller's transaction, under its lock) and the
    readdress input that gives the chart the new address."""
    database = stepper.database()
    row = InboundAddress.objects.using(database).filter(execution_id=locked.pk).first()
    entries = _entries(locked.position)
    where = (entries or {}).get(BASICHTTP_SHORT) or (entries or {}).get(BASICHTTP_TYPE)
    if base_url is None:
        if row is not None:
            base_url = row.base_url
        elif where:
            base_url = base_of(where)
        else:
            raise NoAddress(f"execution {locked.pk} has no Basic HTTP address")
    nonce = new_nonce()
    new = canonical({**(entries or {}), **io_processors(base_url, locked.session_id, nonce)})
    result, _ = stepper.step_locked(
        locked, Input.readdress(new, reason, sender), now, outbox, caller_context
    )
    # (update_or_create: a start's ``remember`` may insert the row between the read above and
    # here; it holds the start's nonce, replaced all the same)
    InboundAddress.objects.using(database).update_or_create(
        execution=locked,
        defaults={
            "nonce": nonce,
            "base_url": base_url,
            "rotated": now,
            "rotations": (row.rotations if row is not None else 0) + 1,
        },
        create_defaults={
            "nonce": nonce,
            "base_url": base_url,
            "created": now,
            "rotated": now,
            "rotations": 1,
        },
    )
    return result


def rotate_many(
    executions: list[Execution],
    *,
    reason: str,
    user: Any = None,
    caller_context: dict[str, Any] | None = None,
) -> tuple[list[StepResult], list[tuple[Execution, str]]]:
    """:func:`rotate` each (one transaction each); the results, and those that could not be
    rotated with why (no address)."""
    done: list[StepResult] = []
    skipped: list[tuple[Execution, str]] = []
    for execution in executions:
        try:
            done.append(rotate(execution, reason=reason, user=user, caller_context=caller_context))
        except NoAddress as exc:
            skipped.append((execution, str(exc)))
    return done, skipped


# ---- export and import (statecharts.operations.transfer) --


def export_address(execution: Execution, redact: bool) -> dict[str, Any] | None:
    """Where the imported execution's new address is mounted (never the address itself)."""
    row = InboundAddress.objects.using(stepper.database()).filter(execution=execution).first()
    if row is not None:
        return {"base_url": row.base_url}
    entries = _entries(execution.position) or {}
    where = entries.get(BASICHTTP_SHORT) or entries.get(BASICHTTP_TYPE)
    return {"base_url": base_of(where)} if where else None


def load_address(execution: Execution, value: Any) -> None:
    """Mint a new address for the imported execution (in the import's transaction)."""
    if value is None:
        return
    if not isinstance(value, dict):
        raise ValueError("not an object")
    given = {"base_url": value.get("base_url")}
    checked = stepper.admit(stepper.ImportedRowRequest(texts=given, max_length=2048, blank=False))
    base_url: str = checked["base_url"]
    if not base_url.startswith(("http://", "https://", "/")):
        raise ValueError(f"base_url {base_url[:80]!r} is not an http(s) URL or a path")
    locked = stepper.lock(execution.pk)
    _readdress(locked, IMPORT_REASON, None, statecharts_settings.now(), [], None, base_url)


def register() -> None:
    register_part(Part(app="routes", name="basichttp", export=export_address, load=load_address))


def location_of(execution: Execution, base_url: str | None = None) -> str | None:
    """The execution's current Basic HTTP address (under ``base_url`` when given: where the
    view is mounted as a client sees it), for host code handing it to a peer; None when it
    has none. Views never show it (``statecharts.policies.addresses``)."""
    nonce = remember(execution)
    if nonce is None:  # never rotated, minted before nonces (or none at all)
        entries = _entries(execution.position) or {}
        where = entries.get(BASICHTTP_SHORT) or entries.get(BASICHTTP_TYPE)
        if where is None:
            return None
        return where if base_url is None else location(base_url, execution.session_id)
    if base_url is None:
        row = InboundAddress.objects.using(stepper.database()).get(execution_id=execution.pk)
        base_url = row.base_url
    return location(base_url, execution.session_id, nonce)


# ---- what the displays show (routes.surface): never the address, only its story --------------


@dataclass(frozen=True, slots=True)
class AddressState:
    """An execution's Basic HTTP address as displays show it: whether it has one, how often
    it was rotated and when (the address and its nonce are never shown)."""

    execution_id: int
    has_address: bool
    rotations: int = 0
    rotated: datetime | None = None

    def document(self) -> dict[str, Any]:
        return {
            "has_address": self.has_address,
            "rotations": self.rotations,
            "rotated": self.rotated.isoformat() if self.rotated else None,
        }

    def lines(self) -> list[str]:
        if not self.has_address:
            return []
        when = f", last {self.rotated.isoformat()}" if self.rotated else ""
        return [f"basichttp address: rotated {self.rotations} time(s){when} (never shown)"]


def read_address(execution: Execution, now: datetime) -> AddressState:
    row = InboundAddress.objects.using(stepper.database()).filter(execution=execution).first()
    if row is not None:
        return AddressState(execution.pk, True, row.rotations, row.rotated)
    entries = _entries(execution.position) or {}
    has = bool(entries.get(BASICHTTP_SHORT) or entries.get(BASICHTTP_TYPE))
    return AddressState(execution.pk, has)
