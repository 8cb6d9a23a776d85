"""The project's settings: one namespaced dict, ``STATECHARTS``, read lazily.

Every read goes through ``django.conf.settings`` at the time of use, so ``override_settings``
works in tests. A value read is kept until ``STATECHARTS`` changes (Django's ``setting_changed``
signal, which ``override_settings`` and pytest-django's ``settings`` fixture send) or another
app registers its keys: a step reads about twenty keys, and each read would otherwise search
the registered groups and ``settings`` again. Each app owns its keys: it registers their
defaults (and, optionally, a system check) with :func:`register_settings`, and the keys all
live in the one ``STATECHARTS`` dict. The ``statecharts`` app's own keys::

    STATECHARTS = {
        "CLOCK": "django.utils.timezone.now",      # injected clock: () -> aware datetime
        "RESOLVER": "statecharts.core.resolve.refuse_all",  # src="..." of stored charts
        # Charts (docs/charts.md): the datamodel of an <scxml> without a datamodel attribute,
        # recorded on each chart row when it is loaded; and whether a syntax error in chart
        # code refuses a chart being loaded ("error") or is reported ("warning").
        "DEFAULT_DATAMODEL": "ecmascript",
        "EXPRESSION_SYNTAX": "warning",
        # Step budgets (statecharts.core.budget): a step over one is rolled back and the
        # execution is halted (docs/durable-executions.md).
        "ROUND_BUDGET": 10_000,     # microstep rounds per macrostep
        "SEND_BUDGET": 1_000,       # self-sends drained inside one step
        "STEP_TIME_BUDGET_MS": 5_000,  # wall clock for the whole step (every evaluation in it)
        "FOREACH_BUDGET": 100_000,  # <foreach> iterations in one step, nested ones included
        "EFFECT_BUDGET": 10_000,    # effects one step may emit
        "LOG_BYTES_BUDGET": 1_000_000,  # bytes of <log> in one step
        "DELAYED_SENDS_BUDGET": 1_000,  # timers one step may schedule
        "POSITION_BUDGET_BYTES": 1_000_000,  # the stored position after a step
        "OUTPUT_BYTES_BUDGET": 2_000_000,  # bytes the step's effects carry (sends, donedata)
        "STEP_CLOCK": "time.monotonic",  # what the time budget reads (tests inject one)
        "TIME_LIMIT_MS": 500,       # per ECMAScript evaluation
        "MEMORY_LIMIT_BYTES": 64 * 1024 * 1024,
        "OUTBOX_BATCH": 1_000,      # cross-execution deliveries per sweeper run
        "INLINE_DELIVERIES": 20,    # ... done right after one step; the rest: the sweeper
        "OUTBOX_SWEEP_AGE_SECONDS": 5,  # the sweeper delivers messages left pending this long
        # PostgreSQL: a step's statements run as server-side prepared statements. False for
        # poolers that cannot keep them (PgBouncer < 1.21, transaction mode without
        # max_prepared_statements); Django's own statements are never prepared by this.
        "PREPARED_STATEMENTS": True,
        "PERFORMERS": {},           # instruction kind -> dotted path (statecharts.stepper)
        "EFFECT_HANDLERS": {},      # deprecated alias of PERFORMERS, by effect kind
        # Retention (statecharts.operations.retention, docs/operations.md): days; None keeps
        # forever.
        "EXECUTION_RETENTION_DAYS": None,  # finished executions, with all their rows
        "HISTORY_RETENTION_DAYS": None,    # the history of finished executions
        "OUTBOX_RETENTION_DAYS": 30,       # delivered/undeliverable messages, finished senders
        "PRUNE_BATCH": 500,         # rows (about) per pruning transaction
        "PRUNE_TASK_SECONDS": 300,  # how long the hourly django-q2 prune may run
        "PRUNE_SCHEDULED": True,    # False: the hourly task prunes nothing
        # Health (statecharts.operations.health): figure -> {"warning": n, "critical": n} overrides.
        "HEALTH_THRESHOLDS": {},
        "OPENTELEMETRY": False,     # spans and metrics through OpenTelemetry (docs/telemetry.md)
        # Migration (docs/versions-and-migration.md): transforms a plan may name.
        "MIGRATION_TRANSFORMS": {},  # name -> dotted path of f(datamodel, context)
    }

Other modules register their own keys: ``statecharts.policies.validation``, ``.attribution``,
``.codecs``, ``.authorization`` and ``.subjects``, and the ``timers`` (``timers/conf.py``),
``invocations`` (``invocations/conf.py``) and ``routes`` (``routes/conf.py``) apps. The
registered defaults are the one copy: tests/project/test_settings_documented.py checks that
every settings table in docs/ and each app's ``conf.py`` docstring agree with them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage
from django.core.signals import setting_changed
from django.utils.module_loading import import_string

DEFAULTS: dict[str, Any] = {
    "CLOCK": "django.utils.timezone.now",
    "RESOLVER": "statecharts.core.resolve.refuse_all",
    # The datamodel of a chart that declares none ("ecmascript" or "null"), recorded on the
    # chart's row when it is loaded: changing it later changes no stored chart.
    "DEFAULT_DATAMODEL": "ecmascript",
    # A syntax error in chart code found when a chart is loaded: "warning" (reported; the
    # spec lets a bad expression fail when it runs) or "error" (the chart is refused).
    "EXPRESSION_SYNTAX": "warning",
    "ROUND_BUDGET": 10_000,
    "SEND_BUDGET": 1_000,
    "STEP_TIME_BUDGET_MS": 5_000,
    "FOREACH_BUDGET": 100_000,
    "EFFECT_BUDGET": 10_000,
    "LOG_BYTES_BUDGET": 1_000_000,
    "DELAYED_SENDS_BUDGET": 1_000,
    "POSITION_BUDGET_BYTES": 1_000_000,
    # What one step's effects carry, as JSON (event data of its sends, timers included; log
    # values; invoke params; donedata): over it the step is halted like the other budgets.
    "OUTPUT_BYTES_BUDGET": 2_000_000,
    "STEP_CLOCK": "time.monotonic",
    "TIME_LIMIT_MS": 500,
    "MEMORY_LIMIT_BYTES": 64 * 1024 * 1024,
    "OUTBOX_BATCH": 1_000,
    # Outbox messages the process that ran a step delivers right after it (and what those
    # deliveries send in turn): more stay pending for the sweeper, so a caller never waits
    # for a long chain (a ping-pong between two executions). Order per (sender, target) is
    # kept (statecharts.stepper.delivery).
    "INLINE_DELIVERIES": 20,
    "OUTBOX_SWEEP_AGE_SECONDS": 5,
    # PostgreSQL (psycopg 3): the stepper's own per-step statements (the lock, the UPDATE and
    # INSERT) run as server-side prepared statements. False behind a pooler that cannot keep
    # them: PgBouncer before 1.21, or any transaction-mode pooler without prepared statement
    # support (docs/deployment.md).
    "PREPARED_STATEMENTS": True,
    # Instruction kind -> dotted path of a performer (statecharts.stepper.register_performer):
    # overrides what the apps register; None disables one (it is then recorded as unhandled).
    "PERFORMERS": {},
    # Deprecated (a system check warns): the same by effect kind, with the old signature.
    "EFFECT_HANDLERS": {},
    # Retention (statecharts.operations.retention): how many days rows are kept; None keeps them
    # forever.
    # Nothing of an execution that may still step is ever pruned, nor an unsettled row.
    "EXECUTION_RETENTION_DAYS": None,
    "HISTORY_RETENTION_DAYS": None,
    "OUTBOX_RETENTION_DAYS": 30,
    "PRUNE_BATCH": 500,
    "PRUNE_TASK_SECONDS": 300,
    "PRUNE_SCHEDULED": True,
    # Health (statecharts.operations.health): thresholds by figure name, overriding the apps'
    # defaults.
    "HEALTH_THRESHOLDS": {},
    # Telemetry (docs/telemetry.md): True sends spans and metrics through the OpenTelemetry
    # API (statecharts.telemetry.otel; needs the `opentelemetry` extra). Read at start-up.
    "OPENTELEMETRY": False,
    # Chart migration (statecharts.operations.chart_migration): datamodel transforms a plan may
    # name,
    # name -> dotted path (or callable) of f(datamodel, context) -> datamodel.
    "MIGRATION_TRANSFORMS": {},
}

SettingsCheck = Callable[[Mapping[str, Any]], list[CheckMessage]]


@dataclass(frozen=True, slots=True)
class SettingsGroup:
    owner: str  # the app label that owns these keys
    defaults: Mapping[str, Any]
    check: SettingsCheck | None = None


_groups: dict[str, SettingsGroup] = {}


def register_settings(
    owner: str, defaults: Mapping[str, Any], check: SettingsCheck | None = None
) -> None:
    """Make ``defaults`` keys of ``STATECHARTS`` known, owned by the app ``owner``.

    ``check(configured)`` runs in ``manage.py check`` with the configured ``STATECHARTS``
    dict and returns check messages. Registering the same owner again replaces its group; a
    key owned by another app is refused.
    """
    for other in _groups.values():
        clash = set(other.defaults) & set(defaults)
        if other.owner != owner and clash:
            raise ValueError(f"STATECHARTS keys {sorted(clash)} already belong to {other.owner}")
    _groups[owner] = SettingsGroup(owner, dict(defaults), check)
    statecharts_settings.forget()


def registered_groups() -> list[SettingsGroup]:
    return list(_groups.values())


def all_defaults() -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for group in _groups.values():
        merged.update(group.defaults)
    return merged


class StatechartsSettings:
    """``statecharts_settings.KEY``: the configured value, else the owning app's default.

    A value read is kept as an instance attribute (so the next read of it is a plain
    attribute lookup, and ``__getattr__`` runs only on the first) until :meth:`forget`, which
    the ``setting_changed`` signal for ``STATECHARTS`` and :func:`register_settings` call.
    """

    def __getattr__(self, name: str) -> Any:
        for group in _groups.values():
            if name in group.defaults:
                configured: dict[str, Any] = getattr(settings, "STATECHARTS", {}) or {}
                value = configured.get(name, group.defaults[name])
                self.__dict__[name] = value
                return value
        raise AttributeError(f"unknown STATECHARTS setting {name!r}")

    def forget(self) -> None:
        """Drop every value kept: the next reads go to ``settings`` again."""
        self.__dict__.clear()

    def imported(self, name: str) -> Any:
        """The setting ``name``, imported if it is a dotted path (kept like the values)."""
        key = " imported " + name  # (not a key: no setting name has a space)
        found = self.__dict__.get(key)
        if found is None:
            value = getattr(self, name)
            found = self.__dict__[key] = import_string(value) if isinstance(value, str) else value
        return found

    def clock(self) -> Callable[[], datetime]:
        return self.imported("CLOCK")  # type: ignore[no-any-return]

    def now(self) -> datetime:
        return self.clock()()


statecharts_settings = StatechartsSettings()


def _on_setting_changed(*, setting: str, **_signal: Any) -> None:
    if setting == "STATECHARTS":
        statecharts_settings.forget()


setting_changed.connect(_on_setting_changed, dispatch_uid="statecharts.conf")
register_settings("statecharts", DEFAULTS)
