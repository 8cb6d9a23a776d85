"""A state's ``ancestors``, ``descendants``, ``children`` and default ``initial`` are made on
first read from the chart's Structure (not at load: on a deeply nested chart they were most
of the model), and they are what the parent chain says they are, whichever state is read
first."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import random

import pytest

from statecharts.core import Interpreter, load_chart
from statecharts.core.model import SMALL_SUBTREE, Chart, StateNode, StateRange, UnreadStateNode

NS = "http://www.w3.org/2005/07/scxml"

NESTED_AND_PARALLEL = f"""<scxml xmlns="{NS}" initial="p">
  <parallel id="p">
    <state id="a" initial="a2">
      <history id="ah" type="deep"><transition target="a1"/></history>
      <state id="a1"><state id="a11"/><state id="a12"><final id="a12f"/></state></state>
      <state id="a2"><onentry><log expr="1"/></onentry></state>
    </state>
    <state id="b">
      <initial><transition target="b2"/></initial>
      <state id="b1"/>
      <parallel id="b2"><state id="b21"/><state id="b22"><state id="b221"/></state></parallel>
    </state>
  </parallel>
  <state id="q"><transition event="e" target="a11"/></state>
  <final id="done"/>
</scxml>"""


def deep_chains(chains: int, depth: int) -> str:
    """``chains`` chains of ``depth`` nested states, the benchmark's deep shape, smaller."""
    chain = "".join(
        "".join(f'<state id="d{i}_{j}">' for j in range(depth)) + "</state>" * depth
        for i in range(chains)
    )
    return f'<scxml xmlns="{NS}" initial="d0_0">{chain}</scxml>'


def filled(node: StateNode, name: str) -> bool:
    """Whether the slot ``name`` of ``node`` holds a value, read through the slot itself
    (the member descriptor), so that reading it does not make it."""
    try:
        StateNode.__dict__[name].__get__(node, StateNode)
    except AttributeError:
        return False
    return True


def naive_ancestors(chart: Chart, index: int) -> tuple[int, ...]:
    ancestors = []
    parent = chart.states[index].parent
    while parent != -1:
        ancestors.append(parent)
        parent = chart.states[parent].parent
    return tuple(ancestors)


def naive_descendants(chart: Chart, index: int) -> set[int]:
    return {s.index for s in chart.states if index in naive_ancestors(chart, s.index)}


CHARTS = {
    "nested and parallel": NESTED_AND_PARALLEL,
    "deep chains": deep_chains(3, 120),
}


@pytest.mark.parametrize("source", CHARTS.values(), ids=CHARTS.keys())
def test_nothing_is_made_at_load(source: str) -> None:
    chart = load_chart(source)
    assert not any(filled(s, "ancestors") or filled(s, "descendants") for s in chart.states)
    assert all(type(s) is UnreadStateNode for s in chart.states)
    middle = chart.states[len(chart.states) // 2]
    middle.ancestors  # noqa: B018  (the read is the point)
    # both made for the state read (a plain StateNode from then on: see UnreadStateNode),
    # and for no other
    assert [s.index for s in chart.states if filled(s, "ancestors")] == [middle.index]
    assert [s.index for s in chart.states if filled(s, "descendants")] == [middle.index]
    assert [s.index for s in chart.states if type(s) is StateNode] == [middle.index]
    last = chart.states[-1]
    last.descendants  # noqa: B018
    assert filled(last, "ancestors") and type(last) is StateNode
    assert repr(chart.states[1]).startswith("StateNode(index=1, ")


@pytest.mark.parametrize("order", ["document", "reversed", "shuffled"])
@pytest.mark.parametrize("source", CHARTS.values(), ids=CHARTS.keys())
def test_read_values_are_the_parent_chains(source: str, order: str) -> None:
    chart = load_chart(source)
    states = list(chart.states)
    if order == "reversed":
        states.reverse()
    elif order == "shuffled":
        random.Random(12).shuffle(states)
    for state in states:
        ancestors = state.ancestors
        assert type(ancestors) is tuple
        assert ancestors == naive_ancestors(chart, state.index), state.id
        descendants = state.descendants
        expected = naive_descendants(chart, state.index)
        if len(expected) <= SMALL_SUBTREE:
            assert type(descendants) is frozenset and descendants == expected, state.id
        else:
            assert isinstance(descendants, StateRange), state.id
            assert set(descendants) == expected and len(descendants) == len(expected)
        # once made, kept: the next read is the same object, from a plain StateNode
        assert state.ancestors is ancestors and state.descendants is descendants
        assert type(state) is StateNode


def test_deep_chain_has_large_subtrees_as_ranges_and_small_ones_as_sets() -> None:
    chart = load_chart(deep_chains(2, 120))
    top = chart.state("d1_0")
    bottom = chart.state("d1_119")
    assert bottom.ancestors == (*range(bottom.index - 1, top.index - 1, -1), 0)
    assert top.descendants == StateRange(top.index + 1, bottom.index + 1)
    assert chart.state("d1_60").descendants == frozenset(range(top.index + 61, bottom.index + 1))
    assert bottom.descendants == frozenset()
    assert chart.root.ancestors == () and len(chart.root.descendants) == 240


def test_children_and_initial_are_made_on_read_too() -> None:
    chart = load_chart(NESTED_AND_PARALLEL)
    ids = chart.ids
    for state in chart.states:
        assert state.children == tuple(s.index for s in chart.states if s.parent == state.index)
    targets = {
        s.id: s.initial.targets if s.initial is not None else None
        for s in chart.states
        if s.id in ("p", "a", "ah", "a1", "a12", "b", "b2", "a11", "q", "done")
    }
    assert targets == {
        "p": None,  # a parallel state
        "a": (ids["a2"],),  # its initial attribute
        "ah": (ids["a1"],),  # the history's default
        "a1": (ids["a11"],),  # by default, the first child
        "a12": (ids["a12f"],),
        "b": (ids["b2"],),  # its <initial>
        "b2": None,
        "a11": None,
        "q": None,
        "done": None,
    }
    assert chart.root.initial is not None and chart.root.initial.targets == (ids["p"],)
    default = chart.state("a1").initial
    assert default is not None and (default.index, default.source, default.line) == (
        -1,
        ids["a1"],
        chart.state("a1").line,
    )


@pytest.mark.parametrize("read_first", [False, True])
def test_a_copy_made_with_dataclasses_replace_has_the_same_values(read_first: bool) -> None:
    chart = load_chart(NESTED_AND_PARALLEL)
    fields = ("ancestors", "descendants", "children", "initial", "history", "kind", "depth")
    for state in chart.states:
        if read_first:
            state.initial  # noqa: B018
        copy = dataclasses.replace(state, id=f"{state.id}_copy")
        assert copy.id == f"{state.id}_copy"
        assert [getattr(copy, f) for f in fields] == [getattr(state, f) for f in fields]


def test_starting_an_interpreter_makes_only_the_states_it_reads() -> None:
    chart = load_chart(deep_chains(3, 120))
    Interpreter(chart).initialize("s")
    made = {s.id for s in chart.states if type(s) is StateNode}
    assert "d0_119" in made  # entered: the first chain, down to its atomic state
    assert not any(i.startswith(("d1_", "d2_")) for i in made)


def test_pickled_and_copied_states_are_plain_states_with_the_same_values() -> None:
    chart = load_chart(NESTED_AND_PARALLEL)
    fields = ("ancestors", "descendants", "children", "history", "kind", "depth", "id")
    for state in chart.states:
        for twin in (pickle.loads(pickle.dumps(state)), copy.copy(state)):
            assert type(twin) is StateNode
            assert [getattr(twin, f) for f in fields] == [getattr(state, f) for f in fields]
