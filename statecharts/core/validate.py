"""Validation of a parsed SCXML document: every problem at once, each with line:column.

The rules are a table per element name (``statecharts.core.element_rules``); the validator
walks the document once, runs each element's rules, and notes what the rules about
references (ids, initial states, targets) need; those run once every id is known."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from operator import attrgetter

from lxml import etree

from statecharts.core.element_rules import (
    DATAMODELS,
    EXECUTABLE,
    FREE_FORM,
    MAX_CHART_NAME_LENGTH,
    MAX_INVOKE_ID_LENGTH,
    MAX_INVOKE_TYPE_LENGTH,
    MAX_SEND_ID_LENGTH,
    MAX_STATE_ID_LENGTH,
    ROOT_RULES,
    RULES,
    STATE_LIKE,
    unknown_attributes,
)
from statecharts.core.errors import Problem
from statecharts.core.parse import SCXML_NS, ParsedDocument, namespace

__all__ = [
    "DATAMODELS",
    "EXECUTABLE",
    "MAX_CHART_NAME_LENGTH",
    "MAX_INVOKE_ID_LENGTH",
    "MAX_INVOKE_TYPE_LENGTH",
    "MAX_SEND_ID_LENGTH",
    "MAX_STATE_ID_LENGTH",
    "REFERENCE_RULES",
    "STATE_LIKE",
    "StateIndex",
    "Validator",
    "validate",
]


class Validator:
    def __init__(self, document: ParsedDocument, default_datamodel: str = "null") -> None:
        self.default_datamodel = default_datamodel
        self.document = document
        self.problems: list[Problem] = []
        self.root = document.root
        self.scxml_ns: str | None = namespace(self.root)
        # Every element read once, at parse (see parse.Outline and parse.Facts): what the
        # methods below read, and the rules that run on most elements read directly.
        self.facts = document.outline.facts
        # The <transition> elements whose targets must exist (those of <initial> and
        # <history> are checked with their parent), found by check_element's walk; and
        # whether that walk left out an SCXML subtree (an element where it is not allowed),
        # whose transitions are then found by a walk of their own.
        self._transitions: list[etree._Element] = []
        self._skipped_subtree = False
        # The same walk lists the state-like elements in document order (preorder), and
        # the rules note the states whose initial targets or history defaults need checking
        # once every id is known (check_references_of).
        self._states: list[etree._Element] = []
        self._special: list[etree._Element] = []
        self.good_events: set[str] = set()  # event attributes found without a problem

    # -- what rules ask ------------------------------------------------------------------------

    def error(self, element: etree._Element, message: str) -> Problem:
        line, column = self.document.position(element)
        return Problem(line, column, message)

    def warning(self, element: etree._Element, message: str) -> Problem:
        line, column = self.document.position(element)
        return Problem(line, column, message, severity="warning")

    def is_scxml(self, element: etree._Element) -> bool:
        return self.facts[element][1]

    def name(self, element: etree._Element) -> str:
        return self.facts[element][0]

    def children(self, element: etree._Element) -> Sequence[etree._Element]:
        """The element children of ``element`` (comments and PIs left out)."""
        return self.facts[element][2]

    def attributes(self, element: etree._Element) -> Mapping[str, str]:
        """The attributes of ``element`` (what ``element.get`` reads)."""
        return self.facts[element][3]

    def check_references_of(self, element: etree._Element) -> None:
        """Run ``element``'s rules about references (REFERENCE_RULES) once every id is known."""
        self._special.append(element)

    # -- entry -----------------------------------------------------------------------------

    def run(self) -> list[Problem]:
        root = self.root
        if self.name(root) != "scxml":
            self.problems.append(
                self.error(root, f"the root element must be <scxml>, not <{self.name(root)}>")
            )
            return self.problems
        if self.scxml_ns is None:
            self.problems.append(
                self.warning(root, f'<scxml> has no namespace; expected xmlns="{SCXML_NS}"')
            )
        elif self.scxml_ns != SCXML_NS:
            self.problems.append(
                self.error(
                    root, f"<scxml> is in namespace {self.scxml_ns!r}, expected {SCXML_NS!r}"
                )
            )
            return self.problems
        datamodel = root.get("datamodel", self.default_datamodel)
        for rule in ROOT_RULES:
            self.problems.extend(rule(self, root, self.attributes(root), datamodel))
        self.check_element(root, "", datamodel)
        self.check_references()
        return self.problems

    def check_element(self, element: etree._Element, parent_name: str, datamodel: str) -> None:
        """Run the rules of ``element`` and of its subtree (the one walk of the document)."""
        facts = self.facts
        name, _, children, attributes, _, _ = facts[element]
        rules = RULES[name]
        if name == "transition" and parent_name != "initial" and parent_name != "history":
            self._transitions.append(element)
        if name in STATE_LIKE:
            self._states.append(element)
        if not rules.attributes.issuperset(attributes):
            self.problems.extend(unknown_attributes(self, element, attributes, datamodel))
        for attribute, rule in rules.rules:
            if attribute is None or attribute in attributes:
                # (most find nothing and return an empty tuple: no call to extend then)
                found = rule(self, element, attributes, datamodel)
                if found:
                    self.problems.extend(found)
        if children and name not in FREE_FORM:
            allowed_children = rules.children
            for child in children:
                child_facts = facts[child]
                if child_facts[1] and child_facts[0] in allowed_children:
                    self.check_element(child, name, datamodel)
                else:
                    self.problems.append(
                        self._misplaced(child, child_facts[0], child_facts[1], name)
                    )

    def _misplaced(
        self, child: etree._Element, child_name: str, in_scxml: bool, name: str
    ) -> Problem:
        """The problem with ``child``, an element <name> does not allow: its subtree is not
        checked (the walk leaves it out)."""
        if not in_scxml:
            return self.warning(child, f"<{child_name}> is not an SCXML element; it is ignored")
        self._skipped_subtree = True
        if child_name not in RULES:
            return self.error(child, f"unknown SCXML element <{child_name}>")
        if RULES[name].executable_body:
            if child_name not in EXECUTABLE:
                return self.error(
                    child,
                    f"<{child_name}> is not executable content and cannot appear inside <{name}>",
                )
            return self.error(child, f"<{child_name}> may only appear inside <if>")
        if child_name in EXECUTABLE:
            return self.error(
                child,
                f"executable content <{child_name}> is not allowed inside "
                f"<{name}>; put it in <onentry>, <onexit> or a <transition>",
            )
        return self.error(child, f"<{child_name}> is not allowed inside <{name}>")

    # -- once every id is known ------------------------------------------------------------

    def check_references(self) -> None:
        """The state ids, then the rules about references of the root, of the state-like
        elements the rules noted, and of the transitions (not an <initial>'s or a
        <history>'s)."""
        if self._skipped_subtree:
            # The walk left out a subtree that may hold states and transitions: found again
            # by a walk of their own, every state-like element gets its reference rules.
            index = StateIndex(self, numbered=True)
            states = special = index.states
            transitions: Sequence[etree._Element] = [
                element
                for element in self._structure(self.root)
                if self.name(element) == "transition"
                and self._name_of_parent(element) not in ("initial", "history")
            ]
        else:
            # The walk went everywhere a state can be: its lists hold (the numbering is
            # needed for the noted states only: none, in most documents).
            index = StateIndex(self, numbered=bool(self._special))
            states, special, transitions = self._states, self._special, self._transitions
        self.problems.extend(index.add_ids(states))
        extend = self.problems.extend
        for rule in REFERENCE_RULES["scxml"]:
            extend(rule(self, self.root, index))
        facts = self.facts
        for element in special:
            for rule in REFERENCE_RULES[facts[element][0]]:
                found = rule(self, element, index)
                if found:
                    extend(found)
        # (rule by rule: the same problems, in the same order once sorted by position, as
        # element by element, without a lookup per transition)
        for rule in REFERENCE_RULES["transition"]:
            for element in transitions:
                found = rule(self, element, index)
                if found:
                    extend(found)

    def _name_of_parent(self, element: etree._Element) -> str:
        parent = element.getparent()
        found = self.facts.get(parent) if parent is not None else None
        return found[0] if found is not None else ""

    def _structure(self, element: etree._Element) -> Iterator[etree._Element]:
        """SCXML elements below ``element``, not entering free-form bodies such as <content>
        (iterative: nested generators cost the depth on every element)."""
        facts = self.facts
        stack = [iter(facts[element][2])]
        while stack:
            child = next(stack[-1], None)
            if child is None:
                stack.pop()
                continue
            name, in_scxml, children, _, _, _ = facts[child]
            if not in_scxml:
                continue
            yield child
            if name not in FREE_FORM:
                stack.append(iter(children))


class StateIndex:
    """The state ids of a document, and which state is inside which: every state-like
    element numbered in document order, with where its subtree ends in that order, so that
    "is a descendant of" is a comparison (linear for any shape; collecting the descendants
    per state was quadratic on deep or wide documents)."""

    def __init__(self, validator: Validator, *, numbered: bool) -> None:
        self.facts = validator.facts
        self._validator = validator
        self.ids: dict[str, etree._Element] = {}
        self.states: list[etree._Element] = []
        self._order: dict[etree._Element, int] = {}
        self._end: dict[etree._Element, int] = {}
        self._child_ids: dict[etree._Element, set[str]] = {}  # per parent of a <history>
        if numbered:
            self._number(validator.root)
        self._order[validator.root] = 0
        self._end[validator.root] = len(self.states)

    def _number(self, element: etree._Element) -> None:
        # recursive: the depth is bounded by parse.MAX_DEPTH
        facts, states, order, end = self.facts, self.states, self._order, self._end
        for child in facts[element][2]:
            name, in_scxml = facts[child][:2]
            if in_scxml and name in STATE_LIKE:
                states.append(child)
                order[child] = len(states)
                self._number(child)
                end[child] = len(states)

    def add_ids(self, states: Sequence[etree._Element]) -> Iterator[Problem]:
        """Index the ids of ``states`` (in document order), yielding the problems of each:
        not a valid id, too long, or already the id of an earlier state."""
        facts, validator = self.facts, self._validator
        known = self.ids.setdefault
        for element in states:
            state_id = facts[element][3].get("id")
            if state_id is None:
                continue
            problem = state_id_problem(validator, element, state_id)
            if problem is not None:
                yield problem
            first = known(state_id, element)  # one lookup: the first element with this id
            if first is not element:
                line, column = validator.document.position(first)
                yield validator.error(
                    element, f"duplicate id '{state_id}' (first defined at {line}:{column})"
                )

    def numbered(self, element: etree._Element) -> bool:
        return element in self._order

    def inside(self, token: str, container: etree._Element) -> bool:
        """Whether the state ``token`` (an existing id) is a descendant of ``container``."""
        return self._order[container] < self._order[self.ids[token]] <= self._end[container]

    def child_ids(self, validator: Validator, parent: etree._Element | None) -> set[str]:
        """The ids of the state-like children of ``parent``."""
        if parent is None:
            return set()
        found = self._child_ids.get(parent)
        if found is None:
            found = self._child_ids[parent] = {
                c.get("id")
                for c in validator.children(parent)
                if c.get("id") and validator.name(c) in STATE_LIKE
            }
        return found


# -- the rules about references, once every id is known --------------------------------------

_ID = re.compile(r"^[A-Za-z_][-\w.:]*$")

# A rule about references: (the validator, the element, the index of the states) -> its
# problems.
ReferenceRule = Callable[[Validator, etree._Element, StateIndex], Iterable[Problem]]


def root_initial_exists(
    v: Validator, element: etree._Element, index: StateIndex
) -> Iterable[Problem]:
    problems: list[Problem] = []
    initial = element.get("initial")
    for token in initial.split() if initial is not None else ():
        if token not in index.ids:
            problems.append(v.error(element, f"initial state '{token}' does not exist"))
    return problems


def state_id_problem(v: Validator, element: etree._Element, state_id: str) -> Problem | None:
    """A state id is a valid XML name that fits its column (duplicates: StateIndex)."""
    if not _ID.match(state_id):
        return v.error(element, f"'{state_id}' is not a valid id")
    if len(state_id) > MAX_STATE_ID_LENGTH:
        return v.error(
            element,
            f"state id '{state_id[:20]}...' is {len(state_id)} characters long; the "
            f"limit is {MAX_STATE_ID_LENGTH}",
        )
    return None


def initial_attribute_targets(
    v: Validator, element: etree._Element, index: StateIndex
) -> Iterable[Problem]:
    problems: list[Problem] = []
    initial = element.get("initial")
    for token in initial.split() if initial is not None else ():
        if token not in index.ids:
            problems.append(v.error(element, f"initial state '{token}' does not exist"))
        elif not index.inside(token, element):
            problems.append(
                v.error(
                    element, f"initial state '{token}' is not a descendant of '{element.get('id')}'"
                )
            )
    return problems


def initial_element_targets(
    v: Validator, element: etree._Element, index: StateIndex
) -> Iterable[Problem]:
    problems = []
    for child in v.children(element):
        if v.name(child) != "initial" or not v.is_scxml(child):
            continue
        for t in v.children(child):
            for token in (t.get("target") or "").split():
                if token not in index.ids:
                    problems.append(v.error(t, f"transition target '{token}' does not exist"))
                elif not index.inside(token, element):
                    problems.append(
                        v.error(
                            t,
                            f"<initial> target '{token}' is not a descendant of "
                            f"'{element.get('id')}'",
                        )
                    )
    return problems


def history_default_targets(
    v: Validator, element: etree._Element, index: StateIndex
) -> Iterable[Problem]:
    """A shallow history's default is a child of its parent; a deep one's, a descendant."""
    parent = element.getparent()
    deep = element.get("type", "shallow") == "deep"
    problems = []
    for t in v.children(element):
        for token in (t.get("target") or "").split():
            if token not in index.ids:
                problems.append(v.error(t, f"transition target '{token}' does not exist"))
            elif not (
                (parent is not None and index.numbered(parent) and index.inside(token, parent))
                if deep
                else token in index.child_ids(v, parent)
            ):
                kind = "descendant" if deep else "child"
                problems.append(
                    v.error(
                        t,
                        f"history default '{token}' must be a {kind} of the history's parent state",
                    )
                )
    return problems


def transition_targets(
    v: Validator, element: etree._Element, index: StateIndex
) -> Iterable[Problem]:
    target = v.facts[element][3].get("target")
    if not target:
        return ()
    ids = index.ids
    for token in target.split():
        if token not in ids:
            return [
                v.error(element, f"transition target '{token}' does not exist")
                for token in target.split()
                if token not in ids
            ]
    return ()


# element -> its rules about references. A state-like element gets them when the walk noted
# it (an initial state or a history default to check: Validator.check_references_of), or when
# the walk left out a subtree (then every one, found by a walk of their own); a <transition>
# that is not an <initial>'s or a <history>'s, always.
REFERENCE_RULES: dict[str, tuple[ReferenceRule, ...]] = {
    "scxml": (root_initial_exists,),
    "state": (initial_attribute_targets, initial_element_targets),
    "parallel": (initial_element_targets,),
    "final": (initial_element_targets,),
    "history": (initial_element_targets, history_default_targets),
    "transition": (transition_targets,),
}


_BY_POSITION = attrgetter("line", "column")


def validate(document: ParsedDocument, default_datamodel: str = "null") -> list[Problem]:
    """Every problem found in ``document`` (errors and warnings), in document order.
    ``default_datamodel``: the datamodel of an ``<scxml>`` without a ``datamodel`` attribute
    (the spec leaves it to the platform)."""
    problems = Validator(document, default_datamodel).run()
    return sorted(problems, key=_BY_POSITION)
