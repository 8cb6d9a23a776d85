"""The in-memory driver: runs charts with no database, on a virtual clock.

For tests, the conformance runner and embedders. It performs every effect the core emits:
external queues per session, delayed sends on a virtual clock (``advance(ms)`` fires what is
due, in due order, never sleeping), ``<cancel>``, and parent/child sessions for ``<invoke>``.
Its public API is documented in docs/embedding.md and kept stable.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from statecharts.core import effects as fx
from statecharts.core.compile import load_chart
from statecharts.core.datamodel import Limits, check_tagged, plain
from statecharts.core.effects import Effect
from statecharts.core.errors import ChartError, NotRunningError, ResolveError
from statecharts.core.events import EXTERNAL, PLATFORM, Event, external_event
from statecharts.core.interpreter import DEFAULT_ROUND_BUDGET, Interpreter, Step
from statecharts.core.model import Chart
from statecharts.core.resolve import Resolver, default_resolver
from statecharts.core.state import State


@dataclass(slots=True)
class _Timer:
    due_ms: int
    seq: int
    session_id: str
    effect: Effect
    cancelled: bool = False

    def __lt__(self, other: _Timer) -> bool:
        return (self.due_ms, self.seq) < (other.due_ms, other.seq)


@dataclass(eq=False)
class MemorySession:
    """One running chart instance inside a :class:`MemoryDriver`."""

    driver: MemoryDriver
    session_id: str
    chart: Chart
    interpreter: Interpreter
    state: State | None = None
    parent: MemorySession | None = None
    invokeid: str | None = None
    children: dict[str, MemorySession] = field(default_factory=dict)
    effects: list[Effect] = field(default_factory=list)
    logs: list[tuple[str | None, Any]] = field(default_factory=list)
    done: bool = False
    donedata: Any = None
    final: str | None = None  # id of the top-level final state reached, if any
    outcome: str | None = None  # "final", "cancelled", "budget_exhausted"
    cancelled_by_parent: bool = False

    # -- reading ---------------------------------------------------------------------------

    @property
    def configuration(self) -> frozenset[str]:
        """Ids of every active state (not including the <scxml> root)."""
        if self.state is None:
            return frozenset()
        states = self.chart.states
        return frozenset(states[i].id for i in self.state.configuration if i != 0)

    @property
    def atomic_configuration(self) -> frozenset[str]:
        if self.state is None:
            return frozenset()
        states = self.chart.states
        return frozenset(states[i].id for i in self.state.configuration if states[i].is_atomic)

    @property
    def datamodel(self) -> dict[str, Any]:
        """The datamodel as natural Python values (see docs/embedding.md for the encoding)."""
        if self.state is None:
            return {}
        result: dict[str, Any] = plain(self.state.datamodel)
        return result

    @property
    def running(self) -> bool:
        return self.state is not None and self.state.running

    # -- acting ----------------------------------------------------------------------------

    def send(self, name: str, data: Any = None, **fields: Any) -> MemorySession:
        """Queue an external event and run every session until nothing is left to do."""
        if not self.running:
            raise NotRunningError(f"session {self.session_id} is no longer running")
        if data is not None:
            check_tagged(data)
        event = Event(name, EXTERNAL, data, **fields) if fields else external_event(name, data)
        driver = self.driver
        queue = driver._queue
        if queue:  # others are waiting: this event goes after them
            queue.append((self, event))
            driver.run_until_idle()
            return self
        # Nothing queued: handling it right away is what run_until_idle would do.
        assert self.state is not None
        driver._apply(self, self.interpreter.handle_event(self.state, event))
        if queue:
            driver.run_until_idle()
        return self

    def cancel(self) -> MemorySession:
        """Stop the session: onexit handlers run, then it is done with outcome "cancelled"."""
        if self.running:
            assert self.state is not None
            self.driver._apply(self, self.interpreter.cancel(self.state))
            self.driver.run_until_idle()
        return self


class MemoryDriver:
    """Runs sessions in memory on a virtual clock, starting at ``clock_ms`` (default 0)."""

    def __init__(
        self,
        *,
        tracing: bool = False,
        resolver: Resolver = default_resolver,
        round_budget: int = DEFAULT_ROUND_BUDGET,
        limits: Limits | None = None,
        clock_ms: int = 0,
        on_effect: Callable[[MemorySession, Effect], None] | None = None,
    ) -> None:
        self.tracing = tracing
        self.resolver = resolver
        self.round_budget = round_budget
        self.limits = limits
        self.now_ms = clock_ms
        self.on_effect = on_effect
        self.sessions: dict[str, MemorySession] = {}
        self._queue: deque[tuple[MemorySession, Event]] = deque()
        self._timers: list[_Timer] = []
        self._seq = itertools.count()
        self._session_numbers = itertools.count(1)
        self._chart_cache: dict[str, Chart] = {}

    # -- public API ------------------------------------------------------------------------

    def load(
        self,
        source: str | bytes,
        *,
        base_path: str | Path | None = None,
        source_name: str | None = None,
    ) -> Chart:
        """Compile a chart from a string (ChartError lists every problem)."""
        return load_chart(
            source, base_path=base_path, resolver=self.resolver, source_name=source_name
        )

    def load_file(self, path: str | Path) -> Chart:
        path = Path(path)
        return self.load(path.read_bytes(), base_path=path.parent, source_name=str(path))

    def start(
        self,
        chart: Chart | str | bytes,
        *,
        data: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> MemorySession:
        """Start a session of ``chart`` (a Chart or SCXML source) and run it to quiescence."""
        if not isinstance(chart, Chart):
            chart = self.load(chart)
        if data is not None:
            check_tagged(data)
        session = self._new_session(chart, session_id)
        self._apply(session, session.interpreter.initialize(session.session_id, data=data))
        self.run_until_idle()
        return session

    def advance(self, ms: int) -> None:
        """Move the virtual clock forward, firing due delayed sends in due order."""
        target = self.now_ms + ms
        self.run_until_idle()
        while self._timers and self._timers[0].due_ms <= target:
            timer = heapq.heappop(self._timers)
            if timer.cancelled:
                continue
            self.now_ms = max(self.now_ms, timer.due_ms)
            self._fire(timer)
            self.run_until_idle()
        self.now_ms = target

    def next_due_ms(self) -> int | None:
        """When the next pending delayed send is due, or None."""
        while self._timers and self._timers[0].cancelled:
            heapq.heappop(self._timers)
        return self._timers[0].due_ms if self._timers else None

    def pending_timers(self, session: MemorySession | None = None) -> list[dict[str, Any]]:
        return [
            {"due_ms": t.due_ms, "session_id": t.session_id, **t.effect.data}
            for t in sorted(self._timers)
            if not t.cancelled and (session is None or t.session_id == session.session_id)
        ]

    def run_until_idle(self) -> None:
        """Deliver queued external events until every queue is empty."""
        while self._queue:
            session, event = self._queue.popleft()
            if not session.running:
                continue
            assert session.state is not None
            self._apply(session, session.interpreter.handle_event(session.state, event))

    # -- internals -------------------------------------------------------------------------

    def _new_session(self, chart: Chart, session_id: str | None) -> MemorySession:
        session_id = session_id or f"session-{next(self._session_numbers)}"
        if session_id in self.sessions:
            raise ValueError(f"session id {session_id!r} is already in use")
        interpreter = Interpreter(
            chart,
            tracing=self.tracing,
            round_budget=self.round_budget,
            limits=self.limits,
            is_reachable=self._is_reachable,
        )
        session = MemorySession(self, session_id, chart, interpreter)
        self.sessions[session_id] = session
        return session

    def _is_reachable(self, session_id: str) -> bool:
        session = self.sessions.get(session_id)
        return session is not None and session.running

    def _enqueue(self, session: MemorySession, event: Event) -> None:
        self._queue.append((session, event))

    def _apply(self, session: MemorySession, step: Step) -> None:
        session.state = step.state
        for effect in step.effects:
            session.effects.append(effect)
            if self.on_effect is not None:
                self.on_effect(session, effect)
            self._perform(session, effect)

    def _perform(self, session: MemorySession, effect: Effect) -> None:
        kind, data = effect.kind, effect.data
        if kind == fx.DATAMODEL_CHANGE:  # (the commonest effect; nothing to do)
            return
        if kind == fx.SEND:
            self._deliver(session, data["target"], Event.from_dict(data["event"]))
        elif kind == fx.SEND_DELAYED:
            timer = _Timer(
                self.now_ms + data["delay_ms"], next(self._seq), session.session_id, effect
            )
            heapq.heappush(self._timers, timer)
        elif kind == fx.CANCEL:
            for timer in self._timers:
                if (
                    timer.session_id == session.session_id
                    and timer.effect.data["send_id"] == data["send_id"]
                ):
                    timer.cancelled = True
        elif kind == fx.LOG:
            session.logs.append((data["label"], data["value"]))
        elif kind == fx.INVOKE:
            self._invoke(session, data)
        elif kind == fx.CANCEL_INVOKE:
            child = session.children.pop(data["invokeid"], None)
            if child is not None and child.running:
                child.cancelled_by_parent = True
                assert child.state is not None
                self._apply(child, child.interpreter.cancel(child.state))
        elif kind == fx.AUTOFORWARD:
            child = session.children.get(data["invokeid"])
            if child is not None and child.running:
                self._enqueue(child, Event.from_dict(data["event"]))
        elif kind == fx.DONE:
            for timer in self._timers:  # a finished session's delayed sends never fire
                if timer.session_id == session.session_id:
                    timer.cancelled = True
            session.done = True
            session.donedata = data["donedata"]
            session.final = data["final"]
            session.outcome = data["reason"]
            parent = session.parent
            if parent is not None and not session.cancelled_by_parent and parent.running:
                self._enqueue(
                    parent,
                    Event(
                        f"done.invoke.{session.invokeid}",
                        EXTERNAL,
                        data["donedata"],
                        invokeid=session.invokeid,
                    ),
                )
        elif kind == fx.BUDGET_EXHAUSTED:
            session.outcome = "budget_exhausted"

    def _deliver(self, session: MemorySession, target: dict[str, Any], event: Event) -> None:
        kind = target["kind"]
        if kind == "self":
            self._enqueue(session, event)
        elif kind == "internal":
            if session.running:
                assert session.state is not None
                self._apply(session, session.interpreter.deliver_internal(session.state, event))
        elif kind == "parent":
            if session.parent is not None and not session.cancelled_by_parent:
                self._enqueue(session.parent, event)
        elif kind == "invoke":
            child = session.children.get(target["invokeid"])
            if child is not None and child.running:
                self._enqueue(child, event)
            else:
                self._communication_error(session, f"invocation {target['invokeid']!r} is gone")
        elif kind == "session":
            other = self.sessions.get(target["session_id"])
            if other is not None and other.running:
                self._enqueue(other, event)
            else:
                self._communication_error(session, f"session {target['session_id']!r} is gone")

    def _communication_error(self, session: MemorySession, message: str) -> None:
        if session.running:
            assert session.state is not None
            event = Event("error.communication", PLATFORM, {"message": message})
            self._apply(session, session.interpreter.deliver_internal(session.state, event))

    def _fire(self, timer: _Timer) -> None:
        session = self.sessions.get(timer.session_id)
        if session is None or not session.running:
            return  # the sender is gone: a delayed event is discarded (spec 6.2)
        data = timer.effect.data
        self._deliver(session, data["target"], Event.from_dict(data["event"]))

    def _invoke(self, parent: MemorySession, data: dict[str, Any]) -> None:
        try:
            if data["content"] is not None:
                content = data["content"]
                chart = self._chart(
                    content if isinstance(content, str) else str(content), data.get("base_path")
                )
            elif data["src"] is not None:
                text = self.resolver(data["src"], data.get("base_path"))
                chart = self._chart(text, data.get("base_path"))
            else:
                raise ResolveError("<invoke> has neither src nor content")
        except (ChartError, ResolveError) as exc:
            if parent.running:
                assert parent.state is not None
                event = Event("error.execution", PLATFORM, {"message": str(exc)})
                self._apply(parent, parent.interpreter.deliver_internal(parent.state, event))
            return
        child_id = f"{parent.session_id}.{data['invokeid']}"
        while child_id in self.sessions:  # the same invoke id, invoked again
            child_id = f"{parent.session_id}.{data['invokeid']}.{next(self._seq)}"
        child = self._new_session(chart, child_id)
        child.parent = parent
        child.invokeid = data["invokeid"]
        parent.children[data["invokeid"]] = child
        overrides = data["data"] if isinstance(data["data"], dict) else None
        self._apply(
            child,
            child.interpreter.initialize(
                child.session_id,
                data=overrides,
                parent_session_id=parent.session_id,
                invokeid=data["invokeid"],
            ),
        )

    def _chart(self, source: str, base_path: str | None) -> Chart:
        key = f"{base_path}\0{source}"
        chart = self._chart_cache.get(key)
        if chart is None:
            chart = self._chart_cache[key] = load_chart(
                source, base_path=base_path, resolver=self.resolver
            )
        return chart
