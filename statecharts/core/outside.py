"""Which events the outside may send a chart: computed once per compiled chart (pure).

An event the chart only sends itself is not one a person should press as a button: a
``<raise>``, or a ``<send event=...>`` with no target, target ``#_internal``, or a
``targetexpr`` that is ``'#_scxml_' + _sessionid`` (its own session), of the SCXML type. A
name is **self-only** when every ``<raise>`` and ``<send>`` that names it is such a one. A
``<send eventexpr=...>`` anywhere makes every name potentially public (the name it sends is
only known when it runs: nothing is left out). The doors leave self-only names out of their
lists (``statecharts.policies.availability``, through :func:`of`); nothing here refuses a
send.

A chart may instead list what the outside may send: ``ds:external-events="order.paid
order.cancel"`` on ``<scxml>`` (``xmlns:ds="urn:django-statecharts"``), event descriptors as
in a transition's ``event`` (``order`` covers ``order.paid``; ``*``: everything). The list
replaces the computed answer. It is checked at load (:func:`problems`, with line:column).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from statecharts.core.errors import Problem
from statecharts.core.events import split_descriptor
from statecharts.core.expiry import EXPIRES, expiry_problem
from statecharts.core.host import SCXML_SEND_TYPES
from statecharts.core.model import (
    Action,
    Block,
    Chart,
    Foreach,
    If,
    OutsideEvents,
    Raise,
    Send,
    StateNode,
)
from statecharts.core.parse import ParsedDocument

EXTENSION_NS = "urn:django-statecharts"  # (also statecharts.core.expiry's)
EXTERNAL_EVENTS = f"{{{EXTENSION_NS}}}external-events"
# The platform's own attributes on <scxml> in its namespace.
_KNOWN = frozenset({EXTERNAL_EVENTS, EXPIRES})
_OWN_SESSION_TARGETS = frozenset({"'#_scxml_'+_sessionid", '"#_scxml_"+_sessionid'})


def problems(document: ParsedDocument) -> list[Problem]:
    """What is wrong with the platform's attributes on ``<scxml>``: an unknown one (a
    warning: a typo would silently leave the computed answer), a descriptor that is not
    one, a ``ds:expires`` that is not a time (errors: ``statecharts.core.expiry``)."""
    root = document.root
    found: list[Problem] = []
    line, column = document.position(root)
    prefix = f"{{{EXTENSION_NS}}}"
    for attribute in root.attrib:
        name = str(attribute)
        if name.startswith(prefix) and name not in _KNOWN:
            found.append(Problem(
                line, column,
                f"<scxml> has no attribute '{name[len(prefix):]}' in {EXTENSION_NS}; it is ignored",
                "warning",
            ))  # fmt: skip
    expires = root.get(EXPIRES)
    if expires is not None and (problem := expiry_problem(expires)) is not None:
        found.append(Problem(line, column, problem))
    listed = root.get(EXTERNAL_EVENTS)
    if listed is not None:
        for token in listed.split():
            if token != "*" and (
                token.startswith(".") or ".." in token or "*" in token.rstrip("*").rstrip(".")
            ):
                found.append(Problem(
                    line, column, f"external-events: '{token}' is not a valid event descriptor"
                ))  # fmt: skip
    return found


def of(chart: Chart) -> OutsideEvents:
    """``chart``'s :class:`OutsideEvents`, made once per compiled chart (on first use: it
    reads every state, which loading does not make)."""
    known = chart._outside
    if known is None:
        known = chart._outside = outside_events(chart.external_events, chart.states)
    return known


def outside_events(listed: str | None, states: Iterable[StateNode]) -> OutsideEvents:
    """The :class:`OutsideEvents` of a chart with ``ds:external-events`` ``listed`` (None:
    not declared) and ``states``: the declared list, or the names it only sends itself
    (every ``<raise>`` and ``<send>`` of its states, transitions and finalizes)."""
    if listed is not None:
        return OutsideEvents(declared=tuple(split_descriptor(t) for t in listed.split()))
    to_self: set[str] = set()
    elsewhere: set[str] = set()
    for action in _every_action(states):
        if isinstance(action, Raise):
            to_self.add(action.event)
        elif isinstance(action, Send):
            if action.eventexpr is not None:
                return OutsideEvents()  # any name may be sent anywhere: nothing left out
            if action.event is None:
                continue  # (content only: no name)
            (to_self if _to_itself(action) else elsewhere).add(action.event)
    return OutsideEvents(self_only=frozenset(to_self - elsewhere))


def _to_itself(send: Send) -> bool:
    if send.typeexpr is not None or (send.type is not None and send.type not in SCXML_SEND_TYPES):
        return False
    if send.targetexpr is not None:
        return "".join(send.targetexpr.source.split()) in _OWN_SESSION_TARGETS
    return send.target is None or send.target == "#_internal"


def _every_action(states: Iterable[StateNode]) -> Iterator[Action]:
    every: list[Block] = []
    for state in states:
        every.extend(state.onentry)
        every.extend(state.onexit)
        every.extend(t.body for t in state.transitions)
        if state.initial is not None:
            every.append(state.initial.body)
        every.extend(invoke.finalize for invoke in state.invokes)
    for block in every:
        yield from _flat(block.actions)


def _flat(actions: tuple[Action, ...]) -> Iterator[Action]:
    for action in actions:
        yield action
        if isinstance(action, If):
            for _, body in action.branches:
                yield from _flat(body)
        elif isinstance(action, Foreach):
            yield from _flat(action.actions)
