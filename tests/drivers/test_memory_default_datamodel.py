"""The in-memory driver gives a chart without a ``datamodel`` attribute the datamodel the
database would (issue 36): the ``DEFAULT_DATAMODEL`` setting, or ``datamodel=``."""

from __future__ import annotations

import pytest
from django.test import override_settings

from statecharts.core.errors import ChartError
from statecharts.declaration import SETTINGS
from statecharts.drivers.memory import DEFAULT_DATAMODEL, MemoryDriver

WITH_DATA = """<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" initial="a">
  <datamodel><data id="n" expr="1"/></datamodel>
  <state id="a"/>
</scxml>"""


def test_the_fallback_is_the_settings_shipped_default() -> None:
    (setting,) = (s for s in SETTINGS if s.name == "DEFAULT_DATAMODEL")
    assert DEFAULT_DATAMODEL == setting.default == "ecmascript"


def test_a_chart_without_the_attribute_runs_as_in_the_database() -> None:
    session = MemoryDriver().start(WITH_DATA)
    assert session.datamodel == {"n": 1}


@override_settings(STATECHARTS={"DEFAULT_DATAMODEL": "null"})
def test_the_setting_is_read_when_django_is_configured() -> None:
    with pytest.raises(ChartError, match="null datamodel"):
        MemoryDriver().load(WITH_DATA)


def test_the_constructor_argument_wins() -> None:
    with pytest.raises(ChartError, match="null datamodel"):
        MemoryDriver(datamodel="null").load(WITH_DATA)
    with override_settings(STATECHARTS={"DEFAULT_DATAMODEL": "null"}):
        assert MemoryDriver(datamodel="ecmascript").start(WITH_DATA).datamodel == {"n": 1}


def test_an_invoked_child_gets_the_drivers_default() -> None:
    parent = """<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0"
        datamodel="ecmascript" initial="a">
      <state id="a">
        <invoke type="scxml"><content>
          <scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" initial="c">
            <datamodel><data id="n" expr="2"/></datamodel>
            <state id="c"><onentry><send target="#_parent" event="child.ready"/></onentry></state>
          </scxml>
        </content></invoke>
        <transition event="child.ready" target="ready"/>
        <transition event="error.*" target="failed"/>
      </state>
      <state id="ready"/>
      <state id="failed"/>
    </scxml>"""
    assert MemoryDriver().start(parent).configuration == frozenset({"ready"})
    assert MemoryDriver(datamodel="null").start(parent).configuration == frozenset({"failed"})
