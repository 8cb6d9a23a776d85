"""The arrows of a chart, before any geometry: who points at whom, and what the arrow says."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from statecharts.core.model import Chart, StateNode, Transition
from statecharts.diagram.text import label_lines, targetless_line, transition_label


class Relation(Enum):
    APART = "apart"  # neither box contains the other
    SELF = "self"  # a loop on one box
    OUTWARD = "outward"  # the target contains the source
    INWARD = "inward"  # the source contains the target


@dataclass(frozen=True, slots=True)
class Edge:
    source: int
    target: int
    relation: Relation
    label: tuple[str, ...]  # the lines the arrow shows (none for a history default)
    title: str  # the untruncated text, for the tooltip
    transition: int  # index in chart.transitions; -1 for a history default
    default: bool = False  # a history pseudo-state's default transition


def relation(chart: Chart, source: int, target: int) -> Relation:
    if source == target:
        return Relation.SELF
    if target in chart.states[source].descendants:
        return Relation.INWARD
    if source in chart.states[target].descendants:
        return Relation.OUTWARD
    return Relation.APART


def lift(chart: Chart, source: int, target: int) -> tuple[int, int, int] | None:
    """(lowest common ancestor, its child holding ``source``, its child holding ``target``)
    for two states apart; None when one contains the other."""
    states = chart.states
    below: dict[int, int] = {}
    child = source
    for ancestor in states[source].ancestors:
        below[ancestor] = child
        child = ancestor
    child = target
    for ancestor in states[target].ancestors:
        if ancestor in below:
            if below[ancestor] == child or child == source:
                return None
            return ancestor, below[ancestor], child
        child = ancestor
    return None


def targetless_lines(node: StateNode) -> tuple[str, ...]:
    """Transitions of ``node`` that go nowhere, as the lines listed inside its box."""
    if node.is_history:
        return ()
    return tuple(targetless_line(t) for t in node.transitions if not t.targets)


def chart_edges(chart: Chart) -> list[Edge]:
    """Every arrow: each transition once per distinct target, in document order, then the
    default transition of each history pseudo-state."""
    edges: list[Edge] = []
    for node in chart.states:
        if node.is_history:
            continue
        for transition in node.transitions:
            edges.extend(_transition_edges(chart, transition))
    for node in chart.states:
        if node.is_history and node.initial is not None:
            for target in dict.fromkeys(node.initial.targets):
                kind = relation(chart, node.index, target)
                edges.append(Edge(node.index, target, kind, (), "default", -1, default=True))
    return edges


def _transition_edges(chart: Chart, transition: Transition) -> list[Edge]:
    label = label_lines(transition)
    title = transition_label(transition)
    return [
        Edge(
            transition.source,
            target,
            relation(chart, transition.source, target),
            label,
            title,
            transition.index,
        )
        for target in dict.fromkeys(transition.targets)
    ]
