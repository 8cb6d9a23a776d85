"""Health: the figures an operator watches, from every app, with thresholds.

``manage.py statechart health`` (``--json`` for monitoring) prints them and exits 0 when every
figure is ok, 1 when one is at its warning threshold, 2 when one is critical (the convention
of Nagios-style monitoring plugins). Each app contributes its own figures by registering a
:class:`HealthCheck` from its ``AppConfig.ready()`` (``statecharts`` imports no other app)::

    from statecharts.operations import health

    health.register(health.HealthCheck(app="timers", name="timers", measure=measure))

``measure(now)`` returns :class:`Figure` s: a name (``timers.oldest_overdue_seconds``), a
value, and default thresholds (a figure at or above ``warning`` is a warning, at or above
``critical`` is critical; None: never). ``STATECHARTS["HEALTH_THRESHOLDS"]`` overrides them
by figure name::

    STATECHARTS = {"HEALTH_THRESHOLDS": {"timers.oldest_overdue_seconds": {"warning": 30}}}

A check that raises is reported as a critical figure ``<name>.check`` with the error, and
the others are still measured. Every measure only reads.

The ``statecharts`` app's own figures: executions by status (and ``executions.held``: halted
or needing migration or repair), the outbox (pending, the oldest pending message's age,
messages whose delivery raised, undeliverable ones), its django-q2 schedules' liveness
(:func:`schedule_figure`: how late a schedule's next run is, and how its last run ended), and
``executions.orphaned``: live executions of a ``StatechartField`` whose object is gone (deleted
by raw SQL, which no receiver sees).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from django.apps import apps
from django.db import connections
from django.db.models import Count, Min

from statecharts.conf import statecharts_settings
from statecharts.models import Execution, OutboxMessage
from statecharts.models.outbox import OutboxStatus
from statecharts.statuses import TABLE, ExecutionStatus, InputRule

logger = logging.getLogger(__name__)


class Level(StrEnum):
    OK = "ok"
    WARNING = "warning"
    CRITICAL = "critical"

    @property
    def exit_code(self) -> int:
        return {Level.OK: 0, Level.WARNING: 1, Level.CRITICAL: 2}[self]

    @property
    def rank(self) -> int:
        return self.exit_code


@dataclass(frozen=True, slots=True)
class Figure:
    """One measured figure. ``level`` forces a level whatever the value (a schedule that is
    missing has no value to compare)."""

    name: str
    value: int | float | None
    unit: str = ""
    detail: str = ""
    warning: float | None = None
    critical: float | None = None
    level: Level | None = None


@dataclass(frozen=True, slots=True)
class HealthCheck:
    app: str
    name: str
    measure: Callable[[datetime], list[Figure]]


_checks: dict[str, HealthCheck] = {}


def register(check: HealthCheck) -> None:
    """Register an app's check (from ``AppConfig.ready()``); the same name again replaces it."""
    _checks[check.name] = check


def checks() -> list[HealthCheck]:
    return [check for check in _checks.values() if apps.is_installed(check.app)]


@dataclass(frozen=True, slots=True)
class Assessed:
    figure: Figure
    level: Level
    warning: float | None
    critical: float | None

    def document(self) -> dict[str, Any]:
        figure = self.figure
        return {
            "name": figure.name,
            "value": figure.value,
            "unit": figure.unit,
            "level": str(self.level),
            "detail": figure.detail,
            "thresholds": {"warning": self.warning, "critical": self.critical},
        }


@dataclass(frozen=True, slots=True)
class HealthReport:
    checked_at: datetime
    figures: list[Assessed] = field(default_factory=list)

    @property
    def level(self) -> Level:
        levels = [assessed.level for assessed in self.figures]
        return max(levels, key=lambda level: level.rank, default=Level.OK)

    def document(self) -> dict[str, Any]:
        return {
            "status": str(self.level),
            "checked_at": self.checked_at.isoformat(),
            "figures": [assessed.document() for assessed in self.figures],
        }


def thresholds_for(figure: Figure, overrides: Mapping[str, Any]) -> tuple[Any, Any]:
    configured = overrides.get(figure.name)
    if not isinstance(configured, Mapping):
        return figure.warning, figure.critical
    return (
        configured.get("warning", figure.warning),
        configured.get("critical", figure.critical),
    )


def level_of(value: Any, warning: Any, critical: Any) -> Level:
    if value is None:
        return Level.OK
    if critical is not None and value >= critical:
        return Level.CRITICAL
    if warning is not None and value >= warning:
        return Level.WARNING
    return Level.OK


def assess(now: datetime | None = None) -> HealthReport:
    """Measure every registered check and assess each figure against its thresholds."""
    now = now or statecharts_settings.now()
    overrides = statecharts_settings.HEALTH_THRESHOLDS or {}
    report = HealthReport(now)
    for check in checks():
        try:
            figures = check.measure(now)
        except Exception as exc:  # an app's check: reported, the others still measured
            logger.exception("the %r health check failed", check.name)
            figures = [
                Figure(
                    f"{check.name}.check",
                    None,
                    detail=f"could not be measured: {type(exc).__name__}: {exc}",
                    level=Level.CRITICAL,
                )
            ]
        for figure in figures:
            warning, critical = thresholds_for(figure, overrides)
            level = figure.level or level_of(figure.value, warning, critical)
            report.figures.append(Assessed(figure, level, warning, critical))
    return report


# ---- django-q2 schedules ----------------------------------------------------------------------


def schedule_figure(
    name: str, slug: str, now: datetime | None = None, *, using: str | None = None
) -> Figure:
    """The liveness of the django-q2 schedule ``name``, as the figure
    ``schedules.<slug>.late_seconds``: how long ago its next run was due (0 when it is not
    due yet). A cluster whose scheduler runs keeps it near 0; a stopped cluster lets it grow
    (warning at 120 s, critical at 600 s). A schedule that does not exist is critical; one
    whose last run failed is at least a warning. Without django-q2 installed nothing is
    scheduled: the figure says so (ok: sweeping is then the host's business)."""
    figure_name = f"schedules.{slug}.late_seconds"
    if not apps.is_installed("django_q"):
        return Figure(
            figure_name, None, detail="django-q2 is not installed: nothing is scheduled here"
        )
    from statecharts.stepper import database

    using = using or database()
    if "django_q_schedule" not in connections[using].introspection.table_names():
        return Figure(
            figure_name, None, detail="django-q2 is not migrated", level=Level.CRITICAL
        )
    from django_q.models import Schedule, Task

    schedule = Schedule.objects.using(using).filter(name=name).first()
    if schedule is None:
        return Figure(
            figure_name,
            None,
            detail=f"the schedule {name!r} does not exist (see docs/operations.md)",
            level=Level.CRITICAL,
        )
    now = now or statecharts_settings.now()
    late = 0.0
    if schedule.next_run is not None and schedule.next_run < now:
        late = round((now - schedule.next_run).total_seconds(), 1)
    detail = f"{name!r}: next run {_when(schedule.next_run)}"
    level = None
    last = Task.objects.using(using).filter(id=schedule.task).first() if schedule.task else None
    if last is None:
        detail += "; no run recorded yet"
    else:
        outcome = "succeeded" if last.success else f"failed: {str(last.result)[:200]}"
        detail += f"; last run {_when(last.stopped)} {outcome}"
        if not last.success:
            level = Level.WARNING
    return Figure(
        figure_name, late, "s", detail, warning=120, critical=600, level=level
    )


def _when(value: datetime | None) -> str:
    return value.isoformat(timespec="seconds") if value is not None else "(never)"


# ---- the statecharts app's own figures --------------------------------------------------------

HELD = [s for s, rules in TABLE.items() if rules.inputs is InputRule.REFUSE]


def measure_executions(now: datetime) -> list[Figure]:
    counts = dict(
        Execution.objects.order_by().values_list("status").annotate(n=Count("id")).values_list(
            "status", "n"
        )
    )
    figures = [
        Figure(f"executions.{status.value}", counts.get(status.value, 0), "executions")
        for status in ExecutionStatus
    ]
    held = sum(counts.get(str(status), 0) for status in HELD)
    figures.append(
        Figure(
            "executions.held",
            held,
            "executions",
            "halted, needing migration or needing repair: an operator's attention "
            "(docs/durable-executions.md, statuses)",
            warning=1,
        )
    )
    return figures


def measure_outbox(now: datetime) -> list[Figure]:
    pending = OutboxMessage.objects.pending()
    found = pending.aggregate(n=Count("id"), oldest=Min("created"))
    oldest = found["oldest"]
    age = round((now - oldest).total_seconds(), 1) if oldest is not None else 0.0
    first = pending.order_by("created", "id").first() if oldest is not None else None
    raising = pending.exclude(last_error="").count()
    return [
        Figure("outbox.pending", found["n"], "messages"),
        Figure(
            "outbox.oldest_pending_seconds",
            max(age, 0.0),
            "s",
            f"message {first.pk} ({first}), written {_when(first.created)}" if first else "",
            warning=300,
            critical=3600,
        ),
        Figure(
            "outbox.failing",
            raising,
            "messages",
            "pending messages whose delivery raised (last_error says why)",
            warning=1,
        ),
        Figure(
            "outbox.undeliverable",
            OutboxMessage.objects.filter(status=OutboxStatus.UNDELIVERABLE).count(),
            "messages",
            "their senders were told error.communication; the admin can retry them",
        ),
    ]


def measure_orphans(now: datetime) -> list[Figure]:
    """Live executions started by a host model's ``StatechartField`` (their subject is of
    that model, their chart the field's) that no row of the model links to any more."""
    from django.contrib.contenttypes.models import ContentType
    from django.db.models import Exists, OuterRef, Q

    from statecharts.fields import statechart_fields

    orphaned = 0
    examples: list[str] = []
    for model in apps.get_models():
        fields = [one for one in statechart_fields(model) if one.model is model]
        if not fields:  # (a proxy's or a child's fields belong to its concrete parent)
            continue
        linked = Q()
        for one in fields:
            linked |= Q(Exists(model._base_manager.filter(**{one.attname: OuterRef("pk")})))
        count = (
            Execution.objects.active()
            .filter(
                subject_content_type=ContentType.objects.get_for_model(model),
                chart__name__in=sorted({one.chart for one in fields}),
            )
            .exclude(linked)
            .count()
        )
        orphaned += count
        if count:
            examples.append(f"{model._meta.label}: {count}")
    return [
        Figure(
            "executions.orphaned",
            orphaned,
            "executions",
            "live executions of a StatechartField whose object was deleted without its "
            "receivers (raw SQL): " + (", ".join(examples) or "none"),
            warning=1,
        )
    ]


def measure_schedules(now: datetime) -> list[Figure]:
    from statecharts.operations.retention import SCHEDULE_NAME as PRUNE
    from statecharts.stepper.sweeper import SCHEDULE_NAME as OUTBOX_SWEEP

    return [
        schedule_figure(OUTBOX_SWEEP, "outbox_sweep", now),
        schedule_figure(PRUNE, "prune", now),
    ]


register(HealthCheck("statecharts", "executions", measure_executions))
register(HealthCheck("statecharts", "outbox", measure_outbox))
register(HealthCheck("statecharts", "schedules", measure_schedules))
register(HealthCheck("statecharts", "orphans", measure_orphans))
