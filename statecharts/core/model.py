"""The compiled, interned form of a chart.

States are numbered in document order (the ``<scxml>`` root is 0), so "document order" and
"entry order" are integer comparisons, and every ancestor/descendant question is a tuple or
set lookup (each state's made on first read, from the chart's :class:`Structure`, then kept).
Nothing here changes after compilation but those first reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any


class Kind(IntEnum):
    ROOT = 0
    ATOMIC = 1
    COMPOUND = 2
    PARALLEL = 3
    FINAL = 4
    HISTORY_SHALLOW = 5
    HISTORY_DEEP = 6


class StateRange:
    """The states numbered ``start`` to ``stop - 1``: the descendants of a state with a large
    subtree (states are numbered in document order, so a subtree is one range).

    It answers what the interpreter asks of a set of state indexes (``in``, ``set & it``,
    iteration, ``len``) in constant memory: storing every large subtree as a frozenset made
    a deeply nested chart take memory in its size times its depth.
    """

    __slots__ = ("start", "stop")

    def __init__(self, start: int, stop: int) -> None:
        self.start = start
        self.stop = stop

    def __contains__(self, index: object) -> bool:
        return type(index) is int and self.start <= index < self.stop

    def __and__(self, other: Iterable[int]) -> set[int]:
        start, stop = self.start, self.stop
        return {i for i in other if start <= i < stop}

    __rand__ = __and__

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.start, self.stop))

    def __len__(self) -> int:
        return self.stop - self.start

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StateRange):
            return (self.start, self.stop) == (other.start, other.stop)
        if isinstance(other, set | frozenset):
            return len(other) == len(self) and all(i in self for i in other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.start, self.stop))

    def __repr__(self) -> str:
        return f"StateRange({self.start}, {self.stop})"


# Subtrees up to this many descendants keep a frozenset (the fastest membership test); the
# rest a StateRange. Together they hold at most this many entries per state.
SMALL_SUBTREE = 64


def descendants_of(index: int, stop: int) -> frozenset[int] | StateRange:
    """The descendants of state ``index`` whose subtree ends before ``stop``."""
    if stop - index - 1 <= SMALL_SUBTREE:
        return frozenset(range(index + 1, stop))
    return StateRange(index + 1, stop)


class Structure:
    """The tree of a chart's states, one entry per state index: its parent's index (-1 for
    the root) and the index after its subtree (states are numbered in document order, so a
    subtree is the range from the state to there). Every StateNode of a chart shares it.

    Each state's ``ancestors`` tuple, ``descendants`` set, ``children`` tuple and default
    initial transition are made from it the first time they are read (see UnreadStateNode):
    built for every state at compile time, they were most of the memory and a fifth of the
    loading time of a deeply nested chart (a tuple of its depth and a set of up to
    SMALL_SUBTREE ints per state), and most are never read.
    """

    __slots__ = ("_ancestors", "parents", "stops")

    def __init__(self, parents: list[int], stops: list[int]) -> None:
        self.parents = parents
        self.stops = stops
        # the ancestors tuples made so far, by parent: all the children of a state share one
        # tuple, the parent's own with the parent in front (one copy per parent)
        self._ancestors: dict[int, tuple[int, ...]] = {-1: ()}

    def ancestors(self, index: int) -> tuple[int, ...]:
        """The ancestors of state ``index``: parent first, root last."""
        made = self._ancestors
        parent = self.parents[index]
        found = made.get(parent)
        if found is not None:
            return found
        # up to the nearest state whose children's tuple is made (the root's parent's is),
        # then down again, one concatenation per state on the way
        parents = self.parents
        missing = []
        while parent not in made:
            missing.append(parent)
            parent = parents[parent]
        ancestors = made[parent]
        for parent in reversed(missing):
            ancestors = (parent,) + ancestors  # noqa: RUF005  (one copy; the unpacking, two)
            made[parent] = ancestors
        return ancestors

    def descendants(self, index: int) -> frozenset[int] | StateRange:
        """The descendants of state ``index``: see descendants_of."""
        return descendants_of(index, self.stops[index])

    def children(self, index: int) -> tuple[int, ...]:
        """The child states of state ``index``, in document order: the first is numbered
        right after it, each next one right after the subtree of the one before."""
        stops = self.stops
        stop = stops[index]
        children = []
        child = index + 1
        while child < stop:
            children.append(child)
            child = stops[child]
        return tuple(children)


@dataclass(frozen=True, slots=True)
class Expr:
    """An expression or script in the datamodel's language, numbered for per-engine caching."""

    index: int
    source: str
    line: int
    column: int


# ---- executable content -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    expr: Expr | None
    location: Expr | None


@dataclass(frozen=True, slots=True)
class Content:
    """``<content>``: either an expression or a literal body already parsed to a value."""

    expr: Expr | None
    body: Any = None  # JSON value, str, or an XmlValue
    has_body: bool = False


@dataclass(frozen=True, slots=True)
class XmlValue:
    """Inline XML content (e.g. ``<content><books .../></content>``): markup, and its tree
    (the JSON form the ECMAScript sandbox builds a DOM from)."""

    markup: str
    tree: Any = field(default=None, compare=False, hash=False)


@dataclass(frozen=True, slots=True)
class UnreadableValue:
    """A literal body no datamodel could hold (JSON nested past the datamodel's depth bound,
    or deeper than the JSON reader can go). Loading refuses it (a problem coded
    ``value-depth``); a chart stored before that check still compiles, and binding or
    sending the value is ``error.execution`` with ``reason``."""

    reason: str


@dataclass(frozen=True, slots=True)
class Action:
    """Base of executable content. ``content_index`` numbers every element in the document."""

    content_index: int
    line: int


@dataclass(frozen=True, slots=True)
class Raise(Action):
    event: str


@dataclass(frozen=True, slots=True)
class Log(Action):
    label: str | None
    expr: Expr | None


@dataclass(frozen=True, slots=True)
class Assign(Action):
    location: Expr
    expr: Expr | None
    body: Any = None
    has_body: bool = False


@dataclass(frozen=True, slots=True)
class Script(Action):
    script: Expr
    src: str | None = None  # the reference its text was read from, if any


@dataclass(frozen=True, slots=True)
class If(Action):
    # (cond or None for <else>, actions) in document order
    branches: tuple[tuple[Expr | None, tuple[Action, ...]], ...]


@dataclass(frozen=True, slots=True)
class Foreach(Action):
    array: Expr
    item: Expr
    index: Expr | None
    actions: tuple[Action, ...]


@dataclass(frozen=True, slots=True)
class Send(Action):
    event: str | None
    eventexpr: Expr | None
    target: str | None
    targetexpr: Expr | None
    type: str | None
    typeexpr: Expr | None
    id: str | None
    idlocation: Expr | None
    delay_ms: int | None
    delayexpr: Expr | None
    namelist: tuple[Expr, ...]
    params: tuple[Param, ...]
    content: Content | None
    # How late a delayed send may still be delivered (``ds:expires``, its own or the chart's:
    # statecharts.core.expiry); None: however late (SCXML 6.2).
    expires_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Cancel(Action):
    sendid: str | None
    sendidexpr: Expr | None


@dataclass(frozen=True, slots=True)
class Block:
    """One ``<onentry>``, ``<onexit>``, transition body or ``<finalize>``: run until an error."""

    owner: str  # e.g. "onentry:s1:0", "transition:4", "finalize:s2:0"
    actions: tuple[Action, ...]


# ---- structure -----------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class Transition:
    index: int  # document order over the whole chart
    source: int
    events: tuple[tuple[str, ...], ...]  # split descriptors; () matches any event
    event_text: str | None
    cond: Expr | None
    targets: tuple[int, ...]
    internal: bool
    body: Block
    line: int = 0
    column: int = 0

    @property
    def eventless(self) -> bool:
        return self.event_text is None


@dataclass(frozen=True, slots=True)
class Data:
    id: str
    expr: Expr | None
    body: Any = None
    has_body: bool = False
    src: str | None = None
    line: int = 0
    column: int = 0


@dataclass(frozen=True, slots=True)
class DoneData:
    content: Content | None
    params: tuple[Param, ...]
    line: int = 0
    column: int = 0


@dataclass(frozen=True, slots=True)
class Invoke:
    index: int  # position among all invokes of the chart, document order
    state: int
    type: str | None
    typeexpr: Expr | None
    src: str | None
    srcexpr: Expr | None
    id: str | None
    idlocation: Expr | None
    namelist: tuple[Expr, ...]
    params: tuple[Param, ...]
    content: Content | None
    autoforward: bool
    finalize: Block
    line: int = 0
    column: int = 0


@dataclass(slots=True, eq=False)
class StateNode:
    index: int
    id: str
    kind: Kind
    parent: int  # -1 for the root
    line: int = 0
    column: int = 0
    children: tuple[int, ...] = ()  # child states (history pseudo-states included), doc order
    transitions: tuple[Transition, ...] = ()
    initial: Transition | None = None  # compound states and history defaults
    onentry: tuple[Block, ...] = ()
    onexit: tuple[Block, ...] = ()
    invokes: tuple[Invoke, ...] = ()
    datas: tuple[Data, ...] = ()
    donedata: DoneData | None = None
    ancestors: tuple[int, ...] = ()  # parent first, root last
    descendants: frozenset[int] | StateRange = frozenset()  # see descendants_of
    history: tuple[int, ...] = ()  # history children
    depth: int = 0
    # the chart's tree (the compiler's states are made from it: see UnreadStateNode)
    structure: Structure | None = field(default=None, repr=False)

    @property
    def is_atomic(self) -> bool:
        return self.kind in (Kind.ATOMIC, Kind.FINAL)

    @property
    def is_compound(self) -> bool:
        return self.kind in (Kind.COMPOUND, Kind.ROOT)

    @property
    def is_history(self) -> bool:
        return self.kind in (Kind.HISTORY_SHALLOW, Kind.HISTORY_DEEP)


# The body of every default initial transition made up by the compiler: empty, immutable,
# one for all of them.
NO_INITIAL_BODY = Block("initial", ())
_COMPOUND = Kind.COMPOUND


class _MadeOnRead:
    """On UnreadStateNode, the attribute of one of the four slots made on first read: reads
    the slot and, when it is empty, makes all four first (UnreadStateNode._make)."""

    __slots__ = ("slot",)

    def __init__(self, name: str) -> None:
        self.slot = StateNode.__dict__[name]  # the slot itself (a member descriptor)

    def __get__(self, node: UnreadStateNode | None, owner: type | None = None) -> Any:
        if node is None:
            return self
        try:
            return self.slot.__get__(node, StateNode)
        except AttributeError:  # empty: the first read
            node._make()
            return self.slot.__get__(node, StateNode)

    def __set__(self, node: UnreadStateNode, value: Any) -> None:
        self.slot.__set__(node, value)


_INITIAL_SLOT = StateNode.__dict__["initial"]


class UnreadStateNode(StateNode):
    """A StateNode as the compiler makes it: its ``ancestors``, ``descendants`` and
    ``children`` slots are empty, and so is ``initial`` unless the compiler set it (a state
    with an initial attribute, an ``<initial>`` or something else to compile). The first
    read of an empty one makes all four, from the chart's structure (a compound state's
    default initial transition: to its first child that is not a history), and the object
    becomes a plain StateNode (its class switched; the layout is the same).

    Most states of a big chart are never read (a deeply nested one's ancestors tuples and
    descendant sets were most of its memory and a fifth of its loading time). The four are
    descriptors on this class only (not a ``__getattr__``: on a class that has one, every
    attribute read goes through it, slower, and Python 3.11 cannot specialise the reads),
    and the interpreter reads states on its hot paths: a state it has read once is a plain
    StateNode. Every other field is set here: the interpreter's constructor reads every
    state's transitions, invokes and history, and starting it makes only the states it
    enters.
    """

    __slots__ = ()

    ancestors = _MadeOnRead("ancestors")  # type: ignore[assignment]
    descendants = _MadeOnRead("descendants")  # type: ignore[assignment]
    children = _MadeOnRead("children")  # type: ignore[assignment]
    initial = _MadeOnRead("initial")  # type: ignore[assignment]

    def __init__(
        self,
        index: int,
        id: str,
        kind: Kind,
        parent: int,
        line: int,
        column: int,
        depth: int,
        structure: Structure,
    ) -> None:
        # every field but the four made on first read (the defaults: StateNode's)
        self.index = index
        self.id = id
        self.kind = kind
        self.parent = parent
        self.line = line
        self.column = column
        self.transitions = ()
        self.onentry = ()
        self.onexit = ()
        self.invokes = ()
        self.datas = ()
        self.donedata = None
        self.history = ()
        self.depth = depth
        self.structure = structure

    def _make(self) -> None:
        """Makes the four slots made on first read; then this is a plain StateNode."""
        structure, index = self.structure, self.index
        assert structure is not None
        self.ancestors = structure.ancestors(index)
        self.descendants = structure.descendants(index)
        self.children = structure.children(index)
        try:
            _INITIAL_SLOT.__get__(self, StateNode)
        except AttributeError:
            self.initial = self._default_initial()
        self.__class__ = StateNode

    def _default_initial(self) -> Transition | None:
        """A compound state's first child that is not a history pseudo-state; nothing for
        any other state (the compiler sets the initial of a state that says which)."""
        if self.kind is not _COMPOUND:
            return None
        history = self.history
        if not history:
            first = self.children[0]
        else:
            # (a set: a state with thousands of history children made this scan quadratic)
            skipped = frozenset(history)
            first = next(c for c in self.children if c not in skipped)
        return Transition(
            -1, self.index, (), None, None, (first,), False, NO_INITIAL_BODY, self.line
        )

    def __repr__(self) -> str:
        self.ancestors  # noqa: B018  (made, and self is a plain StateNode from here on)
        return repr(self)

    def __reduce_ex__(self, protocol: Any) -> Any:
        # pickle and copy: made first, then as the plain StateNode it has become (reading
        # the slots after taking the class would switch it under them)
        self._make()
        return object.__reduce_ex__(self, protocol)


@dataclass(frozen=True, slots=True)
class OutsideEvents:
    """Which events the outside may send (``statecharts.core.outside``): the chart's own
    list (``declared``: split descriptors; ``()`` is ``*``), else every name but those it
    only sends itself (``self_only``). The default leaves nothing out."""

    declared: tuple[tuple[str, ...], ...] | None = None
    self_only: frozenset[str] = frozenset()

    def may_send(self, name: str) -> bool:
        """Whether the doors offer ``name`` (an event name or a descriptor as an available
        event shows it) to the outside."""
        declared = self.declared
        if declared is None:
            return name not in self.self_only
        parts = tuple(name.split("."))
        return any(parts[: len(d)] == d for d in declared)


@dataclass(slots=True, eq=False)
class Chart:
    """A validated, compiled chart. Share it freely: it is never mutated after compile."""

    name: str | None
    datamodel: str  # "null" or "ecmascript"
    binding: str  # "early" or "late"
    states: tuple[StateNode, ...]
    transitions: tuple[Transition, ...]
    expressions: tuple[Expr, ...]
    invokes: tuple[Invoke, ...]
    script: Block | None  # top-level <script>
    ids: dict[str, int]
    source_hash: str  # sha256 of the source bytes: the chart's identity
    base_path: str | None = None  # folder used to resolve relative ``file:`` URIs
    warnings: tuple[Any, ...] = ()
    # The datamodel the interpreter creates: ``datamodel``, except "null" for a chart that
    # was given its datamodel by default and has no code and no data at all (it cannot tell
    # the difference, and pays nothing for an engine it would never use).
    engine: str = ""
    # The column of each executable content element's start tag, by its content_index (its
    # line is the action's own): where an error.execution it raises points.
    content_columns: tuple[int, ...] = ()
    # Its ``ds:external-events`` (None: not declared), and which events the doors offer the
    # outside, made on first use (``statecharts.core.outside.of``: it reads every state, and
    # loading makes none of them).
    external_events: str | None = None
    _outside: OutsideEvents | None = field(default=None, repr=False)
    # Per event-name cache of candidate transitions per state is built lazily by the
    # interpreter; it lives here so every interpreter of this chart shares it.
    _event_cache: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def root(self) -> StateNode:
        return self.states[0]

    def state(self, state_id: str) -> StateNode:
        return self.states[self.ids[state_id]]
