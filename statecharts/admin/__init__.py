"""The admin: charts (add by pasting SCXML; read-only afterwards), executions (read-only, with
their diagram, datamodel, history, the panels other apps contribute, and actions that go
through the stepper), and the machine-owned rows (history, outbox) read-only.

No model form ever changes an execution: sending an event, cancelling and starting go through
``statecharts.stepper``, exactly like the API and the management command. What an execution
page shows is the read model (``statecharts.operations.inspection``), the one the API and
``statechart show`` display; other apps add panels to it through ``statecharts.extensions``
(the timers app adds its timers panel), so this package imports none of them.

A module per page group (Django's admin autodiscovery imports this package, and importing it
registers them all):

- ``charts``: the charts' list and page, adding a chart, starting an execution;
- ``executions``: the executions' list and page; its bulk actions in ``cancelling`` (cancel,
  trace), ``migration`` and ``erasure``; its send and cancel forms in ``steps``;
- ``history``, ``outbox``: the machine-owned rows;
- ``subjects``: between an execution and the object it is about (:class:`ExecutionsInline`
  for a host's own admin);
- shared: ``bases`` (the admins' base classes), ``actions`` (bulk actions' confirmation
  page), ``steps`` (who acts, how refusals are reported), ``forms``.

The names other apps build their admins on (the timers, invocations and routes apps) are
importable from here.
"""

from __future__ import annotations

from statecharts.admin.actions import (
    MAX_BULK_ROWS,
    ConfirmRow,
    confirm_action,
    confirmed,
    too_many,
)
from statecharts.admin.bases import ReadOnlyAdmin, TextOnlyQueries
from statecharts.admin.charts import ChartAdmin, diagram
from statecharts.admin.executions import ExecutionAdmin, InStateFilter
from statecharts.admin.history import HistoryEntryAdmin
from statecharts.admin.host import StatechartFieldAdminMixin
from statecharts.admin.outbox import OutboxMessageAdmin
from statecharts.admin.steps import caller_context, report_form_errors, report_refusal
from statecharts.admin.subjects import ExecutionsInline, subject_link

__all__ = [
    "MAX_BULK_ROWS",
    "ChartAdmin",
    "ConfirmRow",
    "ExecutionAdmin",
    "ExecutionsInline",
    "HistoryEntryAdmin",
    "InStateFilter",
    "OutboxMessageAdmin",
    "ReadOnlyAdmin",
    "StatechartFieldAdminMixin",
    "TextOnlyQueries",
    "caller_context",
    "confirm_action",
    "confirmed",
    "diagram",
    "report_form_errors",
    "report_refusal",
    "subject_link",
    "too_many",
]
