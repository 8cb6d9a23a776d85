"""``<invoke src="chart:NAME">``: the latest stored version (the one rule of "latest"), or
``chart:NAME@VERSION``; resolved when the ``<invoke>`` runs and recorded on the invocation."""

from __future__ import annotations

import pytest

from invocations.models import Invocation
from statecharts.models import Chart
from statecharts.testing import Workbench

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0"'


def payment(answer: str) -> str:
    return f"""<scxml {NS} name="payment" initial="p">
  <state id="p"><onentry><send target="#_parent" event="{answer}"/></onentry></state>
</scxml>"""


def parent(src: str) -> str:
    return f"""<scxml {NS} initial="a">
  <state id="a">
    <invoke id="pay" src="{src}"/>
    <transition event="v1" target="got_v1"/>
    <transition event="v2" target="got_v2"/>
  </state>
  <final id="got_v1"/>
  <final id="got_v2"/>
</scxml>"""


@pytest.mark.django_db
def test_the_latest_version_or_the_one_named(statecharts: Workbench) -> None:
    first = Chart.objects.load(payment("v1"))
    latest = Chart.objects.load(payment("v2"), new_version=True)
    assert (first.version, latest.version) == ("1", "2")

    execution = statecharts.start(parent("chart:payment"))
    assert execution.configuration == ["got_v2"]
    assert Invocation.objects.get(parent=execution).chart_id == latest.pk

    pinned = statecharts.start(parent("chart:payment@1"))
    assert pinned.configuration == ["got_v1"]
    assert Invocation.objects.get(parent=pinned).chart_id == first.pk


@pytest.mark.django_db
def test_an_unknown_chart_or_version_is_an_error_in_the_parent(statecharts: Workbench) -> None:
    Chart.objects.load(payment("v1"))
    execution = statecharts.start(parent("chart:payment@7"))
    assert execution.configuration == ["a"]
    invocation = Invocation.objects.get(parent=execution)
    assert invocation.status == "failed"
    assert invocation.reason == (
        "chart:payment@7: chart 'payment' has no version '7' (its versions: 1)"
    )
