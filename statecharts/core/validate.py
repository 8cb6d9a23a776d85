"""Validation of a parsed SCXML document: every problem at once, each with line:column."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import repeat
from operator import attrgetter

from lxml import etree

from statecharts.core.delays import delay_problem, delay_syntax_problem
from statecharts.core.errors import LoadCheck, Problem
from statecharts.core.host import SCXML_SEND_TYPES
from statecharts.core.parse import SCXML_NS, ParsedDocument, namespace

DATAMODELS = ("null", "ecmascript")

EXECUTABLE = frozenset(
    {"raise", "if", "elseif", "else", "foreach", "log", "assign", "script", "send", "cancel"}
)
STATE_LIKE = frozenset({"state", "parallel", "final", "history"})
_PROPER_STATES = STATE_LIKE - {"history"}

# element -> (allowed attributes, required attributes, allowed SCXML children or None=executable)
_SCHEMA: dict[str, tuple[frozenset[str], frozenset[str], frozenset[str] | None]] = {
    "scxml": (
        frozenset({"initial", "name", "version", "datamodel", "binding", "exmode"}),
        frozenset(),
        frozenset({"state", "parallel", "final", "datamodel", "script"}),
    ),
    "state": (
        frozenset({"id", "initial"}),
        frozenset(),
        frozenset(
            {
                "onentry",
                "onexit",
                "transition",
                "initial",
                "state",
                "parallel",
                "final",
                "history",
                "datamodel",
                "invoke",
            }
        ),
    ),
    "parallel": (
        frozenset({"id"}),
        frozenset(),
        frozenset(
            {
                "onentry",
                "onexit",
                "transition",
                "state",
                "parallel",
                "history",
                "datamodel",
                "invoke",
            }
        ),
    ),
    "final": (frozenset({"id"}), frozenset(), frozenset({"onentry", "onexit", "donedata"})),
    "initial": (frozenset(), frozenset(), frozenset({"transition"})),
    "history": (frozenset({"id", "type"}), frozenset(), frozenset({"transition"})),
    "transition": (frozenset({"event", "cond", "target", "type"}), frozenset(), None),
    "onentry": (frozenset(), frozenset(), None),
    "onexit": (frozenset(), frozenset(), None),
    "finalize": (frozenset(), frozenset(), None),
    "datamodel": (frozenset(), frozenset(), frozenset({"data"})),
    "data": (frozenset({"id", "src", "expr"}), frozenset({"id"}), frozenset()),
    "donedata": (frozenset(), frozenset(), frozenset({"content", "param"})),
    "content": (frozenset({"expr"}), frozenset(), frozenset()),
    "param": (frozenset({"name", "expr", "location"}), frozenset({"name"}), frozenset()),
    "invoke": (
        frozenset(
            {"type", "typeexpr", "src", "srcexpr", "id", "idlocation", "namelist", "autoforward"}
        ),
        frozenset(),
        frozenset({"param", "finalize", "content"}),
    ),
    "raise": (frozenset({"event"}), frozenset({"event"}), frozenset()),
    "if": (frozenset({"cond"}), frozenset({"cond"}), None),
    "elseif": (frozenset({"cond"}), frozenset({"cond"}), frozenset()),
    "else": (frozenset(), frozenset(), frozenset()),
    "foreach": (frozenset({"array", "item", "index"}), frozenset({"array", "item"}), None),
    "log": (frozenset({"label", "expr"}), frozenset(), frozenset()),
    "assign": (frozenset({"location", "expr"}), frozenset({"location"}), frozenset()),
    "script": (frozenset({"src"}), frozenset(), frozenset()),
    "send": (
        frozenset(
            {
                "event",
                "eventexpr",
                "target",
                "targetexpr",
                "type",
                "typeexpr",
                "id",
                "idlocation",
                "delay",
                "delayexpr",
                "namelist",
            }
        ),
        frozenset(),
        frozenset({"param", "content"}),
    ),
    "cancel": (frozenset({"sendid", "sendidexpr"}), frozenset(), frozenset()),
}

_EXCLUSIVE = {
    "send": [
        ("event", "eventexpr"),
        ("target", "targetexpr"),
        ("type", "typeexpr"),
        ("id", "idlocation"),
        ("delay", "delayexpr"),
    ],
    "invoke": [("type", "typeexpr"), ("src", "srcexpr"), ("id", "idlocation")],
    "cancel": [("sendid", "sendidexpr")],
    "param": [("expr", "location")],
    "data": [("src", "expr")],
}

# Lengths the durable layer stores in 200-character database columns; these constants mirror
# those columns (keep them in step): <scxml name> goes into Chart.name, a static <send id>
# into Outbox.send_id and Timer.send_id, and a state id into the name of the block that
# scheduled a timer, Timer.owner ("finalize:<state id>:<n>", so 20 characters are left for
# the rest). A static <invoke id> goes into Invocation.invokeid and the child's
# Execution.invokeid, a static <invoke type> into Invocation.type. A longer value would load
# here and then fail on every write.
MAX_CHART_NAME_LENGTH = 200
MAX_SEND_ID_LENGTH = 200
MAX_INVOKE_ID_LENGTH = 200
MAX_INVOKE_TYPE_LENGTH = 200
MAX_STATE_ID_LENGTH = 180

_ID = re.compile(r"^[A-Za-z_][-\w.:]*$")
# A "use strict" directive: the first statement, after any comments (each comment matches
# one way only, so a failed match cannot backtrack through them).
_USE_STRICT = re.compile(
    r"""^\s*(?:(?://[^\n]*\n|/\*(?:[^*]|\*(?!/))*\*/)\s*)*(["'])use strict\1"""
)
_EVENT_TOKEN = re.compile(r"^[^\s]+$")


# Elements whose children are a value (any markup), not SCXML structure (an <assign> with
# children: one without has no children to walk).
_FREE_FORM = frozenset({"content", "data", "assign"})

# What check_element asks of an element named ...: its allowed attributes, its required ones
# (sorted: a stable order of problems, whatever the hash seed), its pairs of exclusive ones,
# its own check (a plain function of the class: a bound method kept on the validator would
# make it a reference cycle, keeping the document for the cyclic collector to find and
# free), and the SCXML children it allows (executable content: all of it but <elseif> and
# <else>, which only <if> allows).
_Rules = tuple[
    frozenset[str],
    tuple[str, ...],
    list[tuple[str, str]],
    "Callable[[Validator, etree._Element, Mapping[str, str], str], None] | None",
    frozenset[str],
]


def _rules() -> dict[str, _Rules]:
    rules: dict[str, _Rules] = {}
    for name, (allowed, required, children) in _SCHEMA.items():
        if children is None:
            children = EXECUTABLE if name == "if" else EXECUTABLE - {"elseif", "else"}
        rules[name] = (
            allowed,
            tuple(sorted(required)),
            _EXCLUSIVE.get(name, []),
            getattr(Validator, f"check_{name}", None),
            children,
        )
    return rules


def _plain_descriptor(token: str) -> bool:
    """Whether check_transition finds nothing to say of the event descriptor ``token``."""
    return token == "*" or not (
        token == ".*"
        or token.startswith(".")
        or ".." in token
        or "*" in token.rstrip("*").rstrip(".")
    )


class Validator:
    def __init__(self, document: ParsedDocument, default_datamodel: str = "null") -> None:
        self.default_datamodel = default_datamodel
        self.document = document
        self.problems: list[Problem] = []
        self.root = document.root
        self.scxml_ns: str | None = namespace(self.root)
        # Every element read once, at parse (see parse.Outline and parse.Facts).
        self._facts = document.outline.facts
        # The <transition> elements whose targets must exist (those of <initial> and
        # <history> are checked with their parent), found by check_element's walk; and
        # whether that walk left out an SCXML subtree (an element where it is not allowed),
        # whose transitions are then found by a walk of their own.
        self._transitions: list[etree._Element] = []
        self._skipped_subtree = False
        # The same walk lists the state-like elements in document order (preorder), and
        # notes the states whose initial targets or history defaults need checking once
        # every id is known.
        self._states: list[etree._Element] = []
        self._special: list[etree._Element] = []
        self._good_events: set[str] = set()  # event attributes found without a problem
        # What check_element asks per element name, in one lookup (see _rules).
        self._rules = _rules()

    # -- helpers ---------------------------------------------------------------------------

    def error(self, element: etree._Element, message: str) -> None:
        line, column = self.document.position(element)
        self.problems.append(Problem(line, column, message))

    def warning(self, element: etree._Element, message: str) -> None:
        line, column = self.document.position(element)
        self.problems.append(Problem(line, column, message, severity="warning"))

    def is_scxml(self, element: etree._Element) -> bool:
        return self._facts[element][1]

    def name(self, element: etree._Element) -> str:
        return self._facts[element][0]

    def children(self, element: etree._Element) -> Sequence[etree._Element]:
        """The element children of ``element`` (comments and PIs left out)."""
        return self._facts[element][2]

    def attributes(self, element: etree._Element) -> Mapping[str, str]:
        """The attributes of ``element`` (what ``element.get`` reads)."""
        return self._facts[element][3]

    # -- entry -----------------------------------------------------------------------------

    def run(self) -> list[Problem]:
        root = self.root
        if self.name(root) != "scxml":
            self.error(root, f"the root element must be <scxml>, not <{self.name(root)}>")
            return self.problems
        if self.scxml_ns is None:
            self.warning(root, f'<scxml> has no namespace; expected xmlns="{SCXML_NS}"')
        elif self.scxml_ns != SCXML_NS:
            self.error(root, f"<scxml> is in namespace {self.scxml_ns!r}, expected {SCXML_NS!r}")
            return self.problems
        version = root.get("version")
        if version is not None and version != "1.0":
            self.error(root, f'version="{version}" is not supported (only "1.0")')
        datamodel = root.get("datamodel", self.default_datamodel)
        if datamodel not in DATAMODELS:
            self.error(
                root, f'unknown datamodel "{datamodel}" (supported: {", ".join(DATAMODELS)})'
            )
        name = root.get("name")
        if name is not None and len(name) > MAX_CHART_NAME_LENGTH:
            self.error(
                root,
                f"<scxml> name is {len(name)} characters long; the limit is "
                f"{MAX_CHART_NAME_LENGTH}",
            )
        binding = root.get("binding", "early")
        if binding not in ("early", "late"):
            self.error(root, f'binding must be "early" or "late", not "{binding}"')
        self.check_element(root, "scxml", datamodel)
        self.check_ids_and_targets()
        return self.problems

    def check_element(self, element: etree._Element, parent_name: str, datamodel: str) -> None:
        facts = self._facts
        name, _, children, attributes, _, _ = facts[element]
        allowed_attrs, required, exclusive, check, allowed_children = self._rules[name]
        if name == "transition" and parent_name != "initial" and parent_name != "history":
            self._transitions.append(element)
        if name in STATE_LIKE:
            self._states.append(element)
        if not allowed_attrs.issuperset(attributes):
            self._unknown_attributes(element, name, attributes, allowed_attrs)
        if required:
            for attr in required:
                if attr not in attributes:
                    self.error(element, f"<{name}> requires the attribute '{attr}'")
        if exclusive:
            for a, b in exclusive:
                if a in attributes and b in attributes:
                    self.error(element, f"<{name}> may not have both '{a}' and '{b}'")
        if check is not None:
            check(self, element, attributes, datamodel)
        if children and name not in _FREE_FORM:
            for child in children:
                child_facts = facts[child]
                if child_facts[1] and child_facts[0] in allowed_children:
                    self.check_element(child, name, datamodel)
                else:
                    self._misplaced(child, child_facts[0], child_facts[1], name)

    def _misplaced(self, child: etree._Element, child_name: str, in_scxml: bool, name: str) -> None:
        """The problem with ``child``, an element <name> does not allow: its subtree is not
        checked (the walk leaves it out)."""
        if not in_scxml:
            self.warning(child, f"<{child_name}> is not an SCXML element; it is ignored")
            return
        self._skipped_subtree = True
        if child_name not in _SCHEMA:
            self.error(child, f"unknown SCXML element <{child_name}>")
        elif _SCHEMA[name][2] is None:
            if child_name not in EXECUTABLE:
                self.error(
                    child,
                    f"<{child_name}> is not executable content and cannot appear inside <{name}>",
                )
            else:  # <elseif> or <else> outside <if>
                self.error(child, f"<{child_name}> may only appear inside <if>")
        elif child_name in EXECUTABLE:
            self.error(
                child,
                f"executable content <{child_name}> is not allowed inside "
                f"<{name}>; put it in <onentry>, <onexit> or a <transition>",
            )
        else:
            self.error(child, f"<{child_name}> is not allowed inside <{name}>")

    def _unknown_attributes(
        self,
        element: etree._Element,
        name: str,
        attributes: Mapping[str, str],
        allowed: frozenset[str],
    ) -> None:
        """A warning for each attribute of ``element`` that <name> does not have. All at one
        position: made once, and each Problem made by a call in C (a document may hold one
        element with a hundred thousand attributes)."""
        unknown = [
            f"<{name}> has no attribute '{attr}'; it is ignored"
            for attr in attributes
            # attributes in other namespaces are extensions; ignore them
            if attr not in allowed and not attr.startswith("{")
        ]
        line, column = self.document.position(element)
        self.problems.extend(map(Problem, repeat(line), repeat(column), unknown, repeat("warning")))

    # -- per element checks ----------------------------------------------------------------

    def check_state(
        self, element: etree._Element, attributes: Mapping[str, str], datamodel: str
    ) -> None:
        initial_attr = attributes.get("initial")
        initial_elements = []
        substates = False
        facts = self._facts
        for c in facts[element][2]:
            name = facts[c][0]
            if name == "initial":
                initial_elements.append(c)
            elif name in _PROPER_STATES:
                substates = True
        if initial_attr is not None and initial_elements:
            self.error(element, "a state may not have both an 'initial' attribute and <initial>")
        if len(initial_elements) > 1:
            self.error(initial_elements[1], "a state may have at most one <initial>")
        if (initial_attr is not None or initial_elements) and not substates:
            self.error(element, "an atomic state cannot have an initial state")
        if initial_attr is not None or initial_elements:
            self._special.append(element)

    def check_initial(
        self, element: etree._Element, attributes: Mapping[str, str], datamodel: str
    ) -> None:
        self._single_transition(element, "initial")

    def check_history(
        self, element: etree._Element, attributes: Mapping[str, str], datamodel: str
    ) -> None:
        self._special.append(element)
        kind = attributes.get("type", "shallow")
        if kind not in ("shallow", "deep"):
            self.error(element, f'history type must be "shallow" or "deep", not "{kind}"')
        transitions = [c for c in self.children(element) if self.name(c) == "transition"]
        if len(transitions) > 1:
            self.error(transitions[1], "<history> may have at most one default <transition>")
        for t in transitions:
            if t.get("event") is not None or t.get("cond") is not None:
                self.error(t, "a history default transition may not have 'event' or 'cond'")
            if not t.get("target"):
                self.error(t, "a history default transition needs a target")

    def _single_transition(self, element: etree._Element, what: str) -> None:
        transitions = [c for c in self.children(element) if self.name(c) == "transition"]
        if len(transitions) != 1:
            self.error(element, f"<{what}> must contain exactly one <transition>")
            return
        t = transitions[0]
        if t.get("event") is not None or t.get("cond") is not None:
            self.error(t, f"the <transition> of <{what}> may not have 'event' or 'cond'")
        if not t.get("target"):
            self.error(t, f"the <transition> of <{what}> needs a target")

    def check_transition(
        self, element: etree._Element, attributes: Mapping[str, str], datamodel: str
    ) -> None:
        kind = attributes.get("type", "external")
        if kind not in ("internal", "external"):
            self.error(element, f'transition type must be "internal" or "external", not "{kind}"')
        event = attributes.get("event")
        if event is not None and event not in self._good_events:
            tokens = event.split()
            if tokens and all(_plain_descriptor(token) for token in tokens):
                self._good_events.add(event)  # many transitions share one: checked once
            if not tokens:
                self.error(element, "the 'event' attribute is empty")
            for token in tokens:
                if token == ".*":
                    self.warning(element, "'.*' is read as '*' (any event)")
                elif token != "*" and (
                    token.startswith(".") or ".." in token or "*" in token.rstrip("*").rstrip(".")
                ):
                    self.error(element, f"'{token}' is not a valid event descriptor")
        if datamodel == "null":
            cond = attributes.get("cond")
            if cond is not None:
                self._null_cond(element, cond)

    def _null_cond(self, element: etree._Element, cond: str) -> None:
        from statecharts.core.datamodel.null import parse_in_predicate

        if parse_in_predicate(cond) is None:
            self.error(element, f"the null datamodel only understands In('stateid'), not {cond!r}")

    def check_send(
        self, element: etree._Element, attributes: Mapping[str, str], datamodel: str
    ) -> None:
        # Spec 6.2.1: the event name is required for the SCXML processor only; another
        # processor (Basic HTTP, W3C test 531) may take it from its data, or do without.
        send_type = attributes.get("type")
        scxml_type = attributes.get("typeexpr") is None and (
            send_type is None or send_type in SCXML_SEND_TYPES
        )
        if scxml_type and attributes.get("event") is None and attributes.get("eventexpr") is None:
            has_content = any(self.name(c) == "content" for c in self.children(element))
            if not has_content:
                self.error(element, "<send> needs 'event', 'eventexpr' or a <content> child")
        self._static_length(element, attributes, "send", "id", MAX_SEND_ID_LENGTH)
        delay = attributes.get("delay")
        problem = delay_problem(delay) if delay is not None else None
        if problem is not None:
            self.error(element, problem)
        elif delay is not None and (spaced := delay_syntax_problem(delay)) is not None:
            # Refused at load only (a stored chart that has one reads it as it always did).
            line, column = self.document.position(element)
            self.problems.append(
                Problem(line, column, spaced, "warning", LoadCheck.DELAY_SYNTAX)
            )
        self._content_params(element, "send")
        self._namelist_with_content(element, "send")

    def check_invoke(
        self, element: etree._Element, attributes: Mapping[str, str], datamodel: str
    ) -> None:
        autoforward = attributes.get("autoforward", "false")
        if autoforward not in ("true", "false"):
            self.error(element, f'autoforward must be "true" or "false", not "{autoforward}"')
        self._static_length(element, attributes, "invoke", "id", MAX_INVOKE_ID_LENGTH)
        self._static_length(element, attributes, "invoke", "type", MAX_INVOKE_TYPE_LENGTH)
        kind = attributes.get("type")
        if kind is not None and kind not in (
            "scxml",
            "http://www.w3.org/TR/scxml/",
            "http://www.w3.org/TR/scxml",
        ):
            self.warning(element, f"invoke type {kind!r} needs a host-registered invoke handler")
        contents = [c for c in self.children(element) if self.name(c) == "content"]
        if contents and ("src" in attributes or "srcexpr" in attributes):
            self.error(element, "<invoke> may not have both 'src'/'srcexpr' and <content>")
        if len(contents) > 1:
            self.error(contents[1], "<invoke> may have at most one <content>")
        finalizes = [c for c in self.children(element) if self.name(c) == "finalize"]
        if len(finalizes) > 1:
            self.error(finalizes[1], "<invoke> may have at most one <finalize>")
        for f in finalizes:
            for c in self.children(f):
                if self.name(c) in ("raise", "send"):
                    self.error(c, f"<{self.name(c)}> is not allowed inside <finalize>")

    def _static_length(
        self,
        element: etree._Element,
        attributes: Mapping[str, str],
        name: str,
        attribute: str,
        limit: int,
    ) -> None:
        """A static attribute the durable layer stores in a column of ``limit`` characters
        is refused at load when longer (it would load, then fail on every write)."""
        value = attributes.get(attribute)
        if value is not None and len(value) > limit:
            self.error(
                element,
                f"<{name}> {attribute} is {len(value)} characters long; the limit is {limit}",
            )

    def check_donedata(
        self, element: etree._Element, attributes: Mapping[str, str], datamodel: str
    ) -> None:
        self._content_params(element, "donedata")

    def _content_params(self, element: etree._Element, name: str) -> None:
        kids = [self.name(c) for c in self.children(element) if self.is_scxml(c)]
        if "content" in kids and "param" in kids:
            self.error(element, f"<{name}> may not have both <content> and <param>")
        if kids.count("content") > 1:
            self.error(element, f"<{name}> may have at most one <content>")

    def _namelist_with_content(self, element: etree._Element, name: str) -> None:
        if element.get("namelist") is not None and any(
            self.name(c) == "content" for c in self.children(element)
        ):
            self.error(element, f"<{name}> may not have both 'namelist' and <content>")

    def check_content(
        self, element: etree._Element, attributes: Mapping[str, str], datamodel: str
    ) -> None:
        has_body = len(element) > 0 or (element.text or "").strip()
        if attributes.get("expr") is not None and has_body:
            self.error(element, "<content> may not have both 'expr' and a body")

    def check_param(
        self, element: etree._Element, attributes: Mapping[str, str], datamodel: str
    ) -> None:
        if attributes.get("expr") is None and attributes.get("location") is None:
            self.error(element, "<param> needs 'expr' or 'location'")

    def check_data(
        self, element: etree._Element, attributes: Mapping[str, str], datamodel: str
    ) -> None:
        has_body = len(element) > 0 or (element.text or "").strip()
        if has_body and (attributes.get("expr") is not None or attributes.get("src") is not None):
            self.error(element, "<data> may have only one of 'expr', 'src' and a body")
        data_id = attributes.get("id")
        if (
            data_id is not None
            and datamodel == "ecmascript"
            and not re.match(r"^[A-Za-z_$][\w$]*$", data_id)
        ):
            self.error(element, f"data id {data_id!r} is not a valid ECMAScript identifier")
        if datamodel == "null":
            self.error(element, "the null datamodel has no <data>")

    def check_assign(
        self, element: etree._Element, attributes: Mapping[str, str], datamodel: str
    ) -> None:
        has_body = len(element) > 0 or (element.text or "").strip()
        if attributes.get("expr") is not None and has_body:
            self.error(element, "<assign> may not have both 'expr' and a body")
        if attributes.get("expr") is None and not has_body:
            self.error(element, "<assign> needs 'expr' or a body")
        if datamodel == "null":
            self.error(element, "the null datamodel has no locations to <assign> to")

    def check_script(
        self, element: etree._Element, attributes: Mapping[str, str], datamodel: str
    ) -> None:
        if attributes.get("src") is not None and (element.text or "").strip():
            self.error(element, "<script> may not have both 'src' and a body")
        if datamodel == "null":
            self.error(element, "the null datamodel cannot run <script>")
        elif _USE_STRICT.match(element.text or ""):
            self.warning(
                element,
                'a <script> that begins with "use strict" keeps its var and function '
                "declarations to itself (they do not become datamodel variables)",
            )

    def check_if(
        self, element: etree._Element, attributes: Mapping[str, str], datamodel: str
    ) -> None:
        seen_else = False
        for child in self.children(element):
            child_name = self.name(child)
            if child_name == "else":
                if seen_else:
                    self.error(child, "<if> may have only one <else>")
                seen_else = True
            elif child_name == "elseif" and seen_else:
                self.error(child, "<elseif> may not follow <else>")
        if datamodel == "null" and attributes.get("cond") is not None:
            self._null_cond(element, attributes.get("cond") or "")

    def check_foreach(
        self, element: etree._Element, attributes: Mapping[str, str], datamodel: str
    ) -> None:
        if datamodel == "null":
            self.error(element, "the null datamodel cannot iterate with <foreach>")

    def check_raise(
        self, element: etree._Element, attributes: Mapping[str, str], datamodel: str
    ) -> None:
        event = attributes.get("event")
        if event is not None and not _EVENT_TOKEN.match(event):
            self.error(element, f"'{event}' is not a valid event name")

    # -- whole-document checks -------------------------------------------------------------

    def check_ids_and_targets(self) -> None:
        ids: dict[str, etree._Element] = {}
        # Every state-like element in document order, with where its subtree ends in that
        # order: "is a descendant of" is then a comparison (linear for any shape; collecting
        # the descendants per state was quadratic on deep or wide documents).
        facts = self._facts
        order: dict[etree._Element, int] = {}
        end: dict[etree._Element, int] = {}
        numbered: list[etree._Element] = []
        if not self._skipped_subtree:
            # check_element's walk went everywhere a state can be: its list holds, and the
            # numbering is needed for the states it noted only (none, in most documents)
            states, special = self._states, self._special
        else:
            states = special = numbered
        if special or self._skipped_subtree:

            def number(element: etree._Element) -> None:
                # recursive: the depth is bounded by parse.MAX_DEPTH
                for child in facts[element][2]:
                    name, in_scxml = facts[child][:2]
                    if in_scxml and name in STATE_LIKE:
                        numbered.append(child)
                        order[child] = len(numbered)
                        number(child)
                        end[child] = len(numbered)

            number(self.root)
            number = None  # type: ignore[assignment]  # the closure's cycle, broken
        order[self.root] = 0
        end[self.root] = len(numbered)
        valid = _ID.match
        known = ids.setdefault
        for element in states:
            state_id = facts[element][3].get("id")
            if state_id is None:
                continue
            if not valid(state_id):
                self.error(element, f"'{state_id}' is not a valid id")
            elif len(state_id) > MAX_STATE_ID_LENGTH:
                self.error(
                    element,
                    f"state id '{state_id[:20]}...' is {len(state_id)} characters long; the "
                    f"limit is {MAX_STATE_ID_LENGTH}",
                )
            first = known(state_id, element)  # one lookup: the first element with this id
            if first is not element:
                line, column = self.document.position(first)
                self.error(element, f"duplicate id '{state_id}' (first defined at {line}:{column})")

        def inside(token: str, container: etree._Element) -> bool:
            """Whether the state ``token`` (an existing id) is a descendant of ``container``."""
            return order[container] < order[ids[token]] <= end[container]

        root_initial = self.root.get("initial")
        if root_initial is not None:
            for token in root_initial.split():
                if token not in ids:
                    self.error(self.root, f"initial state '{token}' does not exist")
        direct_ids: dict[etree._Element, set[str]] = {}  # per parent of a <history>
        for element in special:
            name, _, children, attributes, _, _ = facts[element]
            initial = attributes.get("initial") if name == "state" else None
            if initial is not None:
                for token in initial.split():
                    if token not in ids:
                        self.error(element, f"initial state '{token}' does not exist")
                    elif not inside(token, element):
                        self.error(
                            element,
                            f"initial state '{token}' is not a descendant of '{element.get('id')}'",
                        )
            for child in children:
                if facts[child][:2] == ("initial", True):
                    for t in self.children(child):
                        for token in (t.get("target") or "").split():
                            if token not in ids:
                                self.error(t, f"transition target '{token}' does not exist")
                            elif not inside(token, element):
                                self.error(
                                    t,
                                    f"<initial> target '{token}' is not a descendant "
                                    f"of '{element.get('id')}'",
                                )
            if name == "history":
                parent = element.getparent()
                deep = element.get("type", "shallow") == "deep"
                direct = direct_ids.get(parent) if parent is not None else set()
                if direct is None and parent is not None:
                    direct = direct_ids[parent] = {
                        c.get("id")
                        for c in self.children(parent)
                        if c.get("id") and self.name(c) in STATE_LIKE
                    }
                for t in self.children(element):
                    for token in (t.get("target") or "").split():
                        if token not in ids:
                            self.error(t, f"transition target '{token}' does not exist")
                        elif not (
                            (parent is not None and parent in order and inside(token, parent))
                            if deep
                            else token in (direct or ())
                        ):
                            kind = "descendant" if deep else "child"
                            self.error(
                                t,
                                f"history default '{token}' must be a {kind} of the "
                                f"history's parent state",
                            )
        if self._skipped_subtree:
            transitions: list[etree._Element] | Iterator[etree._Element] = (
                element
                for element in self._structure(self.root)
                if facts[element][0] == "transition"
                and self._name_of_parent(element) not in ("initial", "history")
            )
        else:
            transitions = self._transitions
        for element in transitions:
            target = facts[element][3].get("target")
            if not target:
                continue
            for token in target.split():
                if token not in ids:
                    self.error(element, f"transition target '{token}' does not exist")

    def _name_of_parent(self, element: etree._Element) -> str:
        parent = element.getparent()
        found = self._facts.get(parent) if parent is not None else None
        return found[0] if found is not None else ""

    def _structure(self, element: etree._Element) -> Iterator[etree._Element]:
        """SCXML elements below ``element``, not entering free-form bodies such as <content>
        (iterative: nested generators cost the depth on every element)."""
        facts = self._facts
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
            if name not in ("content", "data", "assign"):
                stack.append(iter(children))


_BY_POSITION = attrgetter("line", "column")


def validate(document: ParsedDocument, default_datamodel: str = "null") -> list[Problem]:
    """Every problem found in ``document`` (errors and warnings), in document order.
    ``default_datamodel``: the datamodel of an ``<scxml>`` without a ``datamodel`` attribute
    (the spec leaves it to the platform)."""
    problems = Validator(document, default_datamodel).run()
    return sorted(problems, key=_BY_POSITION)
