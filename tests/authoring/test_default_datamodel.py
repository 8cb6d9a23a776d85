"""The datamodel of a chart that declares none is a setting (shipped: ecmascript), fixed on
the chart's row when it is loaded."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps as django_apps
from django.test import override_settings

from statecharts import stepper
from statecharts.core import ChartError, Interpreter, load_chart
from statecharts.core.datamodel.null import NullDatamodel
from statecharts.models import Chart
from statecharts.models.charts import STORED_DATAMODEL

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0"'

# Written for a tool whose datamodel is ECMAScript, without saying so.
UNDECLARED = f"""<scxml {NS} name="counter">
  <datamodel><data id="count" expr="0"/></datamodel>
  <state id="counting">
    <transition event="add" cond="_event.data.n &gt; 0">
      <assign location="count" expr="count + _event.data.n"/>
    </transition>
    <transition event="stop" target="done"/>
  </state>
  <final id="done"><donedata><param name="count" expr="count"/></donedata></final>
</scxml>"""

# No code at all: nothing for an engine to do.
CODE_FREE = f"""<scxml {NS} name="switch">
  <state id="off"><transition event="flip" target="on"/></state>
  <state id="on"><transition event="flip" target="off"/></state>
</scxml>"""


@pytest.mark.django_db
def test_a_chart_without_a_datamodel_attribute_runs_as_ecmascript() -> None:
    chart = Chart.objects.load(UNDECLARED)
    assert chart.datamodel == "ecmascript" and chart.load_warnings == []
    execution = stepper.start(chart)
    stepper.send(execution, "add", {"n": 2})
    stepper.send(execution, "add", {"n": 3})
    stepper.send(execution, "stop")
    execution.refresh_from_db()
    assert execution.donedata == {"count": 5}


@pytest.mark.django_db
def test_the_api_shows_the_datamodel_a_chart_was_loaded_with() -> None:
    from django.contrib.auth.models import User
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(User.objects.create_superuser("admin", "a@example.com", "pw"))
    created = api.post("/api/charts/", {"source": UNDECLARED}, format="json").json()
    assert created["datamodel"] == "ecmascript"
    assert api.get(f"/api/charts/{created['id']}/").json()["datamodel"] == "ecmascript"


@pytest.mark.django_db
def test_an_explicit_null_datamodel_stays_null() -> None:
    with pytest.raises(ChartError, match="the null datamodel has no <data>"):
        Chart.objects.load(UNDECLARED.replace('name="counter"', 'name="c" datamodel="null"'))
    chart = Chart.objects.load(CODE_FREE.replace('name="switch"', 'name="s" datamodel="null"'))
    assert chart.datamodel == "null"


@pytest.mark.django_db
def test_the_setting_decides_and_the_stored_row_keeps_what_it_was_loaded_with() -> None:
    with override_settings(STATECHARTS={"DEFAULT_DATAMODEL": "null"}):
        with pytest.raises(ChartError, match="the null datamodel has no <data>"):
            Chart.objects.load(UNDECLARED)
        switch = Chart.objects.load(CODE_FREE)
    assert switch.datamodel == "null"
    # Loaded again under today's default: the stored row wins, with a warning.
    again = Chart.objects.load(CODE_FREE)
    assert again.pk == switch.pk and again.datamodel == "null"
    [warning] = again.load_warnings
    assert warning.code == STORED_DATAMODEL and warning.severity == "warning"
    assert f"already stored as chart {switch.pk} with the 'null' datamodel" in warning.message
    assert 'Declare datamodel="ecmascript"' in warning.message
    # A stored ecmascript chart keeps compiling as ecmascript when the setting changes.
    counter = Chart.objects.load(UNDECLARED)
    execution = stepper.start(counter)
    with override_settings(STATECHARTS={"DEFAULT_DATAMODEL": "null"}):
        stepper.send(execution, "add", {"n": 4})
        stepper.send(execution, "stop")
    execution.refresh_from_db()
    assert execution.donedata == {"count": 4}


def test_a_code_free_chart_pays_nothing_for_an_engine() -> None:
    chart = load_chart(CODE_FREE, default_datamodel="ecmascript")
    assert (chart.datamodel, chart.engine) == ("ecmascript", "null")
    interpreter = Interpreter(chart)
    interpreter.initialize("s-1")
    assert isinstance(interpreter.dm, NullDatamodel)
    # declared ecmascript: the engine it asked for, whatever it uses
    declared = load_chart(CODE_FREE.replace('name="switch"', 'datamodel="ecmascript"'))
    assert declared.engine == "ecmascript"
    # a chart with code gets the engine
    assert load_chart(UNDECLARED, default_datamodel="ecmascript").engine == "ecmascript"


def test_the_core_default_is_unchanged() -> None:
    assert load_chart(CODE_FREE).datamodel == "null"


@pytest.mark.django_db
def test_the_migration_records_null_or_the_declared_datamodel() -> None:
    migration = importlib.import_module("statecharts.migrations.0009_chart_authoring")
    Chart.objects.bulk_create(
        [
            Chart(source=CODE_FREE, content_hash="a" * 64, datamodel="null"),
            Chart(
                source=UNDECLARED.replace("<scxml ", '<scxml datamodel="ecmascript" '),
                content_hash="b" * 64,
                datamodel="null",
            ),
        ]
    )
    migration.record_declared_datamodels(django_apps, None)
    assert dict(Chart.objects.values_list("content_hash", "datamodel")) == {
        "a" * 64: "null",
        "b" * 64: "ecmascript",
    }
