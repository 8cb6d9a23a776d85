"""A statechart on the host's own model: ``flow = StatechartField("order")``.

The field is a one-to-one relation from the host's row to its :class:`~statecharts.models.
Execution` (the column lives in the host's table: a reusable app cannot declare a foreign key
to a model it does not know in its own migrations), with a reverse accessor on the execution
(``execution.order``). The execution's ``subject`` is set to the same object, so the generic
relation (``Execution.objects.for_subject``, ``ExecutionsInline``) sees it too.

- ``start="on_save"`` (the default): the execution of the latest version of the chart starts
  on the object's first save, inside the caller's transaction (``stepper.start(joined=True)``):
  a rolled-back save leaves no execution, and what the start sent to other executions is
  delivered after the outer commit. ``start="lazy"``: it starts the first time ``obj.flow`` is
  read while the object has none. ``field.start_for(obj)`` starts one by hand (rows saved
  before the field existed, or by ``bulk_create``, which sends no ``post_save``).
- ``obj.flow`` is the execution: ``obj.flow.send("pay", data)``,
  ``obj.flow.available_events(user=...)``, ``obj.flow.in_state("paid")``.
- ``Order.objects.filter(flow__in_state="paid")``: a subquery of
  ``Execution.objects.in_state``; ``flow__status`` orders, filters and annotates as any join.
- ``on_instance_delete="cancel"`` (the default): deleting the object (``obj.delete()``, a
  queryset's ``delete()``, a cascade) cancels its execution once the delete commits;
  ``"protect"``: the delete is refused (``ProtectedError``) while the execution is live. A
  ``pre_delete`` receiver does it, so Django never takes its fast-delete path for the model.
  Rows deleted by raw SQL leave their executions running: the health figure
  ``executions.orphaned`` counts them.
- ``manage.py check`` refuses (``statecharts.E011``) a host model routed to another database
  than the one steps write to: the start joins the host's transaction, which is one database.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from django.core import checks
from django.db import models, router, transaction
from django.db.models.deletion import ProtectedError
from django.db.models.fields.related_descriptors import ForwardOneToOneDescriptor
from django.db.models.lookups import Lookup
from django.db.models.signals import class_prepared, post_save, pre_delete

__all__ = ["CANCEL", "LAZY", "ON_SAVE", "PROTECT", "StatechartField", "statechart_fields"]

log = logging.getLogger(__name__)

ON_SAVE = "on_save"
LAZY = "lazy"
STARTS = (ON_SAVE, LAZY)
CANCEL = "cancel"
PROTECT = "protect"
ON_INSTANCE_DELETE = (CANCEL, PROTECT)


class StartingDescriptor(ForwardOneToOneDescriptor):
    """``obj.flow``: the execution; with ``start="lazy"``, started on the first read of an
    object that is saved and has none."""

    field: StatechartField

    def __get__(self, instance: Any, cls: Any = None) -> Any:
        if instance is None:
            return self
        execution = super().__get__(instance, cls)
        if (
            execution is None
            and self.field.start == LAZY
            and instance.pk is not None
            and not instance._state.adding
        ):
            execution = self.field.start_for(instance)
        return execution


class StatechartField(models.OneToOneField):  # type: ignore[type-arg]
    """The execution of the chart named ``chart`` about this object (module docstring).

    ``data``: a callable ``data(obj) -> dict`` giving the start's data (the chart's top-level
    ``<data>`` ids), read when it starts; it is not part of the migrations."""

    description = "the execution of a statechart about this object"
    forward_related_accessor_class = StartingDescriptor

    def __init__(
        self,
        chart: str,
        *,
        start: str = ON_SAVE,
        on_instance_delete: str = CANCEL,
        data: Callable[[Any], dict[str, Any] | None] | None = None,
        **kwargs: Any,
    ) -> None:
        if start not in STARTS:
            raise ValueError(f"StatechartField start must be one of {STARTS}, not {start!r}")
        if on_instance_delete not in ON_INSTANCE_DELETE:
            raise ValueError(
                f"StatechartField on_instance_delete must be one of {ON_INSTANCE_DELETE}, "
                f"not {on_instance_delete!r}"
            )
        self.chart = chart
        self.start = start
        self.on_instance_delete = on_instance_delete
        self.start_data = data
        kwargs["to"] = "statecharts.Execution"
        # The execution may be pruned (retention) long after it finished: the object stays.
        kwargs["on_delete"] = models.SET_NULL
        kwargs["null"] = True
        kwargs.setdefault("blank", True)
        kwargs.setdefault("editable", False)  # it changes through the stepper only
        super().__init__(**kwargs)

    def deconstruct(self) -> tuple[str, str, list[Any], dict[str, Any]]:
        name, _path, args, kwargs = super().deconstruct()
        for fixed in ("to", "on_delete", "null"):
            kwargs.pop(fixed, None)
        if kwargs.get("blank") is True:
            del kwargs["blank"]
        if kwargs.get("editable") is False:
            del kwargs["editable"]
        kwargs["chart"] = self.chart
        if self.start != ON_SAVE:
            kwargs["start"] = self.start
        if self.on_instance_delete != CANCEL:
            kwargs["on_instance_delete"] = self.on_instance_delete
        return name, "statecharts.fields.StatechartField", args, kwargs

    def start_for(self, instance: Any, *, user: Any = None) -> Any:
        """Start the execution of ``instance`` (a saved object) and link it, inside the
        caller's transaction if one is open; an object that has one already keeps it (the
        object's row is locked while it is decided). Returns the execution."""
        from statecharts import stepper
        from statecharts.models import Chart, Execution

        database = instance._state.db or router.db_for_write(self.model)
        rows = self.model._base_manager.using(database).filter(pk=instance.pk)
        with transaction.atomic(using=database):
            current = rows.select_for_update().values_list(self.attname, flat=True).first()
            if current is not None:
                execution = Execution.objects.using(database).get(pk=current)
            else:
                chart = Chart.objects.db_manager(database).latest_version(self.chart)
                if chart is None:
                    raise Chart.DoesNotExist(
                        f"{self.model._meta.label}.{self.name}: no chart named "
                        f"{self.chart!r} is loaded (manage.py statechart load)"
                    )
                data = self.start_data(instance) if self.start_data is not None else None
                execution = stepper.start(
                    chart, data=data, subject=instance, user=user, joined=True
                )
                rows.update(**{self.attname: execution.pk})
        setattr(instance, self.attname, execution.pk)
        self.set_cached_value(instance, execution)
        return execution

    # ---- checks -------------------------------------------------------------------------

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        return [*super().check(**kwargs), *self._check_database()]

    def _check_database(self) -> list[checks.CheckMessage]:
        from statecharts.models import Execution

        host = router.db_for_write(self.model)
        steps = router.db_for_write(Execution)
        if host == steps:
            return []
        return [
            checks.Error(
                f"{self.model._meta.label}.{self.name} is a StatechartField, but "
                f"{self.model._meta.label} is routed to database {host!r} and steps write "
                f"to {steps!r}.",
                hint="Route the host model to the database of the statecharts app: its "
                "execution starts inside the host's transaction, which is one database.",
                obj=self,
                id="statecharts.E011",
            )
        ]


def statechart_fields(model: type[models.Model]) -> list[StatechartField]:
    """The StatechartFields of ``model``, its parents' (multi-table) included."""
    return [field for field in model._meta.fields if isinstance(field, StatechartField)]


# ---- the lookup -----------------------------------------------------------------------------


@StatechartField.register_lookup
class InState(Lookup):  # type: ignore[type-arg]
    """``flow__in_state="paid"``: the rows whose execution has ``paid`` active, a subquery of
    ``Execution.objects.in_state`` (whatever index that uses, now or later)."""

    lookup_name = "in_state"
    prepare_rhs = False

    def get_prep_lookup(self) -> Any:
        if not isinstance(self.rhs, str):
            raise TypeError(f"in_state takes a state id, not {self.rhs!r}")
        return self.rhs

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        from statecharts.models import Execution

        lhs_sql, lhs_params = self.process_lhs(compiler, connection)
        executions = Execution.objects.using(connection.alias).in_state(self.rhs)
        subquery_sql, subquery_params = executions.values("pk").query.get_compiler(
            connection=connection
        ).as_sql()
        return f"{lhs_sql} IN ({subquery_sql})", [*lhs_params, *subquery_params]


# ---- the receivers ----------------------------------------------------------------------------


def _start_on_first_save(
    sender: type[models.Model], instance: Any, created: bool, raw: bool, **kwargs: Any
) -> None:
    if raw or not created:  # (raw: loaddata writes rows as they were, execution links too)
        return
    for field in statechart_fields(sender):
        if field.start == ON_SAVE and getattr(instance, field.attname) is None:
            field.start_for(instance)


def _before_delete(sender: type[models.Model], instance: Any, using: str, **kwargs: Any) -> None:
    from statecharts.models import Execution
    from statecharts.statuses import LIVE_STATUSES

    for field in statechart_fields(sender):
        execution_id = getattr(instance, field.attname)
        if execution_id is None:
            continue
        live = (
            Execution.objects.using(using)
            .filter(pk=execution_id, status__in=LIVE_STATUSES)
            .exists()
        )
        if not live:
            continue
        if field.on_instance_delete == PROTECT:
            raise ProtectedError(
                f"{instance._meta.label} {instance.pk} cannot be deleted while its "
                f"{field.name} execution {execution_id} is active "
                f"({field.name}: on_instance_delete='protect')",
                {instance},
            )
        reason = f"{instance._meta.label} {instance.pk} was deleted"
        transaction.on_commit(
            partial(_cancel_after_delete, execution_id, reason), using=using, robust=True
        )


def _cancel_after_delete(execution_id: int, reason: str) -> None:
    from statecharts import stepper

    stepper.cancel(execution_id, reason=reason)


def _connect(sender: type[models.Model], **kwargs: Any) -> None:
    """Every concrete model with a StatechartField (its own, a parent's, or its concrete
    model's for a proxy) gets the receivers, for itself as the signals' sender."""
    if sender._meta.abstract or not statechart_fields(sender):
        return
    uid = f"statecharts.fields:{sender._meta.label}"
    post_save.connect(_start_on_first_save, sender=sender, weak=False, dispatch_uid=uid)
    pre_delete.connect(_before_delete, sender=sender, weak=False, dispatch_uid=uid)


class_prepared.connect(_connect, weak=False, dispatch_uid="statecharts.fields")
