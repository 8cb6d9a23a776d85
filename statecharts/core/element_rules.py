"""The validation rules of SCXML elements, in a table by element name (``RULES``): what each
element may hold and the small rules that apply to it, each a function returning its
problems with their line:column. ``statecharts.core.validate`` walks the document once and
asks the table (the rules about references, which need every id known first, are there)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import repeat
from typing import TYPE_CHECKING

from lxml import etree

from statecharts.core.delays import delay_problem, delay_syntax_problem
from statecharts.core.errors import LoadCheck, Problem
from statecharts.core.expiry import EXPIRES, EXTENSION_NS, expiry_problem
from statecharts.core.host import SCXML_SEND_TYPES

if TYPE_CHECKING:
    from statecharts.core.validate import Validator

DATAMODELS = ("null", "ecmascript")

EXECUTABLE = frozenset(
    {"raise", "if", "elseif", "else", "foreach", "log", "assign", "script", "send", "cancel"}
)
STATE_LIKE = frozenset({"state", "parallel", "final", "history"})
_PROPER_STATES = STATE_LIKE - {"history"}

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

# A "use strict" directive: the first statement, after any comments (each comment matches
# one way only, so a failed match cannot backtrack through them).
_USE_STRICT = re.compile(
    r"""^\s*(?:(?://[^\n]*\n|/\*(?:[^*]|\*(?!/))*\*/)\s*)*(["'])use strict\1"""
)
_EVENT_TOKEN = re.compile(r"^[^\s]+$")
_ECMASCRIPT_IDENTIFIER = re.compile(r"^[A-Za-z_$][\w$]*$")

# Elements whose children are a value (any markup), not SCXML structure (an <assign> with
# children: one without has no children to walk).
FREE_FORM = frozenset({"content", "data", "assign"})

# A rule of one element: (the validator, the element, its attributes, the document's
# datamodel) -> its problems, a list (or an empty tuple), not a generator: a rule runs on
# most elements of a document and finds nothing, and a generator made and run for nothing
# made validating 30-90% slower (benchmarks/loading.py shapes). A plain function, not a
# bound method: one kept on the validator would make a reference cycle, keeping the
# document for the cyclic collector.
Rule = Callable[["Validator", etree._Element, Mapping[str, str], str], Iterable[Problem]]


@dataclass(frozen=True, slots=True)
class ElementRules:
    """What the walk asks of an element of one name."""

    # the attributes it has: the walk runs unknown_attributes on an element that has another
    attributes: frozenset[str]
    children: frozenset[str]  # the SCXML children it allows
    executable_body: bool  # whether its children are executable content
    # Its rules (its required and exclusive attributes, then its own), each with the
    # attribute it is about: one with a name is run only on an element that has that
    # attribute (it has nothing to say of one without, and most elements have few: a call
    # saved per rule per element).
    rules: tuple[tuple[str | None, Rule], ...] = field(default=())


# -- rules of every element: its attributes --------------------------------------------------


def unknown_attributes(
    v: Validator, element: etree._Element, attributes: Mapping[str, str], datamodel: str
) -> Iterable[Problem]:
    """A warning for each attribute the element does not have (the walk asks only when it
    has one). All at one position: made once, and each Problem made by a call in C (a
    document may hold one element with a hundred thousand attributes)."""
    name = v.name(element)
    allowed = RULES[name].attributes
    unknown = [
        f"<{name}> has no attribute '{attr}'; it is ignored"
        for attr in attributes
        # attributes in other namespaces are extensions; ignore them
        if attr not in allowed and not attr.startswith("{")
    ]
    line, column = v.document.position(element)
    return map(Problem, repeat(line), repeat(column), unknown, repeat("warning"))


def _required_attributes(required: frozenset[str]) -> Rule:
    in_order = tuple(sorted(required))  # a stable order of problems, whatever the hash seed

    def required_attributes(
        v: Validator, element: etree._Element, attributes: Mapping[str, str], datamodel: str
    ) -> Iterable[Problem]:
        for attr in in_order:
            if attr not in attributes:
                return [
                    v.error(element, f"<{v.name(element)}> requires the attribute '{attr}'")
                    for attr in in_order
                    if attr not in attributes
                ]
        return ()

    return required_attributes


def _exclusive_attributes(pairs: tuple[tuple[str, str], ...]) -> Rule:
    def exclusive_attributes(
        v: Validator, element: etree._Element, attributes: Mapping[str, str], datamodel: str
    ) -> Iterable[Problem]:
        return [
            v.error(element, f"<{v.name(element)}> may not have both '{a}' and '{b}'")
            for a, b in pairs
            if a in attributes and b in attributes
        ]

    return exclusive_attributes


# -- <scxml> ---------------------------------------------------------------------------------


def scxml_version(
    v: Validator, element: etree._Element, attributes: Mapping[str, str], datamodel: str
) -> Iterable[Problem]:
    problems: list[Problem] = []
    version = attributes.get("version")
    if version is not None and version != "1.0":
        problems.append(v.error(element, f'version="{version}" is not supported (only "1.0")'))
    return problems


def scxml_datamodel(
    v: Validator, element: etree._Element, attributes: Mapping[str, str], datamodel: str
) -> Iterable[Problem]:
    problems: list[Problem] = []
    if datamodel not in DATAMODELS:
        problems.append(
            v.error(
                element, f'unknown datamodel "{datamodel}" (supported: {", ".join(DATAMODELS)})'
            )
        )
    return problems


def scxml_name_length(
    v: Validator, element: etree._Element, attributes: Mapping[str, str], datamodel: str
) -> Iterable[Problem]:
    problems: list[Problem] = []
    name = attributes.get("name")
    if name is not None and len(name) > MAX_CHART_NAME_LENGTH:
        problems.append(
            v.error(
                element,
                f"<scxml> name is {len(name)} characters long; the limit is "
                f"{MAX_CHART_NAME_LENGTH}",
            )
        )
    return problems


def scxml_binding(
    v: Validator, element: etree._Element, attributes: Mapping[str, str], datamodel: str
) -> Iterable[Problem]:
    problems: list[Problem] = []
    binding = attributes.get("binding", "early")
    if binding not in ("early", "late"):
        problems.append(v.error(element, f'binding must be "early" or "late", not "{binding}"'))
    return problems


# -- states ----------------------------------------------------------------------------------


def state_initial(
    v: Validator, element: etree._Element, attributes: Mapping[str, str], datamodel: str
) -> Iterable[Problem]:
    """An initial state is given once, by the attribute or by one <initial>, and only to a
    state that has children; such a state's initial targets are checked after the walk."""
    initial_attr = attributes.get("initial")
    facts = v.facts
    children = facts[element][2]
    if initial_attr is None:
        for c in children:
            if facts[c][0] == "initial":
                break
        else:
            return ()  # most states: no initial state to check
    v.check_references_of(element)
    initial_elements = []
    substates = False
    for c in children:
        name = facts[c][0]
        if name == "initial":
            initial_elements.append(c)
        elif name in _PROPER_STATES:
            substates = True
    problems = []
    if initial_attr is not None and initial_elements:
        problems.append(
            v.error(element, "a state may not have both an 'initial' attribute and <initial>")
        )
    if len(initial_elements) > 1:
        problems.append(v.error(initial_elements[1], "a state may have at most one <initial>"))
    if not substates:
        problems.append(v.error(element, "an atomic state cannot have an initial state"))
    return problems


def initial_transition(
    v: Validator, element: etree._Element, attributes: Mapping[str, str], datamodel: str
) -> Iterable[Problem]:
    problems: list[Problem] = []
    transitions = [c for c in v.children(element) if v.name(c) == "transition"]
    if len(transitions) != 1:
        problems.append(v.error(element, "<initial> must contain exactly one <transition>"))
        return problems
    t = transitions[0]
    if t.get("event") is not None or t.get("cond") is not None:
        problems.append(v.error(t, "the <transition> of <initial> may not have 'event' or 'cond'"))
    if not t.get("target"):
        problems.append(v.error(t, "the <transition> of <initial> needs a target"))
    return problems


def history_type(
    v: Validator, element: etree._Element, attributes: Mapping[str, str], datamodel: str
) -> Iterable[Problem]:
    v.check_references_of(element)  # its default transition's targets
    kind = attributes.get("type", "shallow")
    if kind in ("shallow", "deep"):
        return ()
    return (v.error(element, f'history type must be "shallow" or "deep", not "{kind}"'),)


def history_default(
    v: Validator, element: etree._Element, attributes: Mapping[str, str], datamodel: str
) -> Iterable[Problem]:
    transitions = [c for c in v.children(element) if v.name(c) == "transition"]
    problems = []
    if len(transitions) > 1:
        problems.append(
            v.error(transitions[1], "<history> may have at most one default <transition>")
        )
    for t in transitions:
        if t.get("event") is not None or t.get("cond") is not None:
            problems.append(
                v.error(t, "a history default transition may not have 'event' or 'cond'")
            )
        if not t.get("target"):
            problems.append(v.error(t, "a history default transition needs a target"))
    return problems


# -- transitions -----------------------------------------------------------------------------


def transition_type(
    v: Validator, element: etree._Element, attributes: Mapping[str, str], datamodel: str
) -> Iterable[Problem]:
    kind = attributes.get("type", "external")
    if kind in ("internal", "external"):
        return ()
    return (v.error(element, f'transition type must be "internal" or "external", not "{kind}"'),)


def _plain_descriptor(token: str) -> bool:
    """Whether transition_event finds nothing to say of the event descriptor ``token``."""
    return token == "*" or not (
        token == ".*"
        or token.startswith(".")
        or ".." in token
        or "*" in token.rstrip("*").rstrip(".")
    )


def transition_event(
    v: Validator, element: etree._Element, attributes: Mapping[str, str], datamodel: str
) -> Iterable[Problem]:
    event = attributes.get("event")
    if event is None or event in v.good_events:
        return ()
    return _event_problems(v, element, event)


def _event_problems(v: Validator, element: etree._Element, event: str) -> Iterable[Problem]:
    problems: list[Problem] = []
    tokens = event.split()
    if tokens and all(_plain_descriptor(token) for token in tokens):
        v.good_events.add(event)  # many transitions share one: checked once
    if not tokens:
        problems.append(v.error(element, "the 'event' attribute is empty"))
    for token in tokens:
        if token == ".*":
            problems.append(v.warning(element, "'.*' is read as '*' (any event)"))
        elif not _plain_descriptor(token):
            problems.append(v.error(element, f"'{token}' is not a valid event descriptor"))
    return problems


def null_cond(
    v: Validator, element: etree._Element, attributes: Mapping[str, str], datamodel: str
) -> Iterable[Problem]:
    """The null datamodel's only condition is In('stateid') (<transition>, <if>)."""
    cond = attributes.get("cond")
    if datamodel != "null" or cond is None:
        return ()
    from statecharts.core.datamodel.null import parse_in_predicate

    if parse_in_predicate(cond) is not None:
        return ()
    return (v.error(element, f"the null datamodel only understands In('stateid'), not {cond!r}"),)


# -- <send>, <invoke> and what they carry ----------------------------------------------------


def send_event(
    v: Validator, element: etree._Element, attributes: Mapping[str, str], datamodel: str
) -> Iterable[Problem]:
    problems: list[Problem] = []
    # Spec 6.2.1: the event name is required for the SCXML processor only; another
    # processor (Basic HTTP, W3C test 531) may take it from its data, or do without.
    send_type = attributes.get("type")
    scxml_type = attributes.get("typeexpr") is None and (
        send_type is None or send_type in SCXML_SEND_TYPES
    )
    if (
        scxml_type
        and attributes.get("event") is None
        and attributes.get("eventexpr") is None
        and not any(v.name(c) == "content" for c in v.children(element))
    ):
        problems.append(v.error(element, "<send> needs 'event', 'eventexpr' or a <content> child"))
    return problems


def send_delay(
    v: Validator, element: etree._Element, attributes: Mapping[str, str], datamodel: str
) -> Iterable[Problem]:
    problems: list[Problem] = []
    delay = attributes.get("delay")
    if delay is None:
        return problems
    problem = delay_problem(delay)
    if problem is not None:
        problems.append(v.error(element, problem))
    elif (spaced := delay_syntax_problem(delay)) is not None:
        # Refused at load only (a stored chart that has one reads it as it always did).
        line, column = v.document.position(element)
        problems.append(Problem(line, column, spaced, "warning", LoadCheck.DELAY_SYNTAX))
    return problems


def send_expires(
    v: Validator, element: etree._Element, attributes: Mapping[str, str], datamodel: str
) -> Iterable[Problem]:
    """``ds:expires`` on a ``<send>`` (``statecharts.core.expiry``): a time longer than 0 (an
    error otherwise); on a send without a delay, a warning (an immediate send is never late)."""
    problem = expiry_problem(attributes[EXPIRES])
    if problem is not None:
        return [v.error(element, problem)]
    if "delay" not in attributes and "delayexpr" not in attributes:
        return [
            v.warning(element, "ds:expires on a <send> without delay or delayexpr is never used")
        ]
    return ()


def send_extensions(
    v: Validator, element: etree._Element, attributes: Mapping[str, str], datamodel: str
) -> Iterable[Problem]:
    """A warning for an attribute in the platform's namespace a ``<send>`` does not have (a
    typo of ``ds:expires`` would otherwise leave the send without its expiry, silently)."""
    unknown = [n for n in attributes if n.startswith(_EXTENSION) and n != EXPIRES]
    if not unknown:
        return ()
    return [
        v.warning(
            element,
            f"<send> has no attribute '{n[len(_EXTENSION) :]}' in {EXTENSION_NS}; it is ignored",
        )
        for n in unknown
    ]


_EXTENSION = f"{{{EXTENSION_NS}}}"


def _static_length(name: str, attribute: str, limit: int) -> Rule:
    """A static attribute the durable layer stores in a column of ``limit`` characters is
    refused at load when longer (it would load, then fail on every write)."""

    def static_length(
        v: Validator, element: etree._Element, attributes: Mapping[str, str], datamodel: str
    ) -> Iterable[Problem]:
        problems: list[Problem] = []
        value = attributes.get(attribute)
        if value is not None and len(value) > limit:
            problems.append(
                v.error(
                    element,
                    f"<{name}> {attribute} is {len(value)} characters long; the limit is {limit}",
                )
            )
        return problems

    return static_length


def content_or_params(
    v: Validator, element: etree._Element, attributes: Mapping[str, str], datamodel: str
) -> Iterable[Problem]:
    """<send> and <donedata>: one <content>, or <param>s."""
    problems: list[Problem] = []
    name = v.name(element)
    kids = [v.name(c) for c in v.children(element) if v.is_scxml(c)]
    if "content" in kids and "param" in kids:
        problems.append(v.error(element, f"<{name}> may not have both <content> and <param>"))
    if kids.count("content") > 1:
        problems.append(v.error(element, f"<{name}> may have at most one <content>"))
    return problems


def namelist_or_content(
    v: Validator, element: etree._Element, attributes: Mapping[str, str], datamodel: str
) -> Iterable[Problem]:
    problems: list[Problem] = []
    if attributes.get("namelist") is not None and any(
        v.name(c) == "content" for c in v.children(element)
    ):
        problems.append(
            v.error(element, f"<{v.name(element)}> may not have both 'namelist' and <content>")
        )
    return problems


def invoke_autoforward(
    v: Validator, element: etree._Element, attributes: Mapping[str, str], datamodel: str
) -> Iterable[Problem]:
    problems: list[Problem] = []
    autoforward = attributes.get("autoforward", "false")
    if autoforward not in ("true", "false"):
        problems.append(
            v.error(element, f'autoforward must be "true" or "false", not "{autoforward}"')
        )
    return problems


def invoke_type(
    v: Validator, element: etree._Element, attributes: Mapping[str, str], datamodel: str
) -> Iterable[Problem]:
    problems: list[Problem] = []
    kind = attributes.get("type")
    if kind is not None and kind not in (
        "scxml",
        "http://www.w3.org/TR/scxml/",
        "http://www.w3.org/TR/scxml",
    ):
        problems.append(
            v.warning(element, f"invoke type {kind!r} needs a host-registered invoke handler")
        )
    return problems


def invoke_children(
    v: Validator, element: etree._Element, attributes: Mapping[str, str], datamodel: str
) -> Iterable[Problem]:
    """At most one <content> (not with a source) and one <finalize>, which may not send or
    raise."""
    problems: list[Problem] = []
    contents = [c for c in v.children(element) if v.name(c) == "content"]
    if contents and ("src" in attributes or "srcexpr" in attributes):
        problems.append(
            v.error(element, "<invoke> may not have both 'src'/'srcexpr' and <content>")
        )
    if len(contents) > 1:
        problems.append(v.error(contents[1], "<invoke> may have at most one <content>"))
    finalizes = [c for c in v.children(element) if v.name(c) == "finalize"]
    if len(finalizes) > 1:
        problems.append(v.error(finalizes[1], "<invoke> may have at most one <finalize>"))
    for f in finalizes:
        for c in v.children(f):
            if v.name(c) in ("raise", "send"):
                problems.append(v.error(c, f"<{v.name(c)}> is not allowed inside <finalize>"))
    return problems


def _has_body(element: etree._Element) -> bool:
    return len(element) > 0 or bool((element.text or "").strip())


def content_body(
    v: Validator, element: etree._Element, attributes: Mapping[str, str], datamodel: str
) -> Iterable[Problem]:
    problems: list[Problem] = []
    if attributes.get("expr") is not None and _has_body(element):
        problems.append(v.error(element, "<content> may not have both 'expr' and a body"))
    return problems


def param_value(
    v: Validator, element: etree._Element, attributes: Mapping[str, str], datamodel: str
) -> Iterable[Problem]:
    problems: list[Problem] = []
    if attributes.get("expr") is None and attributes.get("location") is None:
        problems.append(v.error(element, "<param> needs 'expr' or 'location'"))
    return problems


# -- the datamodel and executable content ----------------------------------------------------


def data_value(
    v: Validator, element: etree._Element, attributes: Mapping[str, str], datamodel: str
) -> Iterable[Problem]:
    problems: list[Problem] = []
    if _has_body(element) and (
        attributes.get("expr") is not None or attributes.get("src") is not None
    ):
        problems.append(v.error(element, "<data> may have only one of 'expr', 'src' and a body"))
    data_id = attributes.get("id")
    if (
        data_id is not None
        and datamodel == "ecmascript"
        and not _ECMASCRIPT_IDENTIFIER.match(data_id)
    ):
        problems.append(
            v.error(element, f"data id {data_id!r} is not a valid ECMAScript identifier")
        )
    if datamodel == "null":
        problems.append(v.error(element, "the null datamodel has no <data>"))
    return problems


def assign_value(
    v: Validator, element: etree._Element, attributes: Mapping[str, str], datamodel: str
) -> Iterable[Problem]:
    problems: list[Problem] = []
    has_body = _has_body(element)
    if attributes.get("expr") is not None and has_body:
        problems.append(v.error(element, "<assign> may not have both 'expr' and a body"))
    if attributes.get("expr") is None and not has_body:
        problems.append(v.error(element, "<assign> needs 'expr' or a body"))
    if datamodel == "null":
        problems.append(v.error(element, "the null datamodel has no locations to <assign> to"))
    return problems


def script_body(
    v: Validator, element: etree._Element, attributes: Mapping[str, str], datamodel: str
) -> Iterable[Problem]:
    problems: list[Problem] = []
    if attributes.get("src") is not None and (element.text or "").strip():
        problems.append(v.error(element, "<script> may not have both 'src' and a body"))
    if datamodel == "null":
        problems.append(v.error(element, "the null datamodel cannot run <script>"))
    elif _USE_STRICT.match(element.text or ""):
        problems.append(
            v.warning(
                element,
                'a <script> that begins with "use strict" keeps its var and function '
                "declarations to itself (they do not become datamodel variables)",
            )
        )
    return problems


def if_branches(
    v: Validator, element: etree._Element, attributes: Mapping[str, str], datamodel: str
) -> Iterable[Problem]:
    problems: list[Problem] = []
    seen_else = False
    for child in v.children(element):
        child_name = v.name(child)
        if child_name == "else":
            if seen_else:
                problems.append(v.error(child, "<if> may have only one <else>"))
            seen_else = True
        elif child_name == "elseif" and seen_else:
            problems.append(v.error(child, "<elseif> may not follow <else>"))
    return problems


def foreach_datamodel(
    v: Validator, element: etree._Element, attributes: Mapping[str, str], datamodel: str
) -> Iterable[Problem]:
    problems: list[Problem] = []
    if datamodel == "null":
        problems.append(v.error(element, "the null datamodel cannot iterate with <foreach>"))
    return problems


def raise_event(
    v: Validator, element: etree._Element, attributes: Mapping[str, str], datamodel: str
) -> Iterable[Problem]:
    problems: list[Problem] = []
    event = attributes.get("event")
    if event is not None and not _EVENT_TOKEN.match(event):
        problems.append(v.error(element, f"'{event}' is not a valid event name"))
    return problems


# -- the table -------------------------------------------------------------------------------

_STATE_CHILDREN = frozenset(
    {"onentry", "onexit", "transition", "state", "parallel", "history", "datamodel", "invoke"}
)

# A rule of an element's own, alone or with the attribute it is about (ElementRules.rules).
_OwnRule = Rule | tuple[str, Rule]

# element -> (its attributes, the required ones, the pairs that exclude each other, the SCXML
# children it allows or None for executable content, its own rules in the order they report)
_SCHEMA: dict[
    str,
    tuple[
        frozenset[str],
        frozenset[str],
        tuple[tuple[str, str], ...],
        frozenset[str] | None,
        tuple[_OwnRule, ...],
    ],
] = {
    "scxml": (
        frozenset({"initial", "name", "version", "datamodel", "binding", "exmode"}),
        frozenset(),
        (),
        frozenset({"state", "parallel", "final", "datamodel", "script"}),
        (),  # (ROOT_RULES, run before the walk)
    ),
    "state": (
        frozenset({"id", "initial"}),
        frozenset(),
        (),
        _STATE_CHILDREN | {"initial", "final"},
        (state_initial,),
    ),
    "parallel": (frozenset({"id"}), frozenset(), (), _STATE_CHILDREN, ()),
    "final": (frozenset({"id"}), frozenset(), (), frozenset({"onentry", "onexit", "donedata"}), ()),
    "initial": (frozenset(), frozenset(), (), frozenset({"transition"}), (initial_transition,)),
    "history": (
        frozenset({"id", "type"}),
        frozenset(),
        (),
        frozenset({"transition"}),
        (history_type, history_default),
    ),
    "transition": (
        frozenset({"event", "cond", "target", "type"}),
        frozenset(),
        (),
        None,
        (("type", transition_type), ("event", transition_event), ("cond", null_cond)),
    ),
    "onentry": (frozenset(), frozenset(), (), None, ()),
    "onexit": (frozenset(), frozenset(), (), None, ()),
    "finalize": (frozenset(), frozenset(), (), None, ()),
    "datamodel": (frozenset(), frozenset(), (), frozenset({"data"}), ()),
    "data": (
        frozenset({"id", "src", "expr"}),
        frozenset({"id"}),
        (("src", "expr"),),
        frozenset(),
        (data_value,),
    ),
    "donedata": (
        frozenset(),
        frozenset(),
        (),
        frozenset({"content", "param"}),
        (content_or_params,),
    ),
    "content": (frozenset({"expr"}), frozenset(), (), frozenset(), (("expr", content_body),)),
    "param": (
        frozenset({"name", "expr", "location"}),
        frozenset({"name"}),
        (("expr", "location"),),
        frozenset(),
        (param_value,),
    ),
    "invoke": (
        frozenset(
            {"type", "typeexpr", "src", "srcexpr", "id", "idlocation", "namelist", "autoforward"}
        ),
        frozenset(),
        (("type", "typeexpr"), ("src", "srcexpr"), ("id", "idlocation")),
        frozenset({"param", "finalize", "content"}),
        (
            ("autoforward", invoke_autoforward),
            ("id", _static_length("invoke", "id", MAX_INVOKE_ID_LENGTH)),
            ("type", _static_length("invoke", "type", MAX_INVOKE_TYPE_LENGTH)),
            ("type", invoke_type),
            invoke_children,
        ),
    ),
    "raise": (
        frozenset({"event"}),
        frozenset({"event"}),
        (),
        frozenset(),
        (("event", raise_event),),
    ),
    "if": (frozenset({"cond"}), frozenset({"cond"}), (), None, (if_branches, ("cond", null_cond))),
    "elseif": (frozenset({"cond"}), frozenset({"cond"}), (), frozenset(), ()),
    "else": (frozenset(), frozenset(), (), frozenset(), ()),
    "foreach": (
        frozenset({"array", "item", "index"}),
        frozenset({"array", "item"}),
        (),
        None,
        (foreach_datamodel,),
    ),
    "log": (frozenset({"label", "expr"}), frozenset(), (), frozenset(), ()),
    "assign": (
        frozenset({"location", "expr"}),
        frozenset({"location"}),
        (),
        frozenset(),
        (assign_value,),
    ),
    "script": (frozenset({"src"}), frozenset(), (), frozenset(), (script_body,)),
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
        (
            ("event", "eventexpr"),
            ("target", "targetexpr"),
            ("type", "typeexpr"),
            ("id", "idlocation"),
            ("delay", "delayexpr"),
        ),
        frozenset({"param", "content"}),
        (
            send_event,
            ("id", _static_length("send", "id", MAX_SEND_ID_LENGTH)),
            ("delay", send_delay),
            (EXPIRES, send_expires),
            send_extensions,
            content_or_params,
            ("namelist", namelist_or_content),
        ),
    ),
    "cancel": (
        frozenset({"sendid", "sendidexpr"}),
        frozenset(),
        (("sendid", "sendidexpr"),),
        frozenset(),
        (),
    ),
}


def _table() -> dict[str, ElementRules]:
    """``_SCHEMA`` as the walk reads it: the attribute rules an element needs, then its
    own; executable content allows all of it but <elseif> and <else>, which
    only <if> allows."""
    table: dict[str, ElementRules] = {}
    for name, (allowed, required, exclusive, children, own) in _SCHEMA.items():
        executable_body = children is None
        if children is None:
            children = EXECUTABLE if name == "if" else EXECUTABLE - {"elseif", "else"}
        rules: list[tuple[str | None, Rule]] = []
        if required:
            rules.append((None, _required_attributes(required)))
        if exclusive:
            rules.append((None, _exclusive_attributes(exclusive)))
        rules.extend(rule if isinstance(rule, tuple) else (None, rule) for rule in own)
        table[name] = ElementRules(allowed, children, executable_body, tuple(rules))
    return table


RULES: dict[str, ElementRules] = _table()

# The rules of the document as a whole, read on <scxml> before the walk (a document whose
# root is not a namespaced <scxml> gets no further).
ROOT_RULES: tuple[Rule, ...] = (scxml_version, scxml_datamodel, scxml_name_length, scxml_binding)
