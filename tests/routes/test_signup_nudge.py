"""The worked example of docs/routes.md, as the demo site ships it: a sign-up nudge e-mailed
three days after the invitation unless the invitee signed up (Django's locmem backend)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.core import mail
from django.test import override_settings

from routes.models import DeliveryStatus, RouteDelivery
from statecharts import stepper
from statecharts.models import Chart
from timers import firing

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "docs" / "examples" / "signup_nudge.scxml"
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
DAY = timedelta(days=1)


@pytest.fixture(autouse=True)
def email_route() -> Iterator[None]:
    from django.conf import settings

    from demo.settings.base import DEMO_ROUTES  # the demo site's routes

    with override_settings(
        STATECHARTS={**settings.STATECHARTS, "ROUTES": DEMO_ROUTES},
        EMAIL_BACKEND="django.core.mail.backends.locmem.EmailBackend",
    ):
        yield


def test_the_docs_show_the_example_chart_as_it_is() -> None:
    assert CHART.read_text() in (ROOT / "docs" / "routes.md").read_text()


def test_the_invitee_gets_one_nudge_after_three_days() -> None:
    chart = Chart.objects.load(CHART.read_text(), name="signup_nudge")
    stepper.start(chart, data={"email": "ada@example.com"}, now=T0)
    firing.fire_all_due(now=T0 + 3 * DAY - timedelta(seconds=1))
    assert mail.outbox == []
    firing.fire_all_due(now=T0 + 3 * DAY)
    firing.fire_all_due(now=T0 + 4 * DAY)
    assert [(m.to, m.subject) for m in mail.outbox] == [
        (["ada@example.com"], "Your invitation is waiting")
    ]
    assert RouteDelivery.objects.get().status == DeliveryStatus.DELIVERED


def test_signing_up_first_cancels_the_nudge() -> None:
    chart = Chart.objects.load(CHART.read_text(), name="signup_nudge")
    execution = stepper.start(chart, data={"email": "ada@example.com"}, now=T0)
    stepper.send(execution, "signed_up", now=T0 + DAY)
    firing.fire_all_due(now=T0 + 4 * DAY)
    assert mail.outbox == []
    delivery = RouteDelivery.objects.get()
    assert (delivery.status, delivery.reason) == (
        DeliveryStatus.CANCELLED, "cancelled by <cancel> in step 2",
    )
