"""``available_events`` is linear in the chart whatever its shape, counted, not timed (issue
28: it cost names x transitions x descriptors, and a page holding such an execution hung for
minutes), and it answers exactly what the selection it describes would (a reference kept
here: the names x transitions x descriptors computation it replaced, on random charts).

Work is the calls ``sys.setprofile`` sees (Python functions and built-ins) and the guards the
datamodel evaluates, as the chart doubles. Where the lists themselves would hold more than
the chart (a false guard on a prefix descriptor is listed under every name below it), the
work budget cuts them short, flagged ``truncated``; names and availability stay complete.
``benchmarks/available_events_shapes.py`` times the same shapes through every door.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statecharts.core import Event, Interpreter, load_chart
from statecharts.core import availability as core
from statecharts.core.availability import (
    Availability,
    AvailableEvent,
    GuardKind,
    GuardTime,
    TransitionOption,
    available_events,
)
from statecharts.core.datamodel.ecmascript import EcmascriptDatamodel
from statecharts.core.events import split_descriptor
from statecharts.core.model import Chart, Transition
from statecharts.core.state import State

NS = "http://www.w3.org/2005/07/scxml"
HEAD = f'<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript" initial="s">'


def head(initial: str) -> str:
    return HEAD.replace('initial="s"', f'initial="{initial}"')


DATA = '<datamodel><data id="x" expr="0"/></datamodel>'


# ---- the shapes ---------------------------------------------------------------------------


def one_state(body: str) -> str:
    return f'{HEAD}{DATA}<state id="s">{body}</state><state id="t"/></scxml>'


def guarded(n: int) -> str:
    """n guarded transitions, each its own event (the issue's 2,000 -> 10,000)."""
    return one_state(
        "".join(f'<transition event="e{i}" cond="x &gt; {i}" target="t"/>' for i in range(n))
    )


def descriptors(n: int) -> str:
    """One transition with n descriptors."""
    return one_state(f'<transition event="{" ".join(f"e{i}" for i in range(n))}" target="t"/>')


def prefix(n: int, descriptor: str = "a") -> str:
    """n/2 false guards on a prefix descriptor, n/2 names under it: every name matches every
    prefix transition (its list would hold them all)."""
    half = n // 2
    return one_state(
        "".join(f'<transition event="{descriptor}" cond="x &gt; {i}"/>' for i in range(half))
        + "".join(f'<transition event="a.{i}" cond="x &gt; {i}"/>' for i in range(half))
    )


# The shapes and sizes the door tests (tests/api, tests/admin) request whole pages for.
DOOR_SHAPES: dict[str, Callable[[int], str]] = {
    "guarded": guarded,
    "descriptors": descriptors,
    "prefix": prefix,
}
DOOR_SIZES = (200, 400, 800)


def prefix_enabled(n: int) -> str:
    """n/2 names under a prefix, each enabled, then n/2 false guards on the prefix: each
    name's list stops at its own transition (linear lists; the prefix is looked at once)."""
    half = n // 2
    return one_state(
        "".join(f'<transition event="a.{i}" target="t"/>' for i in range(half))
        + "".join(f'<transition event="a.*" cond="x &gt; {i}"/>' for i in range(half))
    )


def wildcard(n: int) -> str:
    """A false ``*`` in the parent, n names in the child: each name lists it once."""
    names = "".join(f'<transition event="n{i}.x" cond="x &gt; {i}"/>' for i in range(n))
    return (
        f'{head("p")}{DATA}<state id="p"><transition event="*" cond="x &gt; 0"/>'
        f'<state id="s">{names}</state></state><state id="t"/></scxml>'
    )


def regions(n: int) -> str:
    """n parallel regions, each an atomic state with its own event and a shared one."""
    body = "".join(
        f'<state id="r{i}"><transition event="r{i} go" cond="x &gt; {i}"/></state>'
        for i in range(n)
    )
    return f'{head("p")}{DATA}<parallel id="p">{body}</parallel></scxml>'


def deep(n: int, levels: int = 100) -> str:
    """``levels`` nested states (the parser allows 128), each with a false guard on the
    prefix ``a``; the innermost has n names under it, each enabled: each name's matched
    states are the whole chain, and its list stops at its own transition."""
    opened = "".join(
        f'<state id="d{i}"><transition event="a" cond="x &gt; {i}"/>' for i in range(levels)
    )
    names = "".join(f'<transition event="a.{i}" target="d0"/>' for i in range(n))
    return (
        f'{head("leaf")}{DATA}{opened}<state id="leaf">{names}</state>'
        + "</state>" * levels
        + "</scxml>"
    )


SHAPES: dict[str, Callable[[int], str]] = {
    "guarded": guarded,
    "descriptors": descriptors,
    "prefix": prefix,
    "prefix_family": lambda n: prefix(n, "a.*"),
    "prefix_enabled": prefix_enabled,
    "wildcard": wildcard,
    "regions": regions,
    "deep": deep,
}


def start(source: str) -> tuple[Chart, State]:
    chart = load_chart(source)
    return chart, Interpreter(chart).initialize("s1").state


# ---- counting work ------------------------------------------------------------------------


class Overrun(Exception):
    """More calls than any linear answer makes: stops a quadratic one before it runs long."""


@contextmanager
def counting(cap: int) -> Iterator[dict[str, int]]:
    """Counts the calls ``sys.setprofile`` sees and the guards the datamodel evaluates;
    raises :class:`Overrun` past ``cap`` calls."""
    counts = {"calls": 0, "guards": 0}
    evaluate = EcmascriptDatamodel.evaluate_cond

    def counted_evaluate(self: EcmascriptDatamodel, expr: Any) -> bool:
        counts["guards"] += 1
        return evaluate(self, expr)

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" or event == "c_call":
            counts["calls"] += 1
            if counts["calls"] > cap:
                raise Overrun(f"more than {cap} calls")

    EcmascriptDatamodel.evaluate_cond = counted_evaluate  # type: ignore[method-assign]
    sys.setprofile(profile)
    try:
        yield counts
    finally:
        sys.setprofile(None)
        EcmascriptDatamodel.evaluate_cond = evaluate  # type: ignore[method-assign]


# Calls per transition a linear answer stays under (guards evaluated, lists and all): the
# cap that stops a quadratic one early.
CALLS_PER_TRANSITION = 400


def work(shape: Callable[[int], str], n: int) -> dict[str, int]:
    """The work of one answer on ``shape(n)``, and the guards the chart has."""
    chart, state = start(shape(n))
    available_events(chart, state)  # warm (the sandbox's engine, imports)
    with counting(CALLS_PER_TRANSITION * n + 50_000) as counts:
        available_events(chart, state)
    return {**counts, "chart_guards": sum(t.cond is not None for t in chart.transitions)}


@pytest.mark.parametrize("name", SHAPES)
def test_the_work_grows_like_the_chart(name: str) -> None:
    shape = SHAPES[name]
    sizes = (250, 500, 1000)
    counts = [work(shape, n) for n in sizes]
    calls = [c["calls"] for c in counts]
    # Doubling the chart at most doubles the work it adds (a fixed part aside): the increase
    # from 500 to 1,000 transitions is about twice the one from 250 to 500 (four times for
    # a quadratic computation).
    assert calls[2] - calls[1] <= 2.5 * (calls[1] - calls[0]), (name, calls)
    # Each guard is evaluated at most once per answer.
    assert all(c["guards"] <= c["chart_guards"] for c in counts), (name, counts)


def test_each_guard_is_evaluated_at_most_once_and_only_when_it_may_decide() -> None:
    chart, state = start(prefix(400))
    with counting(10**9) as counts:
        available_events(chart, state)
    assert counts["guards"] == 400  # 200 prefix guards and 200 of their own, once each
    # A transition that surely holds decides: the guards after it are never evaluated.
    chart, state = start(
        one_state(
            '<transition event="*"/>'
            + "".join(f'<transition event="e{i}" cond="x &gt; {i}"/>' for i in range(300))
        )
    )
    with counting(10**9) as counts:
        events = available_events(chart, state)
    assert counts["guards"] == 0
    assert len(events) == 301 and all(e.availability is Availability.ENABLED for e in events)


def test_lists_past_the_budget_are_cut_short_and_flagged_the_rest_is_exact() -> None:
    chart, state = start(prefix(2000))
    events = available_events(chart, state)
    # every name, each exact: no guard holds (x is 0), so all are disabled
    assert [e.name for e in events] == ["a", *(f"a.{i}" for i in range(1000))]
    assert all(e.availability is Availability.DISABLED for e in events)
    # the first lists are whole (each name under "a" lists the 1,000 "a" and its own) ...
    assert len(events[1].transitions) == 1001 and not events[1].truncated
    # ... then the budget runs out: the lists are cut short, and say so
    cut = [e for e in events if e.truncated]
    assert cut and cut[-1] is events[-1]
    assert all(len(e.transitions) < 1001 for e in cut)
    listed = sum(core.option_size(t) for t in _transitions(chart, events))
    transitions = [t for node in chart.states for t in node.transitions]
    assert listed <= core.default_work_budget(transitions)


def test_an_explicit_budget_cuts_a_list_at_a_prefix_of_it() -> None:
    chart, state = start(prefix(20))
    whole = available_events(chart, state)
    assert not any(e.truncated for e in whole)
    cut = available_events(chart, state, work_budget=600)
    assert [(e.name, e.availability) for e in cut] == [(e.name, e.availability) for e in whole]
    assert any(e.truncated for e in cut)
    for full, part in zip(whole, cut, strict=True):
        assert full.transitions[: len(part.transitions)] == part.transitions
        assert part.truncated or part.transitions == full.transitions


def test_shapes_with_linear_lists_are_never_cut() -> None:
    for shape in (guarded, prefix_enabled, wildcard, regions, deep):
        chart, state = start(shape(2000))
        events = available_events(chart, state)
        assert not any(e.truncated for e in events), shape.__name__
        assert all(e.transitions for e in events), shape.__name__


def test_the_guards_share_a_wall_clock_allowance_given_a_host_clock() -> None:
    now = [0.0]

    def clock() -> float:
        now[0] += 0.004  # each reading: 4 ms later
        return now[0]

    chart, state = start(guarded(100))
    time = GuardTime(clock, budget_ms=100)
    events = available_events(chart, state, guard_time=time)
    kinds = [e.transitions[0].guard for e in events]
    evaluated = kinds.count(GuardKind.EVALUATED)
    assert 0 < evaluated < 100  # about 25 guards (4 ms each), then none
    assert kinds[evaluated:] == [GuardKind.FAILED] * (100 - evaluated)
    late = events[-1]
    assert late.availability is Availability.CONDITIONAL
    assert "had 100 ms in all" in late.transitions[0].reason
    # shared: a second answer with the same allowance evaluates nothing
    again = available_events(chart, state, guard_time=time)
    assert all(e.transitions[0].guard is GuardKind.FAILED for e in again)


def _transitions(chart: Chart, events: tuple[AvailableEvent, ...]) -> Iterator[Transition]:
    by_key = {
        (chart.states[t.source].id, t.event_text, t.cond.source if t.cond else None): t
        for t in chart.transitions
    }
    for event in events:
        for option in event.transitions:
            yield by_key[(option.source, option.event, option.cond)]


# ---- the same answers as the computation it replaced --------------------------------------


def reference(chart: Chart, state: State) -> tuple[AvailableEvent, ...]:
    """The answer as it was computed before issue 28 (for each name, each transition, each
    descriptor): the oracle of the property below."""
    if not state.running:
        return ()
    states = chart.states
    active = set(state.configuration)
    atomics = sorted(s for s in active if states[s].is_atomic)
    per_state = [
        tuple(
            t
            for s in (atomic, *states[atomic].ancestors)
            for t in states[s].transitions
            if not t.eventless
        )
        for atomic in atomics
    ]
    names: dict[tuple[str, ...], tuple[bool, bool]] = {}
    for transition in sorted({t for ts in per_state for t in ts}, key=lambda t: t.index):
        for text in (transition.event_text or "").split():
            parts = split_descriptor(text)
            old = names.get(parts, (False, False))
            names[parts] = (parts == () or old[0], text.endswith("*") or old[1])
    guards = core._Guards(chart, state, None, None)
    try:
        result = []
        for parts, (any_name, family) in names.items():
            options: dict[int, TransitionOption] = {}
            enabled = conditional = False
            for candidates in per_state:
                for t in candidates:
                    n = len(parts)
                    if not any(len(d) <= n and parts[: len(d)] == d for d in t.events):
                        continue
                    option = options.get(t.index)
                    if option is None:
                        option = options[t.index] = guards.option(t)
                    if option.availability is Availability.ENABLED:
                        enabled = True
                        break
                    if option.availability is Availability.CONDITIONAL:
                        conditional = True
            name = ".".join(parts) if parts else "*"
            result.append(
                AvailableEvent(
                    name=name,
                    availability=Availability.ENABLED
                    if enabled
                    else Availability.CONDITIONAL
                    if conditional
                    else Availability.DISABLED,
                    transitions=tuple(options.values()),
                    any_name=any_name,
                    family=family and not any_name,
                    reserved=bool(parts)
                    and any(name == r or name.startswith(r + ".") for r in ("done", "error")),
                )
            )
        return tuple(result)
    finally:
        guards.close()


DESCRIPTORS = ["a", "a.b", "a.*", "a.b.c", "a.", "b", "b.c.*", "*", "c.a", "error.x", "done.y"]
GUARDS = [None, "x &gt; 0", "x == 0", "x &gt; 1", "_event.data", "(x = 2)", "In('s2')", "no.f"]
SENT = ["a", "a.b", "a.b.c", "b", "b.c", "c.a", "z", "error.x"]


@st.composite
def charts(draw: st.DrawFn) -> str:
    """Nested compound and parallel states with transitions on overlapping descriptors,
    guards of every kind (true, false, reading _event, with side effects, failing, In())."""
    count = [0]

    def transition(state_ids: list[str]) -> str:
        events = " ".join(draw(st.lists(st.sampled_from(DESCRIPTORS), min_size=1, max_size=3)))
        cond = draw(st.sampled_from(GUARDS))
        target = draw(st.sampled_from([None, *state_ids]))
        body = draw(st.sampled_from(["", '<assign location="x" expr="x + 1"/>']))
        attributes = f'event="{events}"'
        if cond is not None:
            attributes += f' cond="{cond}"'
        if target is not None:
            attributes += f' target="{target}"'
        return f"<transition {attributes}>{body}</transition>"

    def state(depth: int) -> tuple[str, list[str]]:
        count[0] += 1
        sid = f"s{count[0]}"
        kind = draw(st.sampled_from(["state", "state", "parallel"])) if depth < 3 else "state"
        children = draw(st.integers(0 if kind == "state" else 2, 2 if depth < 3 else 0))
        inner, ids = [], [sid]
        for _ in range(children):
            text, more = state(depth + 1)
            inner.append(text)
            ids.extend(more)
        return f'<{kind} id="{sid}">{{T:{sid}}}{"".join(inner)}</{kind}>', ids

    texts, ids = [], []
    for _ in range(draw(st.integers(1, 3))):
        text, more = state(1)
        texts.append(text)
        ids.extend(more)
    body = "".join(texts)
    for sid in ids:
        found = draw(st.integers(0, 3))
        body = body.replace(f"{{T:{sid}}}", "".join(transition(ids) for _ in range(found)))
    return f'<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript">{DATA}{body}</scxml>'


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(charts(), st.lists(st.sampled_from(SENT), max_size=4))
def test_the_answer_is_the_selection_it_describes(source: str, sent: list[str]) -> None:
    chart = load_chart(source)
    interpreter = Interpreter(chart)
    state = interpreter.initialize("s1").state
    for name in [*sent, None]:
        assert available_events(chart, state) == reference(chart, state)
        if name is None or not state.running:
            break
        state = interpreter.handle_event(state, Event(name)).state
