"""Compile a validated document into the interned :class:`~statecharts.core.model.Chart`."""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from operator import attrgetter
from pathlib import Path
from typing import Any

from lxml import etree

from statecharts.core import outside
from statecharts.core.delays import parse_delay
from statecharts.core.errors import ChartError, LoadCheck, Problem, ResolveError
from statecharts.core.events import split_descriptor
from statecharts.core.expiry import EXPIRES, parse_expiry
from statecharts.core.model import (
    NO_INITIAL_BODY,
    Action,
    Assign,
    Block,
    Cancel,
    Chart,
    Content,
    Data,
    DoneData,
    Expr,
    Foreach,
    If,
    Invoke,
    Kind,
    Log,
    Param,
    Raise,
    Script,
    Send,
    StateNode,
    Structure,
    Transition,
    UnreadableValue,
    UnreadStateNode,
)
from statecharts.core.parse import (
    ParsedDocument,
    namespace,
    parse_document,
    read_document,
)
from statecharts.core.resolve import Resolver, default_resolver
from statecharts.core.validate import STATE_LIKE, validate
from statecharts.core.values import body_value, text_value

_KINDS = {"state": Kind.ATOMIC, "parallel": Kind.PARALLEL, "final": Kind.FINAL}
# The kinds as plain module constants: an enum member looked up on its class costs about
# 0.3 us on Python 3.11, several times per state.
_ROOT, _ATOMIC, _COMPOUND = Kind.ROOT, Kind.ATOMIC, Kind.COMPOUND
_HISTORY_SHALLOW, _HISTORY_DEEP = Kind.HISTORY_SHALLOW, Kind.HISTORY_DEEP
_HISTORY_KINDS = frozenset({_HISTORY_SHALLOW, _HISTORY_DEEP})
_WITH_INITIAL = frozenset({_COMPOUND, _ROOT})


class _Compiler:
    def __init__(self, document: ParsedDocument, resolver: Resolver, base_path: str | None):
        self.document = document
        self.ns = namespace(document.root)
        self.resolver = resolver
        self.base_path = base_path
        self.states: list[StateNode] = []
        self.structure = Structure([], [])  # shared by every StateNode of the chart
        self._events: dict[str, tuple[tuple[str, ...], ...]] = {}  # event attribute -> split
        # the states _fill compiles the rest of, in document order
        # (with the <transition> children of an atomic state holding nothing else of SCXML's
        # but history pseudo-states, the commonest: see _fill_transitions; None for others)
        self._to_fill: list[tuple[StateNode, etree._Element, list[etree._Element] | None]] = []
        self.expressions: list[Expr] = []
        self.transitions: list[Transition] = []
        self.invokes: list[Invoke] = []
        self.content_counter = 0
        self.content_columns: list[int] = []
        self.problems: list[Problem] = []
        self.ids: dict[str, int] = {}
        self.has_data = False  # whether any state has a <data>
        # Every element read once, at parse (see parse.Outline and parse.Facts).
        self._facts = document.outline.facts

    # -- small helpers ---------------------------------------------------------------------

    def pos(self, element: etree._Element) -> tuple[int, int]:
        facts = self._facts[element]
        return facts[4], facts[5]

    def expr(self, element: etree._Element, attribute: str) -> Expr | None:
        source = self._facts[element][3].get(attribute)
        if source is None:
            return None
        return self.make_expr(source, element)

    def make_expr(self, source: str, element: etree._Element) -> Expr:
        _, _, _, _, line, column = self._facts[element]
        expression = Expr(len(self.expressions), source, line, column)
        self.expressions.append(expression)
        return expression

    def kids(self, element: etree._Element, *names: str) -> list[etree._Element]:
        """The SCXML children of ``element`` (named one of ``names``, if given), in order."""
        facts = self._facts
        if not names:
            return [c for c in facts[element][2] if facts[c][1]]
        return [c for c in facts[element][2] if facts[c][1] and facts[c][0] in names]

    def _groups(self, children: Sequence[etree._Element]) -> dict[str, list[etree._Element]]:
        """The SCXML elements among ``children`` grouped by local name, each group in order."""
        facts = self._facts
        groups: dict[str, list[etree._Element]] = {}
        for c in children:
            name, in_ns = facts[c][:2]
            if in_ns:
                if name in groups:
                    groups[name].append(c)
                else:
                    groups[name] = [c]
        return groups

    def resolve(self, uri: str, element: etree._Element, *, fatal: bool) -> str | None:
        """Fetch ``uri``. A failed ``<script src>`` refuses the document (spec 5.8); a failed
        ``<data src>`` is a warning here and ``error.execution`` when the data is bound."""
        try:
            return self.resolver(uri, self.base_path)
        except ResolveError as exc:
            line, column = self.pos(element)
            self.problems.append(Problem(line, column, str(exc), "error" if fatal else "warning"))
            return None

    # -- structure -------------------------------------------------------------------------

    def compile(self) -> tuple[list[StateNode], Block | None]:
        root = self.document.root
        self._number(root, -1, 0)
        fill, fill_transitions = self._fill, self._fill_transitions
        for node, element, transitions in self._to_fill:
            if transitions is None:
                fill(node, element)
            else:
                fill_transitions(node, transitions)
        scripts = self.kids(root, "script")
        script = Block("script", tuple(self._action(s) for s in scripts)) if scripts else None
        return self.states, script

    def _number(self, element: etree._Element, parent: int, depth: int) -> None:
        """Number the state ``element`` and, after it, the states below it (document order:
        preorder), noting in the chart's Structure each state's parent and where its subtree
        ends. Recursive: the depth is bounded by parse.MAX_DEPTH."""
        states, to_fill, ids = self.states, self._to_fill, self.ids
        facts = self._facts
        state_like = STATE_LIKE
        structure = self.structure
        parents, stops = structure.parents, structure.stops
        add_parent, add_stop = parents.append, stops.append

        def number(element: etree._Element, index: int, parent: int, depth: int) -> int:
            """Number ``element`` as state ``index``; returns the index after its subtree.
            Constant work per state."""
            name, _, below_all, attributes, line, column = facts[element]
            if index == 0:
                kind = _ROOT
            elif name == "history":
                kind = _HISTORY_DEEP if attributes.get("type") == "deep" else _HISTORY_SHALLOW
            else:
                kind = _KINDS[name]
            given_id = attributes.get("id")
            state_id = given_id or f"__generated_{name}_{index}"
            node = UnreadStateNode(index, state_id, kind, parent, line, column, depth, structure)
            states.append(node)
            add_parent(parent)
            if index != 0:
                ids[state_id] = index
            if not below_all:  # a leaf (half the states or more): nothing below it
                if index == 0:
                    to_fill.append((node, element, None))
                add_stop(index + 1)
                return index + 1
            add_stop(0)  # its subtree's end, once numbered
            # The state children, its transitions, and whether it holds anything else of
            # SCXML's: one pass.
            kids = []
            transitions = []
            other = False
            for c in below_all:
                child = facts[c]
                if child[1]:  # an SCXML element
                    if child[0] in state_like:
                        kids.append(c)
                    elif child[0] == "transition":
                        transitions.append(c)
                    else:
                        other = True
            # _fill compiles what a state holds besides states (transitions, blocks, data,
            # invokes, <initial>, an initial attribute), in document order; a state holding
            # nothing else has only its default initial transition, made on first read (see
            # UnreadStateNode).
            # (lxml is asked for "initial" only when the state has an attribute besides its
            # id: a read of lxml's mapping costs three times its length, see parse._attributes)
            if (
                other
                or index == 0
                or (kids and len(attributes) > (given_id is not None) and "initial" in attributes)
            ):
                to_fill.append((node, element, None))
            elif transitions:
                # an atomic state (no children but history pseudo-states, if any) that holds
                # transitions only: _fill_transitions
                atomic = kind is _ATOMIC and all(facts[c][0] == "history" for c in kids)
                to_fill.append((node, element, transitions if atomic else None))
            stop = index + 1
            if kids:
                history = []
                child_depth = depth + 1
                for child in kids:
                    if facts[child][0] == "history":
                        history.append(stop)
                    stop = number(child, stop, index, child_depth)
                if history:
                    node.history = tuple(history)
                if kind is _ATOMIC and len(history) < len(kids):
                    node.kind = _COMPOUND
            # States are numbered in document order (preorder), so a state's descendants are
            # the indexes numbered while its children were: up to ``stop``.
            stops[index] = stop
            return stop

        number(element, len(states), parent, depth)
        number = None  # type: ignore[assignment]  # the closure's cycle, broken

    def _fill_transitions(self, node: StateNode, transitions: list[etree._Element]) -> None:
        """_fill for an atomic state that holds transitions and nothing else of SCXML's but
        history pseudo-states (the commonest state): no grouping of its children."""
        index, transition = node.index, self._transition
        node.transitions = tuple([transition(t, index) for t in transitions])

    def _fill(self, node: StateNode, element: etree._Element) -> None:
        groups = self._groups(self._facts[element][2])
        transitions = groups.get("transition")
        if transitions is not None:
            index, transition = node.index, self._transition
            node.transitions = tuple([transition(t, index) for t in transitions])
            if len(groups) == 1 and node.kind is _ATOMIC:
                return  # transitions only (the commonest state): nothing else to compile
        none: list[etree._Element] = []
        if "onentry" in groups:
            node.onentry = tuple(
                [self._block(b, f"onentry:{node.id}:{i}") for i, b in enumerate(groups["onentry"])]
            )
        if "onexit" in groups:
            node.onexit = tuple(
                [self._block(b, f"onexit:{node.id}:{i}") for i, b in enumerate(groups["onexit"])]
            )
        if "datamodel" in groups:
            node.datas = tuple(
                [self._data(d) for dm in groups["datamodel"] for d in self.kids(dm, "data")]
            )
            self.has_data = self.has_data or bool(node.datas)
        if "invoke" in groups:
            node.invokes = tuple([self._invoke(i, node) for i in groups["invoke"]])
        for dd in groups.get("donedata", none):
            node.donedata = DoneData(self._content(dd), self._params(dd), *self.pos(dd))
        if node.kind in _HISTORY_KINDS:
            defaults = groups.get("transition")
            if defaults:
                node.initial = self._transition(defaults[0], node.index, register=False)
        elif node.kind in _WITH_INITIAL:
            node.initial = self._initial(node, element, groups)

    def _initial(
        self, node: StateNode, element: etree._Element, groups: dict[str, list[etree._Element]]
    ) -> Transition | None:
        initial_attr = self._facts[element][3].get("initial")
        if initial_attr:
            targets = tuple(self.ids[t] for t in initial_attr.split() if t in self.ids)
            return self._synthetic(node.index, targets, element)
        initial_elements = groups.get("initial")
        if initial_elements:
            transitions = self.kids(initial_elements[0], "transition")
            if transitions:
                return self._transition(transitions[0], node.index, register=False)
        # (from the structure: node.children would make all its unread slots now)
        states = self.states
        for child in self.structure.children(node.index):
            if states[child].kind not in _HISTORY_KINDS:
                return self._synthetic(node.index, (child,), element)
        return None

    def _synthetic(
        self, source: int, targets: tuple[int, ...], element: etree._Element
    ) -> Transition:
        line, _ = self.pos(element)
        return Transition(-1, source, (), None, None, targets, False, NO_INITIAL_BODY, line)

    def _transition(
        self, element: etree._Element, source: int, *, register: bool = True
    ) -> Transition:
        _, _, children, attributes, line, column = self._facts[element]
        event_text = attributes.get("event")
        if event_text:
            # the same event attribute on many transitions is split once (immutable tuples)
            events = self._events.get(event_text)
            if events is None:
                events = self._events[event_text] = tuple(
                    [split_descriptor(t) for t in event_text.split()]
                )
        else:
            events = ()
        if not events:  # none, or only whitespace
            event_text = None
        target = attributes.get("target")
        ids = self.ids
        targets = tuple([ids[t] for t in target.split() if t in ids]) if target else ()
        index = len(self.transitions) if register else -1
        cond = attributes.get("cond")
        transition = Transition(
            index,
            source,
            events,
            event_text,
            self.make_expr(cond, element) if cond is not None else None,
            targets,
            attributes.get("type") == "internal",
            Block(
                f"transition:{index}" if register else f"initial:{self.states[source].id}",
                self._actions(children) if children else (),
            ),
            line,
            column,
        )
        if register:
            self.transitions.append(transition)
        return transition

    def _data(self, element: etree._Element) -> Data:
        line, column = self.pos(element)
        src = element.get("src")
        if src is not None:
            text = self.resolve(src, element, fatal=False)
            if text is None:
                return Data(element.get("id", ""), None, src=src, line=line, column=column)
            return Data(
                element.get("id", ""),
                None,
                self._literal(element, text_value(text)),
                True,
                src=src,
                line=line,
                column=column,
            )
        has_body, body = self._body(element)
        return Data(
            element.get("id", ""),
            self.expr(element, "expr"),
            body,
            has_body,
            line=line,
            column=column,
        )

    def _invoke(self, element: etree._Element, node: StateNode) -> Invoke:
        line, column = self.pos(element)
        finalizes = self.kids(element, "finalize")
        finalize = (
            self._block(finalizes[0], f"finalize:{node.id}:{len(self.invokes)}")
            if finalizes
            else Block("finalize", ())
        )
        invoke = Invoke(
            index=len(self.invokes),
            state=node.index,
            type=element.get("type"),
            typeexpr=self.expr(element, "typeexpr"),
            src=element.get("src"),
            srcexpr=self.expr(element, "srcexpr"),
            id=element.get("id"),
            idlocation=self.expr(element, "idlocation"),
            namelist=self._namelist(element),
            params=self._params(element),
            content=self._content(element),
            autoforward=element.get("autoforward") == "true",
            finalize=finalize,
            line=line,
            column=column,
        )
        self.invokes.append(invoke)
        return invoke

    # -- executable content ----------------------------------------------------------------

    def _block(self, element: etree._Element, owner: str) -> Block:
        return Block(owner, self._actions(self._facts[element][2]))

    def _actions(self, children: Sequence[etree._Element]) -> tuple[Action, ...]:
        """The actions of the executable content among ``children``, in order."""
        if not children:
            return ()
        facts = self._facts
        action = self._action
        return tuple(
            [
                action(c)
                for c in children
                if facts[c][1] and facts[c][0] != "elseif" and facts[c][0] != "else"
            ]
        )

    def _action(self, element: etree._Element) -> Action:
        name = self._facts[element][0]
        index = self.content_counter
        self.content_counter += 1
        line, column = self.pos(element)
        self.content_columns.append(column)
        if name == "raise":
            return Raise(index, line, element.get("event", ""))
        if name == "log":
            return Log(index, line, element.get("label"), self.expr(element, "expr"))
        if name == "assign":
            location = self.expr(element, "location")
            assert location is not None
            has_body, body = self._body(element)
            return Assign(index, line, location, self.expr(element, "expr"), body, has_body)
        if name == "script":
            src = element.get("src")
            text = (
                (self.resolve(src, element, fatal=True) or "")
                if src is not None
                else (element.text or "")
            )
            return Script(index, line, self.make_expr(text, element), src)
        if name == "if":
            branches: list[tuple[Expr | None, tuple[Action, ...]]] = []
            cond: Expr | None = self.expr(element, "cond")
            current: list[Action] = []
            for child in self.kids(element):
                child_name = self._facts[child][0]
                if child_name in ("elseif", "else"):
                    branches.append((cond, tuple(current)))
                    cond = self.expr(child, "cond") if child_name == "elseif" else None
                    current = []
                else:
                    current.append(self._action(child))
            branches.append((cond, tuple(current)))
            return If(index, line, tuple(branches))
        if name == "foreach":
            array = self.expr(element, "array")
            item = self.expr(element, "item")
            assert array is not None and item is not None
            return Foreach(
                index,
                line,
                array,
                item,
                self.expr(element, "index"),
                self._actions(self._facts[element][2]),
            )
        if name == "send":
            delay = element.get("delay")
            return Send(
                index,
                line,
                event=element.get("event"),
                eventexpr=self.expr(element, "eventexpr"),
                target=element.get("target"),
                targetexpr=self.expr(element, "targetexpr"),
                type=element.get("type"),
                typeexpr=self.expr(element, "typeexpr"),
                id=element.get("id"),
                idlocation=self.expr(element, "idlocation"),
                delay_ms=parse_delay(delay) if delay is not None else None,
                delayexpr=self.expr(element, "delayexpr"),
                namelist=self._namelist(element),
                params=self._params(element),
                content=self._content(element),
                expires_ms=parse_expiry(element.get(EXPIRES, self.document.root.get(EXPIRES))),
            )
        if name == "cancel":
            return Cancel(index, line, element.get("sendid"), self.expr(element, "sendidexpr"))
        raise AssertionError(f"validated documents have no executable <{name}>")

    def _namelist(self, element: etree._Element) -> tuple[Expr, ...]:
        return tuple(self.make_expr(n, element) for n in (element.get("namelist") or "").split())

    def _params(self, element: etree._Element) -> tuple[Param, ...]:
        return tuple(
            Param(p.get("name", ""), self.expr(p, "expr"), self.expr(p, "location"))
            for p in self.kids(element, "param")
        )

    def _body(self, element: etree._Element) -> tuple[bool, Any]:
        has_body, body = body_value(element)
        return has_body, self._literal(element, body)

    def _literal(self, element: etree._Element, value: Any) -> Any:
        """A literal value; one no datamodel could hold is a warning here (a stored chart
        still compiles; binding it is error.execution) that the load doors refuse."""
        if isinstance(value, UnreadableValue):
            line, column = self.pos(element)
            self.problems.append(
                Problem(line, column, value.reason, "warning", LoadCheck.VALUE_DEPTH)
            )
        return value

    def _content(self, element: etree._Element) -> Content | None:
        contents = self.kids(element, "content")
        if not contents:
            return None
        content = contents[0]
        has_body, body = self._body(content)
        return Content(self.expr(content, "expr"), body, has_body)


def _any_error(problems: list[Problem]) -> bool:
    """Whether ``problems`` holds an error (a document may hold a hundred thousand
    warnings: looked for in C)."""
    return "error" in map(_SEVERITY, problems)


_SEVERITY = attrgetter("severity")


def compile_document(
    document: ParsedDocument,
    *,
    resolver: Resolver = default_resolver,
    base_path: str | None = None,
    source_name: str | None = None,
    default_datamodel: str = "null",
) -> Chart:
    """Validate and compile ``document``. ``default_datamodel`` is the datamodel of an
    ``<scxml>`` without a ``datamodel`` attribute ("null" or "ecmascript")."""
    problems = validate(document, default_datamodel) + outside.problems(document)
    if _any_error(problems):
        raise ChartError(problems, source_name=source_name)
    compiler = _Compiler(document, resolver, base_path)
    states, script = compiler.compile()
    if _any_error(compiler.problems):
        raise ChartError(problems + compiler.problems, source_name=source_name)
    root = document.root
    declared = root.get("datamodel")
    datamodel = declared if declared is not None else default_datamodel
    # (not read from the states: that would fill every unread slot of every one of them)
    code_free = not compiler.expressions and not compiler.has_data
    return Chart(
        name=root.get("name"),
        datamodel=datamodel,
        engine="null" if declared is None and code_free else datamodel,
        binding=root.get("binding", "early"),
        states=tuple(states),
        transitions=tuple(compiler.transitions),
        expressions=tuple(compiler.expressions),
        invokes=tuple(compiler.invokes),
        script=script,
        ids=compiler.ids,
        source_hash=document.sha256,
        base_path=base_path,
        warnings=tuple(problems) + tuple(compiler.problems),
        content_columns=tuple(compiler.content_columns),
        external_events=root.get(outside.EXTERNAL_EVENTS),
    )


def load_chart(
    source: str | bytes,
    *,
    base_path: str | Path | None = None,
    resolver: Resolver = default_resolver,
    source_name: str | None = None,
    default_datamodel: str = "null",
) -> Chart:
    """Parse, validate and compile ``source``. Raises ChartError listing every problem.
    ``default_datamodel``: the datamodel of an ``<scxml>`` without a ``datamodel``
    attribute (the spec leaves it to the platform; the core's is "null")."""
    with _collector_paused():
        # The document (its tree, positions and outline) is dropped as compile_document
        # returns, before the collector runs again: only the chart is left for it to see.
        return compile_document(
            parse_document(source),
            resolver=resolver,
            base_path=str(base_path) if base_path is not None else None,
            source_name=source_name,
            default_datamodel=default_datamodel,
        )


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused while a document is loaded: loading makes
    hundreds of thousands of objects that all stay alive, and the collector would walk them
    again and again (about a third of the time on a 2 MB chart). What loading leaves for it
    is collected once it runs again."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def load_chart_file(
    path: str | Path, *, resolver: Resolver = default_resolver, default_datamodel: str = "null"
) -> Chart:
    """Load the chart in the file ``path``. Reads at most one byte more than a document may
    have (a bigger or endless file is refused with ChartError); OSError when unreadable."""
    path = Path(path)
    try:
        data = read_document(path)
    except ChartError as exc:
        raise ChartError(exc.problems, source_name=str(path)) from None
    return load_chart(
        data,
        base_path=path.parent,
        resolver=resolver,
        source_name=str(path),
        default_datamodel=default_datamodel,
    )
