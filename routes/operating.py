"""An operator's record of an in-doubt route delivery's fate: mark it delivered or failed.

A route delivery is "in doubt" when its key was claimed more than ``ROUTE_IN_DOUBT_SECONDS``
ago and never settled: the worker died between the ledger write and the end of the outside
action, and nobody knows whether it happened. Routes are at most once, so nothing retries it.
Once the operator has checked the destination, they record what happened: ``delivered`` or
``failed``. That only records the fate: nothing is delivered again, and the sender is not
told (it was not told at the time either: the worker died before it could be).

Each mark is one transaction under the execution's lock (``stepper.lock``), decided again
under it (only a delivery still claimed and in doubt is marked: one claimed more recently may
still be in flight), and recorded as the execution's next history entry (disposition
``operated``, ``stepper.record_operation``: the action, the delivery, the reason the operator
typed, the caller context). A delivery that is not in doubt is refused with
:class:`NotInDoubt`, a ``StepRefused`` (the refusal table's ``refused`` row); one that does
not exist is ``RouteDelivery.DoesNotExist`` (``not_found``). Each mark has its own
permission (:data:`PERMISSIONS`), checked by the doors: the admin (``routes.admin``), the API
(``routes.api``) and ``manage.py route_delivery``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db import transaction

from routes import telemetry as route_telemetry
from routes.conf import route_settings
from routes.models import DeliveryStatus, RouteDelivery
from statecharts import stepper
from statecharts.exceptions import StepRefused
from statecharts.models import Execution

REASON_MAX_LENGTH = 300
# The fates an operator may record, by the action's name.
MARKS = {"mark_delivered": DeliveryStatus.DELIVERED, "mark_failed": DeliveryStatus.FAILED}
PERMISSIONS = {
    "mark_delivered": "routes.mark_delivered_routedelivery",
    "mark_failed": "routes.mark_failed_routedelivery",
}


class NotInDoubt(StepRefused):
    """The delivery is settled, or claimed too recently to be in doubt."""


def mark(
    delivery_id: int,
    action: str,
    *,
    reason: str,
    caller_context: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> str:
    """Record an in-doubt delivery's fate (``action``: ``mark_delivered`` or
    ``mark_failed``); returns the status it now has."""
    status = MARKS[action]
    # The stepper's gate checks the reason (required, not blank, fits, no NUL), as it does
    # for every operator action (docs/durable-executions.md, "Data from outside").
    text = reason.strip() if isinstance(reason, str) else reason
    stepper.admit(stepper.OperatorRequest(reason=text, max_length=REASON_MAX_LENGTH))
    database = stepper.database()
    when = now or route_settings.now()
    rows = RouteDelivery.objects.using(database)
    execution_id = rows.filter(pk=delivery_id).values_list("execution_id", flat=True).first()
    if execution_id is None:
        raise RouteDelivery.DoesNotExist(f"route delivery {delivery_id} does not exist")
    with transaction.atomic(using=database, durable=True):
        try:
            execution: Execution | None = stepper.lock(execution_id)
        except Execution.DoesNotExist:
            execution = None  # (its deliveries outlive it: the fate is still recorded)
        delivery = rows.select_for_update().get(pk=delivery_id)
        _refuse_unless_in_doubt(delivery, when)
        rows.filter(pk=delivery_id, status=DeliveryStatus.CLAIMED).update(
            status=status,
            reason=f"marked {status} by an operator: {text}"[:2000],
            settled=when,
        )
        route_telemetry.marked(delivery, status, text, execution and execution.session_id)
        if execution is not None:
            stepper.record_operation(
                execution,
                action=action,
                row={"route_delivery": delivery_id, "key": delivery.key, "outcome": status},
                reason=text,
                now=when,
                caller_context=caller_context,
            )
    return str(status)


def _refuse_unless_in_doubt(delivery: RouteDelivery, now: datetime) -> None:
    if delivery.status != DeliveryStatus.CLAIMED:
        raise NotInDoubt(
            f"route delivery {delivery.pk} is {delivery.status}: only a delivery in doubt can "
            "be marked"
        )
    seconds = route_settings.ROUTE_IN_DOUBT_SECONDS
    if delivery.created >= now - timedelta(seconds=seconds):
        raise NotInDoubt(
            f"route delivery {delivery.pk} was claimed less than {seconds} s ago "
            "(ROUTE_IN_DOUBT_SECONDS): it may still be in flight"
        )
