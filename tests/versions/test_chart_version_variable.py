"""A chart can know its version (issue 36): ``_x.chart`` holds the chart row's ``version`` and,
for a migrated execution, ``migratedFrom`` and ``migratedAt`` (from its ``migrated`` history
entry). Read-only, never in the position: replay gives the same positions."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from statecharts import stepper
from statecharts.core.compile import load_chart
from statecharts.core.host import Host
from statecharts.core.interpreter import Interpreter
from statecharts.drivers.memory import MemoryDriver
from statecharts.models import Chart, Execution
from statecharts.operations.chart_migration import MigrationPlan, Verdict, migrate
from statecharts.operations.inspection import inspect
from statecharts.operations.replay import replay

pytestmark = pytest.mark.django_db

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'


def signup(extra: str = "") -> str:
    return f"""<scxml {NS} name="signup" initial="waiting">
  <datamodel><data id="seen" expr="null"/></datamodel>
  <state id="waiting">
    <transition event="look"><assign location="seen" expr="JSON.stringify(_x.chart)"/></transition>
    <transition event="branch" cond="_x.chart.migratedFrom === '1'" target="old_path"/>
    <transition event="branch" target="new_path"/>
    {extra}
  </state>
  <state id="old_path"/><state id="new_path"/>
</scxml>"""


def seen(execution: Execution) -> object:
    stepper.send(execution, "look")
    execution.refresh_from_db()
    return inspect(execution).datamodel["seen"]  # type: ignore[index]


def test_a_started_execution_sees_its_version_and_no_migration() -> None:
    execution = stepper.start(Chart.objects.load(signup()))
    assert seen(execution) == '{"version":"1","migratedFrom":null,"migratedAt":null}'


def test_a_migrated_execution_sees_where_it_came_from_and_when() -> None:
    execution = stepper.start(Chart.objects.load(signup()))
    v2 = Chart.objects.load(signup("<!-- v2 -->"), new_version=True)
    at = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    [report] = list(migrate(MigrationPlan.make(v2, {}), now=at))
    assert report.verdict is Verdict.MIGRATED
    execution.refresh_from_db()
    assert seen(execution) == (
        '{"version":"2","migratedFrom":"1","migratedAt":"2026-03-01T12:00:00+00:00"}'
    )
    stepper.send(execution, "branch")
    execution.refresh_from_db()
    assert execution.configuration == ["old_path"]
    assert replay(execution.pk).ok  # the same values again: the same positions


def test_a_new_execution_of_the_new_version_takes_the_other_branch() -> None:
    Chart.objects.load(signup())
    v2 = Chart.objects.load(signup("<!-- v2 -->"), new_version=True)
    execution = stepper.start(v2)
    stepper.send(execution, "branch")
    execution.refresh_from_db()
    assert execution.configuration == ["new_path"]


def test_it_is_not_in_the_position() -> None:
    execution = stepper.start(Chart.objects.load(signup()))
    stepper.send(execution, "branch")
    execution.refresh_from_db()
    assert b"migratedAt" not in bytes(execution.position)


ASSIGNING = f"""<scxml {NS} initial="a">
  <state id="a">
    <onentry><assign location="_x.chart.version" expr="'9'"/></onentry>
    <onentry><assign location="_x" expr="1"/></onentry>
    <onentry><script>_x.chart.version = "9";</script></onentry>
    <transition event="error.execution" target="a_error" cond="_x.chart.version === null"/>
  </state>
  <state id="a_error">
    <transition event="error.execution" target="b_error"/>
  </state>
  <state id="b_error">
    <transition cond="_x.chart.version === null" target="intact"/>
  </state>
  <state id="intact"/>
</scxml>"""


def test_assigning_it_raises_error_execution_like_the_other_system_variables() -> None:
    """W3C test 329's rule, for ``_x`` too (a ``<script>`` cannot change it either: its
    assignment does nothing, as to ``_sessionid``); in memory (no chart row) it is null."""
    session = MemoryDriver().start(ASSIGNING)
    assert session.configuration == frozenset({"intact"})


def test_a_chart_that_never_names_it_reads_no_row() -> None:
    asked: list[int] = []

    def facts() -> dict[str, object]:
        asked.append(1)
        return {"version": "1", "migratedFrom": None, "migratedAt": None}

    host = Host(chart=facts)
    quiet = Interpreter(load_chart(f"<scxml {NS}><state id='a'/></scxml>"))
    quiet.initialize("s", host=host)
    assert asked == []
    Interpreter(load_chart(signup())).initialize("t", host=host)
    assert asked == [1]
