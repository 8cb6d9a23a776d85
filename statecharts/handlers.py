"""The interface through which the stepper hands effects to other apps, in the same transaction.

Apps register a default handler for the kinds they own in ``AppConfig.ready()``
(``register_default_handler``: the timers app takes ``send_delayed`` and ``cancel``).
``STATECHARTS["EFFECT_HANDLERS"]`` overrides them per kind (``None`` disables one); each maps
an effect kind to a dotted path of a callable, or the callable itself::

    def handle(context: EffectContext, effect: Effect) -> None: ...

It runs inside the step's transaction, after the execution row was locked, so whatever it
writes commits or rolls back with the step. Kinds a handler may take: ``send_delayed``,
``cancel`` (the timers app), ``invoke``, ``cancel_invoke``, ``autoforward``, ``send:invoke``
(a send to an invoked child) and ``done`` (seen by a parent's invocation; the stepper itself
has already marked the execution finished). A kind with no handler is recorded in the
history with ``"unhandled": true`` and logged as a warning: nothing is silently dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.utils.module_loading import import_string

from statecharts.conf import statecharts_settings
from statecharts.core.effects import Effect

if TYPE_CHECKING:
    from statecharts.core.state import State
    from statecharts.models import Execution

HANDLED_KINDS = frozenset(
    {"send_delayed", "cancel", "invoke", "cancel_invoke", "autoforward", "send:invoke", "done"}
)


@dataclass(frozen=True, slots=True)
class EffectContext:
    execution: Execution  # locked for the rest of the transaction
    state: State  # the state after the step
    now: datetime  # the step's injected clock
    seq: int  # the history sequence number of the step
    caller_context: dict[str, Any] | None = None  # opaque data the caller passed to the step


EffectHandler = Callable[[EffectContext, Effect], None]


_defaults: dict[str, str | EffectHandler] = {}


def register_default_handler(kind: str, handler: str | EffectHandler) -> None:
    """Make ``handler`` perform ``kind`` effects unless the settings say otherwise."""
    if kind not in HANDLED_KINDS:
        raise ValueError(f"{kind!r} is not an effect kind handed to other apps")
    _defaults[kind] = handler


def effect_handler(kind: str) -> EffectHandler | None:
    overrides = statecharts_settings.EFFECT_HANDLERS
    configured = overrides[kind] if kind in overrides else _defaults.get(kind)
    if configured is None:
        return None
    handler: EffectHandler = (
        import_string(configured) if isinstance(configured, str) else configured
    )
    return handler
