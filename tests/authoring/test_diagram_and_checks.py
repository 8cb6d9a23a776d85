"""``statechart diagram`` writes the admin's SVG; the new settings are checked at start-up."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from statecharts import stepper
from statecharts.checks import check_settings
from statecharts.diagram import render_svg
from statecharts.models import Chart

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0"'
FLOW = f"""<scxml {NS} name="flow" initial="idle">
  <state id="idle"><transition event="go" target="busy"/></state>
  <state id="busy"><transition event="stop" target="done"/></state>
  <final id="done"/>
</scxml>"""


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("statechart", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_diagram_writes_the_svg_the_admin_shows() -> None:
    chart = Chart.objects.load(FLOW)
    by_name = run("diagram", "flow")
    assert by_name.rstrip("\n") == render_svg(chart.compiled()).rstrip("\n")
    assert by_name.startswith("<svg") and 'data-state="busy"' in by_name
    assert run("diagram", str(chart.pk)) == by_name
    execution = stepper.start(chart)
    stepper.send(execution, "go")
    highlighted = run("diagram", "flow", "--execution", str(execution.pk))
    assert highlighted.rstrip("\n") == render_svg(chart.compiled(), active=["busy"]).rstrip("\n")
    assert highlighted != by_name


@pytest.mark.django_db
def test_diagram_refuses_what_it_cannot_draw() -> None:
    with pytest.raises(CommandError, match="no chart"):
        run("diagram", "missing")
    chart = Chart.objects.load(FLOW)
    other = stepper.start(Chart.objects.load(FLOW.replace('name="flow"', 'name="other"')))
    with pytest.raises(CommandError, match=f"runs chart {other.chart_id}, not {chart.pk}"):
        run("diagram", "flow", "--execution", str(other.pk))


def test_the_new_settings_take_one_of_their_words() -> None:
    with override_settings(
        STATECHARTS={"DEFAULT_DATAMODEL": "python", "EXPRESSION_SYNTAX": "loud"}
    ):
        problems = [p for p in check_settings() if p.id == "statecharts.E030"]
    assert [p.msg for p in problems] == [
        "STATECHARTS['DEFAULT_DATAMODEL'] must be one of 'ecmascript', 'null'.",
        "STATECHARTS['EXPRESSION_SYNTAX'] must be one of 'warning', 'error'.",
    ]
    with override_settings(STATECHARTS={"DEFAULT_DATAMODEL": "null"}):
        assert not [p for p in check_settings() if p.id == "statecharts.E030"]


def test_the_switches_take_only_true_or_false() -> None:
    # "false" is a truthy string: taken as is it would turn prepared statements on silently.
    with override_settings(STATECHARTS={"PREPARED_STATEMENTS": "false", "OPENTELEMETRY": 0}):
        problems = [p for p in check_settings() if p.id == "statecharts.E031"]
    assert [p.msg for p in problems] == [
        "STATECHARTS['PREPARED_STATEMENTS'] must be True or False.",
        "STATECHARTS['OPENTELEMETRY'] must be True or False.",
    ]
    with override_settings(STATECHARTS={"PREPARED_STATEMENTS": False, "OPENTELEMETRY": False}):
        assert not [p for p in check_settings() if p.id == "statecharts.E031"]
