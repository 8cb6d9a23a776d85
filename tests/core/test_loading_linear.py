"""Loading is linear in the document whatever its shape, counted, not timed: the calls made
while loading (Python functions and the built-ins ``sys.setprofile`` sees) grow like the
document, stay a few dozen per element, and do not depend on how deep it is nested (a walk
repeated per state, or per ancestor, would show). ``benchmarks/loading.py`` times the same
shapes at 2 MB (benchmarks/JOURNAL.md, "Loading the worst document shapes")."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest

from statecharts.core import load_chart
from statecharts.core.expressions import check_expressions
from statecharts.core.model import Chart

NS = "http://www.w3.org/2005/07/scxml"
HEAD = f'<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript" initial="s0">'


def flat(states: int, separator: str = "\n") -> str:
    """``states`` states, each with a transition to the next (one per line, or one line)."""
    body = separator.join(
        f'<state id="s{i}"><transition event="e" target="s{i + 1}"/></state>'
        for i in range(states - 1)
    )
    return HEAD + body + separator + f'<state id="s{states - 1}"/></scxml>'


def deep(states: int, depth: int) -> str:
    """Chains of ``depth`` nested states, ``states`` in all."""
    chains = "".join(
        "".join(f'<state id="d{c}_{j}">' for j in range(depth)) + "</state>" * depth + "\n"
        for c in range(states // depth)
    )
    return HEAD.replace('initial="s0"', 'initial="d0_0"') + chains + "</scxml>"


def with_code(states: int) -> str:
    """States with guarded transitions and executable content."""
    body = "\n".join(
        f'<state id="s{i}"><onentry><log label="in" expr="{i}"/></onentry>'
        f'<transition event="go.{i}" cond="x &gt; {i}" target="s{(i + 1) % states}">'
        f'<assign location="x" expr="x + 1"/><if cond="x"><raise event="r"/><else/></if>'
        f"</transition></state>"
        for i in range(states)
    )
    return HEAD + '<datamodel><data id="x" expr="0"/></datamodel>\n' + body + "</scxml>"


def counted(source: str) -> tuple[Chart, Counter[str]]:
    """Load ``source`` counting the calls ``sys.setprofile`` sees."""
    counts: Counter[str] = Counter()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" or event == "c_call":
            counts["calls"] += 1

    sys.setprofile(profile)
    try:
        chart = load_chart(source)
    finally:
        sys.setprofile(None)
    return chart, counts


def elements_of(source: str) -> int:
    return source.count("<") - source.count("</")


SHAPES: dict[str, Callable[[int], str]] = {
    "many_states": flat,
    "one_line": lambda n: flat(n, ""),
    "deep": lambda n: deep(n, 100),
    "wide": lambda n: (
        HEAD.replace('initial="s0"', "")
        + '<state id="top">'
        + "".join(f'<state id="c{i}"><transition event="e" target="c0"/></state>' for i in range(n))
        + "</state></scxml>"
    ),
    "with_code": with_code,
    # many history pseudo-states in one compound state (its default initial child is the
    # first that is not one)
    "history": lambda n: (
        HEAD.replace('initial="s0"', 'initial="p"')
        + '<state id="p">'
        + "".join(f'<history id="h{i}"><transition target="a"/></history>' for i in range(n))
        + '<state id="a"/></state></scxml>'
    ),
}


@pytest.mark.parametrize("shape", SHAPES)
def test_the_calls_of_loading_grow_like_the_document(shape: str) -> None:
    make = SHAPES[shape]
    small_chart, small = counted(make(1000))
    large_chart, large = counted(make(4000))
    assert len(large_chart.states) > 3.9 * len(small_chart.states)
    # linear: four times the document, four times the calls (a fixed part aside)
    assert large["calls"] < 4.1 * small["calls"]
    # ... and a few dozen per element, whatever the shape
    assert large["calls"] / elements_of(make(4000)) < 60


def test_the_calls_per_state_do_not_depend_on_the_depth() -> None:
    _, shallow = counted(deep(3000, 10))
    _, nested = counted(deep(3000, 120))
    assert nested["calls"] < 1.05 * shallow["calls"]


def bad_code(states: int) -> str:
    """States whose every guard is a syntax error (one per line)."""
    body = "\n".join(
        f'<state id="s{i}"><transition event="e" cond="x +* {i}" target="s0"/></state>'
        for i in range(states)
    )
    return HEAD + "\n" + body + "\n</scxml>"


def counted_check(source: str) -> tuple[list[str], int]:
    """check_expressions on ``source``'s chart: its problems and the calls it made."""
    chart = load_chart(source)
    calls = 0

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal calls
        if event == "call" or event == "c_call":
            calls += 1

    sys.setprofile(profile)
    try:
        problems = check_expressions(chart, source)
    finally:
        sys.setprofile(None)
    return [str(p) for p in problems], calls


def test_reporting_every_syntax_error_with_its_position_is_linear() -> None:
    """Each error's line:column comes from one index of the text's lines (looking for each
    one from the start of the text made a chart full of errors quadratic to report)."""
    small, small_calls = counted_check(bad_code(500))
    large, large_calls = counted_check(bad_code(2000))
    assert len(small) == 500 and len(large) == 2000
    assert large[1999] == (
        "2001:41: <transition cond='x +* 1999'> has a syntax error: unexpected token in "
        "expression: '*'"
    )
    assert large_calls < 4.2 * small_calls
