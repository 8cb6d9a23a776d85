"""What the timers app adds to the statecharts app's displays, registered from
``TimersConfig.ready()`` (``statecharts`` itself never imports ``timers``):

- the read model's ``timers`` section (``timers.inspection``): pending and settled timers;
- the admin execution page's timers panel (``timers/admin/timers_panel.html``);
- the API's ``pending_timers`` field of an execution, and the ``/api/timers/`` endpoints
  (``timers.api``), with the operator's actions, and ``/api/route-timers/``;
- the ``timers:`` lines of ``manage.py statechart show`` (from the section).
"""

from __future__ import annotations

from typing import Any

from statecharts import extensions
from timers.inspection import read_timers, timers_document, timers_lines

APP = "timers"


def _pending_timers_field() -> Any:
    from timers.api import PendingTimersField

    return PendingTimersField()


def _timer_viewset() -> Any:
    from timers.api import TimerViewSet

    return TimerViewSet


def _route_timer_viewset() -> Any:
    from timers.api import RouteTimerViewSet

    return RouteTimerViewSet


def register() -> None:
    extensions.register(
        extensions.Section(
            app=APP,
            name="timers",
            read=read_timers,
            document=timers_document,
            lines=timers_lines,
        ),
        extensions.Panel(
            app=APP,
            section="timers",
            title="Timers",
            template="timers/admin/timers_panel.html",
            order=10,
        ),
        extensions.ExecutionField(app=APP, name="pending_timers", field=_pending_timers_field),
        extensions.Endpoint(
            app=APP,
            prefix="timers",
            basename="timer",
            viewset=_timer_viewset,
            # Three fields are called "status" with different choices: name this set.
            enum_names={"TimerStatusEnum": "timers.models.TimerStatus"},
        ),
        extensions.Endpoint(
            app=APP, prefix="route-timers", basename="route-timer", viewset=_route_timer_viewset
        ),
    )
