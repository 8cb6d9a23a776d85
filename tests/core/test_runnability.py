"""Charts that load but cannot run within the step budgets (issue 28, item 4): told at load,
counted without running them, in work linear in the chart (checked as the size doubles)."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from statecharts.core import load_chart
from statecharts.core.runnability import (
    CONFLICT_CHECKS_PER_SECOND,
    DATA_BOUND_PER_SECOND,
    entered_at_start,
    runnability_problems,
)
from statecharts.models import Chart

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
BUDGET_MS = 500  # (a tenth of the default: the same rule on charts a tenth the size)
SMALL_BUDGET = {**settings.STATECHARTS, "STEP_TIME_BUDGET_MS": BUDGET_MS}
TOO_MANY_DATA = BUDGET_MS * DATA_BOUND_PER_SECOND // 1000 + 1000


def many_data(n: int, binding: str = "early") -> str:
    """``n`` <data> in a state the start does not enter."""
    datas = "".join(f'<data id="d{i}" expr="{i}"/>' for i in range(n))
    return (
        f'<scxml {NS} binding="{binding}" initial="a"><state id="a"/>'
        f"<state id=\"later\"><datamodel>{datas}</datamodel></state></scxml>"
    )


def regions(n: int) -> str:
    body = "".join(f'<state id="r{i}"><transition event="go" target="r{i}"/></state>'
                   for i in range(n))
    return f'<scxml {NS}><parallel id="p">{body}</parallel></scxml>'


def problems(source: str, strict: bool = False) -> list[str]:
    return [str(p) for p in runnability_problems(load_chart(source), BUDGET_MS, strict=strict)]


def test_a_chart_with_more_data_than_a_start_can_bind_is_told_with_the_counts() -> None:
    too_many = TOO_MANY_DATA
    (said,) = problems(many_data(too_many))
    assert f"binds {too_many} <data>" in said and "500 ms (STEP_TIME_BUDGET_MS)" in said
    assert problems(many_data(too_many // 2)) == []
    # Bound late, only the data of the states entered at start are bound then.
    assert problems(many_data(too_many, "late")) == []


def test_a_parallel_whose_regions_all_take_one_event_is_told_where() -> None:
    width = int((BUDGET_MS / 1000 * CONFLICT_CHECKS_PER_SECOND) ** 0.5) + 100
    (said,) = problems(regions(width))
    assert said.startswith("1:")
    assert f"an event 'go' selects {width} transitions at once in <parallel id='p'>" in said
    assert problems(regions(width // 2)) == []
    # Each region on its own event: one transition per event, whatever the width.
    distinct = "".join(f'<state id="r{i}"><transition event="e{i}" target="r{i}"/></state>'
                       for i in range(width))
    assert problems(f'<scxml {NS}><parallel id="p">{distinct}</parallel></scxml>') == []


def test_strict_makes_them_errors_and_the_doors_say_so(tmp_path: Path) -> None:
    source = many_data(TOO_MANY_DATA)
    found = runnability_problems(load_chart(source), BUDGET_MS, strict=True)
    assert [p.severity for p in found] == ["error"]
    path = tmp_path / "big.scxml"
    path.write_text(source)
    out = io.StringIO()
    with override_settings(STATECHARTS=SMALL_BUDGET):
        call_command("statechart", "validate", str(path), stdout=out)
        assert "warning: this chart cannot start within the step time budget" in out.getvalue()
        with pytest.raises(CommandError, match="cannot start within the step time budget"):
            call_command("statechart", "validate", "--strict", str(path), stdout=io.StringIO())


@pytest.mark.django_db
def test_loading_warns_and_stores_it() -> None:
    with override_settings(STATECHARTS=SMALL_BUDGET):
        chart = Chart.objects.load(many_data(TOO_MANY_DATA))
    assert any("cannot start" in p.message for p in chart.load_warnings)


def test_the_initial_configuration_follows_initial_attributes_and_parallels() -> None:
    chart = load_chart(f"""<scxml {NS} initial="b"><state id="a"/>
      <state id="b" initial="b2"><state id="b1"/><state id="b2"/></state>
      <parallel id="c"><state id="c1"/><state id="c2"/></parallel></scxml>""")
    ids = {chart.states[i].id for i in entered_at_start(chart) if i}
    assert ids == {"b", "b2"}


def calls(source: str) -> int:
    chart = load_chart(source)
    count = 0

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal count
        if event == "call" or event == "c_call":
            count += 1

    sys.setprofile(profile)
    try:
        runnability_problems(chart, BUDGET_MS, strict=False)
    finally:
        sys.setprofile(None)
    return count


@pytest.mark.parametrize("shape", [many_data, regions])
def test_the_work_is_linear_in_the_chart(shape: Any) -> None:
    small, large = calls(shape(2_000)), calls(shape(4_000))
    assert large < 2.1 * small
