"""What a route is: the class a host registers in ``STATECHARTS["ROUTES"]`` (docs/routes.md).

A route is a named destination for a ``<send>`` whose ``type`` is not SCXML. Write one by
subclassing :class:`Route` and registering it by name in settings (never from a chart, a row
or a request)::

    class SmsRoute(Route):
        overridable = frozenset({"sender"})  # the option keys a scope may override

        def check(self, config, send_type, target):
            if not target:
                return RouteAnswer(RouteVerdict.UNREACHABLE, "no phone number")
            return ROUTE_OK

        def deliver(self, config, message, key):
            sms_gateway.send(message.target, message.data, sender=config["sender"],
                             idempotency_key=key)

    STATECHARTS = {"ROUTES": {"sms": {
        "ROUTE": "myapp.routes.SmsRoute", "TYPES": ["sms"], "OPTIONS": {"sender": "ACME"},
    }}}

The guarantees a route owes and is given:

- ``check(config, send_type, target)`` is asked while the ``<send>`` executes, inside the
  step (no I/O: it decides from the target and its configuration alone). ``invalid`` is
  ``error.execution`` in the chart, ``unreachable`` is ``error.communication``; the answer is
  recorded in the history, so replay gets the same.
- ``idempotency_key(message)`` composes the send's key: deterministic (the same execution and
  the same send give the same key on a re-run of the step; never a clock or a random value).
  The default is the sender's session id and the send's ordinal.
- ``deliver(config, message, key)`` runs after the step committed, with no lock held, at most
  once per ``key``: the platform writes the key in its delivery ledger before calling it and
  never calls it again for that key (a crash between the two loses that delivery; it shows as
  "in doubt"). A route whose action is a write to the same database may do it inside
  :meth:`deliver_atomic` instead, in the ledger's own transaction, and gets exactly-once.
  Raising means the delivery failed: the sender gets ``error.communication`` with the send id.
- ``deliver`` may raise :class:`NotSent` when it knows nothing left this process (the
  connection was refused, the name did not resolve): only such a failure may be retried, by
  the route's ``retry_policy`` (``routes.retrying``; none by default). Any other raise is
  ambiguous (the far side may have acted) and is never retried.
- ``deliver`` may answer ``Cancel(reason)`` or ``Discard(reason)`` instead of acting: the
  key ends ``cancelled`` / ``discarded`` at once, the reason recorded, no attempt spent, and
  the sender hears ``error.communication`` as for any undelivered send.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from statecharts.core.host import ROUTE_OK, RouteAnswer, RouteVerdict
from statecharts.policies.retrying import Cancel, Discard, GiveUp, RetryPolicy

# A route's configuration for one send: its OPTIONS with the scope's overrides (plain JSON:
# a delayed send's row keeps it as resolved when the send was scheduled).
RouteConfig = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class RouteMessage:
    """What a route is handed for one ``<send>``: plain data (kept on rows as JSON)."""

    route: str  # the route's registered name
    type: str  # the <send type> as the chart wrote it
    target: str | None  # the <send target> (evaluated), if any
    name: str  # the event name
    data: Any  # the event's data: <content> or the params / namelist
    payload: str | None  # "content", "params" or None (no data)
    send_id: str  # the <send>'s id (generated "send_<n>" when the chart gave none)
    send_ordinal: int  # the send's ordinal in its session (part of the key)
    session_id: str  # the sender's session id
    execution_id: int  # the sender's execution
    delayed: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> RouteMessage:
        fields = cls.__dataclass_fields__
        return cls(**{name: raw[name] for name in fields if name in raw})


class NotSent(Exception):
    """Raised by ``deliver``: the action provably did not leave this process (nothing reached
    the destination), so the route's ``retry_policy`` may try it again under the same key.
    Raise it ``from`` the error that proves it; a policy's ``non_retryable`` classes are
    matched against both. Only raise it when it is certain: a retry of a send that did arrive
    delivers it twice."""

    def __init__(self, reason: str = "") -> None:
        super().__init__(reason)
        self.reason = reason


class Route:
    """The base of every route (see the module docstring). One instance per name and
    process, made from the settings entry: ``name`` and ``options`` (the entry's OPTIONS)."""

    # Option keys a scope (an execution, or a chart's settings-level overrides) may override.
    # None by default; the settings entry's "OVERRIDABLE" replaces it.
    overridable: ClassVar[frozenset[str]] = frozenset()
    # Options the route has when the settings entry does not give them.
    default_options: ClassVar[Mapping[str, Any]] = {}
    # Which NotSent failures are retried, and when (routes.retrying). None: the settings'
    # ROUTE_* defaults (one attempt, no retry); the settings entry's "RETRY" overrides it.
    retry_policy: ClassVar[RetryPolicy | None] = None

    def __init__(self, name: str, options: Mapping[str, Any]) -> None:
        self.name = name
        self.options: dict[str, Any] = {**self.default_options, **options}

    def check(self, config: RouteConfig, send_type: str, target: str | None) -> RouteAnswer:
        """May a send to ``target`` be taken? (In the step: decide without I/O.)"""
        return ROUTE_OK

    def idempotency_key(self, message: RouteMessage) -> str:
        """The send's key: deterministic, unique per send (see the module docstring)."""
        return f"{message.session_id}:{message.send_ordinal}"

    def deliver(self, config: RouteConfig, message: RouteMessage, key: str) -> GiveUp | None:
        """Do the outside action, after the commit; raise if it failed (``NotSent`` if it
        provably never left), or answer ``Cancel``/``Discard`` to give up without acting."""
        raise NotImplementedError(f"route {self.name!r} does not deliver")

    def deliver_atomic(self, config: RouteConfig, message: RouteMessage, key: str) -> bool:
        """Optionally do the action inside the ledger's transaction (a write to the same
        database: exactly once). Return True if it was done (``deliver`` is then not called)."""
        return False


__all__ = [
    "ROUTE_OK",
    "Cancel",
    "Discard",
    "GiveUp",
    "NotSent",
    "RetryPolicy",
    "Route",
    "RouteAnswer",
    "RouteConfig",
    "RouteMessage",
    "RouteVerdict",
]
