"""The documents a chart references (``<data src>``, ``<script src>``, ``<invoke src>``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from statecharts.core.host import SCXML_INVOKE_TYPES
from statecharts.core.model import Action, Chart, Foreach, If, Script


@dataclass(frozen=True, slots=True)
class Reference:
    uri: str
    tagname: str  # "data", "script" or "invoke"
    line: int
    column: int = 0


def _scripts(actions: tuple[Action, ...]) -> Iterator[Script]:
    for action in actions:
        if isinstance(action, Script):
            yield action
        elif isinstance(action, If):
            for _, body in action.branches:
                yield from _scripts(body)
        elif isinstance(action, Foreach):
            yield from _scripts(action.actions)


def references(chart: Chart) -> Iterator[Reference]:
    """Every static ``src`` of ``chart`` that names a document (``srcexpr`` values are only
    known when they run). An ``<invoke>`` of another type (a task handler's) names no
    document with its ``src``; one with a ``typeexpr`` is counted as SCXML's."""
    blocks = [chart.script] if chart.script is not None else []
    for state in chart.states:
        for data in state.datas:
            if data.src is not None:
                yield Reference(data.src, "data", data.line, data.column)
        for invoke in state.invokes:
            scxml = invoke.type is None or invoke.type in SCXML_INVOKE_TYPES
            if invoke.src is not None and scxml:
                yield Reference(invoke.src, "invoke", invoke.line, invoke.column)
            blocks.append(invoke.finalize)
        blocks.extend(state.onentry)
        blocks.extend(state.onexit)
    blocks.extend(t.body for t in chart.transitions)
    for block in blocks:
        for script in _scripts(block.actions):
            if script.src is not None:
                yield Reference(script.src, "script", script.line)
