"""Every piece of chart code in a compiled chart, and the load-time check of its syntax.

A chart's expressions (``expr``, ``cond``, ``location``, ``array``, ``eventexpr``,
``delayexpr``, ``targetexpr``, ...) and ``<script>`` bodies are compiled by the datamodel's
engine when they first run. :func:`check_expressions` compiles them all when the chart is
loaded instead, without running any, and reports each syntax error with the line:column of
its attribute. They are warnings by default (the spec lets a bad expression fail at run time,
as ``error.execution``); a host may make them errors (``strict``).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass

from statecharts.core.datamodel.syntax import CodeKind
from statecharts.core.errors import Problem
from statecharts.core.model import (
    Action,
    Assign,
    Block,
    Cancel,
    Chart,
    Content,
    Expr,
    Foreach,
    If,
    Log,
    Param,
    Script,
    Send,
)

EXPRESSION_SYNTAX = "expression-syntax"
"""The :attr:`Problem.code` of a syntax error found in chart code."""


@dataclass(frozen=True, slots=True)
class CodeSite:
    """One piece of chart code: its text, how it is compiled, and where it is written."""

    kind: CodeKind
    source: str
    tagname: str
    attribute: str | None  # None: the element's body (a <script>)
    line: int  # of the element's start tag
    column: int


def _site(kind: CodeKind, expr: Expr, tagname: str, attribute: str | None) -> CodeSite:
    return CodeSite(kind, expr.source, tagname, attribute, expr.line, expr.column)


def _params(params: tuple[Param, ...]) -> Iterator[CodeSite]:
    for p in params:
        if p.expr is not None:
            yield _site(CodeKind.VALUE, p.expr, "param", "expr")
        if p.location is not None:
            yield _site(CodeKind.VALUE, p.location, "param", "location")


def _content(content: Content | None) -> Iterator[CodeSite]:
    if content is not None and content.expr is not None:
        yield _site(CodeKind.VALUE, content.expr, "content", "expr")


def _actions(actions: tuple[Action, ...]) -> Iterator[CodeSite]:
    value = CodeKind.VALUE
    for action in actions:
        if isinstance(action, Log):
            if action.expr is not None:
                yield _site(value, action.expr, "log", "expr")
        elif isinstance(action, Assign):
            yield _site(CodeKind.LOCATION, action.location, "assign", "location")
            if action.expr is not None:
                yield _site(value, action.expr, "assign", "expr")
        elif isinstance(action, Script):
            yield _site(CodeKind.SCRIPT, action.script, "script", None)
        elif isinstance(action, If):
            for i, (cond, body) in enumerate(action.branches):
                if cond is not None:
                    yield _site(value, cond, "if" if i == 0 else "elseif", "cond")
                yield from _actions(body)
        elif isinstance(action, Foreach):
            yield _site(value, action.array, "foreach", "array")
            yield _site(CodeKind.LOCATION, action.item, "foreach", "item")
            if action.index is not None:
                yield _site(CodeKind.LOCATION, action.index, "foreach", "index")
            yield from _actions(action.actions)
        elif isinstance(action, Send):
            for attribute in ("eventexpr", "targetexpr", "typeexpr", "delayexpr"):
                expr = getattr(action, attribute)
                if expr is not None:
                    yield _site(value, expr, "send", attribute)
            if action.idlocation is not None:
                yield _site(CodeKind.LOCATION, action.idlocation, "send", "idlocation")
            for expr in action.namelist:
                yield _site(value, expr, "send", "namelist")
            yield from _params(action.params)
            yield from _content(action.content)
        elif isinstance(action, Cancel) and action.sendidexpr is not None:
            yield _site(value, action.sendidexpr, "cancel", "sendidexpr")


def _blocks(blocks: tuple[Block, ...]) -> Iterator[CodeSite]:
    for block in blocks:
        yield from _actions(block.actions)


def code_sites(chart: Chart) -> Iterator[CodeSite]:
    """Every piece of code in ``chart``, in no particular order."""
    value = CodeKind.VALUE
    if chart.script is not None:
        yield from _actions(chart.script.actions)
    for state in chart.states:
        for data in state.datas:
            if data.expr is not None:
                yield _site(value, data.expr, "data", "expr")
        yield from _blocks(state.onentry)
        yield from _blocks(state.onexit)
        if state.initial is not None and state.initial.index < 0:
            yield from _actions(state.initial.body.actions)
        for invoke in state.invokes:
            for attribute in ("typeexpr", "srcexpr"):
                expr = getattr(invoke, attribute)
                if expr is not None:
                    yield _site(value, expr, "invoke", attribute)
            if invoke.idlocation is not None:
                yield _site(CodeKind.LOCATION, invoke.idlocation, "invoke", "idlocation")
            for expr in invoke.namelist:
                yield _site(value, expr, "invoke", "namelist")
            yield from _params(invoke.params)
            yield from _content(invoke.content)
            yield from _actions(invoke.finalize.actions)
        if state.donedata is not None:
            yield from _params(state.donedata.params)
            yield from _content(state.donedata.content)
    for transition in chart.transitions:
        if transition.cond is not None:
            yield _site(value, transition.cond, "transition", "cond")
        yield from _actions(transition.body.actions)


class LineIndex:
    """Where each line of a text starts (lines end at ``"\n"``, as the parser's positions
    count them): a line:column is turned into an offset and back in constant and
    logarithmic time, however many are asked (searching the text from its start for each
    one made a chart full of syntax errors quadratic to report)."""

    __slots__ = ("starts",)

    def __init__(self, text: str) -> None:
        self.starts = [0, *(m.end() for m in _NEWLINE.finditer(text))]

    def offset(self, line: int, column: int) -> int | None:
        """The offset of (``line``, ``column``), both 1-based; None past the last line."""
        if not 1 <= line <= len(self.starts):
            return None
        return self.starts[line - 1] + max(column - 1, 0)

    def position(self, offset: int) -> tuple[int, int]:
        """(line, column), 1-based, of the character at ``offset``."""
        line = bisect_right(self.starts, offset)
        return line, offset - self.starts[line - 1] + 1


_NEWLINE = re.compile("\n")


def attribute_position(
    source: str | None, site: CodeSite, lines: LineIndex | None = None
) -> tuple[int, int]:
    """Where ``site``'s attribute is written in ``source`` (line, column; 1-based): searched
    for in the element's start tag. The element's own position when it cannot be found.
    ``lines``: ``source``'s LineIndex, made once for many sites (made here if not given)."""
    if source is None or site.attribute is None or site.line < 1:
        return site.line, site.column
    if lines is None:
        lines = LineIndex(source)
    start = lines.offset(site.line, site.column)
    if start is None:
        return site.line, site.column
    end = source.find(">", start)
    tag = source[start : end if end >= 0 else len(source)]
    found = re.search(rf"(?<![\w:.-]){re.escape(site.attribute)}\s*=", tag)
    if found is None:
        return site.line, site.column
    return lines.position(start + found.start())


def check_expressions(
    chart: Chart, source: str | None = None, *, strict: bool = False
) -> list[Problem]:
    """Compile every piece of ``chart``'s code without running it; one Problem (code
    :data:`EXPRESSION_SYNTAX`) per syntax error, a warning unless ``strict``. ``source`` is
    the chart's text, to point at the attribute itself. A chart whose datamodel has no
    engine (null: only ``In('id')``, checked by validation) has nothing to check."""
    if chart.datamodel != "ecmascript":
        return []
    from statecharts.core.datamodel.syntax import check_syntax

    # Each piece once (a transition's body may be reached twice), in document order.
    sites = sorted(
        set(code_sites(chart)), key=lambda s: (s.line, s.column, s.attribute or "", s.source)
    )
    severity = "error" if strict else "warning"
    verdicts = check_syntax((s.kind, s.source) for s in sites)
    if verdicts is None:
        return [Problem(1, 1, "the chart's expressions were not all checked (the check's time "
                        "budget ran out)", "warning", EXPRESSION_SYNTAX)]
    problems: list[Problem] = []
    lines: LineIndex | None = None  # made for the first error in an attribute, if any
    for site, verdict in zip(sites, verdicts, strict=True):
        if verdict is None:
            continue
        if site.attribute is None:
            # a <script> body: the error's own line, counted from the element's
            line = site.line + max(verdict.line - 1, 0)
            where = f"<{site.tagname}>"
            message = f"{where} has a syntax error: {verdict.message}"
            column = site.column if line == site.line else max(verdict.column, 1)
            problems.append(Problem(line, column, message, severity, EXPRESSION_SYNTAX))
            continue
        if lines is None and source is not None:
            lines = LineIndex(source)
        line, column = attribute_position(source, site, lines)
        message = (f"<{site.tagname} {site.attribute}={site.source!r}> has a syntax error: "
                   f"{verdict.message}")
        problems.append(Problem(line, column, message, severity, EXPRESSION_SYNTAX))
    return sorted(problems, key=lambda p: (p.line, p.column, p.message))
