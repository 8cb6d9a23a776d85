"""The admin's execution page (its send form's available events, its diagram, its hints)
stays linear in the chart (issue 28: 2.8 s -> 70 s for 2,000 -> 10,000 guarded transitions).
Counted, not timed: the calls ``sys.setprofile`` sees in the whole request, as the chart
doubles."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from statecharts import stepper
from statecharts.admin.forms import TRUNCATED_NOTE
from statecharts.models import Chart, Execution
from tests.core.test_availability_scaling import (
    CALLS_PER_TRANSITION,
    DOOR_SHAPES,
    DOOR_SIZES,
    counting,
    prefix,
)

pytestmark = pytest.mark.django_db

SHAPES = DOOR_SHAPES
SIZES = DOOR_SIZES
# Calls of the page whatever the chart (Django, the admin, the diagram's fixed budgets), for
# the cap that stops a quadratic page before it runs long.
FIXED = 3_000_000


@pytest.fixture
def admin_client(client: Client) -> Client:
    client.force_login(User.objects.create_superuser("admin", "admin@example.com", "pw"))
    return client


def started(source: str, name: str) -> Execution:
    chart = Chart.objects.load(source.replace("<scxml ", f'<scxml name="{name}" ', 1))
    return stepper.start(chart)


def page(execution: Execution) -> str:
    return reverse("admin:statecharts_execution_change", args=[execution.pk])


@pytest.mark.parametrize("shape", SHAPES)
def test_the_change_page_is_linear_in_the_chart(admin_client: Client, shape: str) -> None:
    counted = []
    for n in SIZES:
        execution = started(SHAPES[shape](n), f"{shape}-{n}")
        admin_client.get(page(execution))  # warm: the compiled chart, the sandbox's checks
        with counting(CALLS_PER_TRANSITION * n + FIXED) as counts:
            response = admin_client.get(page(execution))
        assert response.status_code == 200
        counted.append(counts["calls"])
    # Doubling the chart at most doubles what it adds to the page (four times if quadratic).
    assert counted[2] - counted[1] <= 2.5 * (counted[1] - counted[0]), (shape, counted)


def test_the_send_form_marks_events_whose_list_was_cut_short(admin_client: Client) -> None:
    execution = started(prefix(2000), "prefix")
    html = admin_client.get(page(execution)).content.decode()
    assert TRUNCATED_NOTE.replace("'", "&#x27;") in html or TRUNCATED_NOTE in html
    # every name, its availability exact; the reasons of the first lists, then none
    assert ">a.0 (disabled: the guard is false now)<" in html  # (a whole list: unmarked)
    assert ">a.999 (disabled: cut short)<" in html
