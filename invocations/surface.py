"""What the invocations app adds to the statecharts app's displays (``statecharts`` itself
never imports ``invocations``): the read model's ``invocations`` section, the admin page's
panel, the API's ``invocations`` field and ``/api/invocations/`` endpoints, and the
``invocations:`` lines of ``statechart show``."""

from __future__ import annotations

from typing import Any

from invocations.inspection import invocations_document, invocations_lines, read_invocations
from statecharts import extensions

APP = "invocations"


def _field() -> Any:
    from invocations.api import InvocationsField

    return InvocationsField()


def _viewset() -> Any:
    from invocations.api import InvocationViewSet

    return InvocationViewSet


def register() -> None:
    extensions.register(
        extensions.Section(
            app=APP,
            name="invocations",
            read=read_invocations,
            document=invocations_document,
            lines=invocations_lines,
            invoking=lambda section: section.active_states,
        ),
        extensions.Panel(
            app=APP,
            section="invocations",
            title="Invocations",
            template="invocations/admin/invocations_panel.html",
            order=20,
        ),
        extensions.ExecutionField(app=APP, name="invocations", field=_field),
        extensions.Endpoint(
            app=APP,
            prefix="invocations",
            basename="invocation",
            viewset=_viewset,
            enum_names={"InvocationStatusEnum": "invocations.models.InvocationStatus"},
        ),
    )
