"""The in-memory driver: runs charts with no database, on a virtual clock.

For tests, the conformance runner and embedders. It performs every instruction the planner
(``statecharts.core.plan``) makes of the core's effects: external queues per session, delayed
sends on a virtual clock (``advance(ms)`` fires what is due, in due order, never sleeping),
``<cancel>``, and parent/child sessions for ``<invoke>``. It decides nothing about where an
effect goes: that is the planner's, shared with the durable stepper. Its public API is
documented in docs/embedding.md and kept stable.
"""

from __future__ import annotations

import heapq
import itertools
import sys
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from time import perf_counter
from typing import Any, Protocol

from statecharts.core import telemetry
from statecharts.core.budget import StepBudgets
from statecharts.core.compile import load_chart
from statecharts.core.datamodel import Limits, check_tagged, plain
from statecharts.core.effects import Effect
from statecharts.core.errors import ChartError, NotRunningError, ResolveError
from statecharts.core.events import EXTERNAL, PLATFORM, Event, external_event
from statecharts.core.host import IN_MEMORY_TYPES, ROUTE_OK, Host, RegisteredTypes, RouteAnswer
from statecharts.core.interpreter import DEFAULT_ROUND_BUDGET, Interpreter, Step
from statecharts.core.model import Chart
from statecharts.core.plan import OBSERVED, Instruction, InstructionKind, delivery, plan_one
from statecharts.core.resolve import Resolver, default_resolver
from statecharts.core.state import State
from statecharts.core.telemetry import TelemetryEvent
from statecharts.drivers.durable import CANCEL, EVENT, INTERNAL, START, status_of

MEMORY = telemetry.Driver.MEMORY.value
# The datamodel of a chart without a ``datamodel`` attribute when Django has no
# ``STATECHARTS["DEFAULT_DATAMODEL"]`` to say: the shipped default of that setting
# (statecharts/declaration.py; tests/drivers hold the two equal).
DEFAULT_DATAMODEL = "ecmascript"
STARTED = TelemetryEvent.EXECUTION_STARTED
# Instructions not reported as performed: observations, self-sends (consumed inside the
# step, as the durable stepper does) and unroutable ones (reported as such).
_NOT_PERFORMED = frozenset(
    {InstructionKind.OBSERVE, InstructionKind.DELIVER_SELF, InstructionKind.UNROUTABLE}
)


def _status(session: MemorySession) -> str:
    """The status a durable execution in this state would have (one vocabulary)."""
    if session.halted is not None:
        return "halted"
    return status_of(session.state) if session.state is not None else "active"


class MemoryRoute(Protocol):
    """A route the in-memory driver delivers to (a host-registered ``<send type>``)."""

    types: tuple[str, ...]  # the <send type> values it serves

    def check(self, send_type: str, target: str | None) -> RouteAnswer: ...

    def deliver(self, session: MemorySession, instruction: Instruction, key: str) -> None: ...


@dataclass(slots=True)
class _Timer:
    due_ms: int
    seq: int
    session_id: str
    effect: Effect
    delivery: Instruction  # what it becomes when it fires (the planner's)
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
    donedata_error: str | None = None  # why <donedata> could not be evaluated, if it failed
    outcome: str | None = None  # "final", "cancelled", "budget_exhausted"
    # Set when a step went over a budget (statecharts.core.budget): that step was rolled back,
    # the session keeps the state from before it, takes no more events, and can be cancelled.
    halted: dict[str, Any] | None = None
    cancelled_by_parent: bool = False
    # The external events no transition took, in order (SCXML consumed them: mainEventLoop),
    # as the durable stepper records ``unhandled`` (``StepResult.handled``).
    unhandled: list[str] = field(default_factory=list)

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
        return self.state is not None and self.state.running and self.halted is None

    # -- acting ----------------------------------------------------------------------------

    def send(self, name: str, data: Any = None, **fields: Any) -> MemorySession:
        """Queue an external event and run every session until nothing is left to do."""
        state = self.state
        if state is None or not state.running or self.halted is not None:  # (self.running)
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
        if telemetry.listeners:
            driver._step(self, EVENT, name, partial(self._handle, state, event))
        else:  # (the hot path: no closure, no timing)
            driver._apply(self, self._handle(state, event))
        if queue:
            driver.run_until_idle()
        return self

    def _handle(self, state: State, event: Event) -> Step:
        """The interpreter's step for an external event; one no transition took is noted in
        :attr:`unhandled`."""
        step = self.interpreter.handle_event(state, event)
        if step.unhandled:
            self.unhandled.append(event.name)
        return step

    def enqueue(self, name: str, data: Any = None, **fields: Any) -> MemorySession:
        """Queue an external event without running anything: it is handled, after the events
        already queued, by the driver's next ``run_until_idle`` (or ``advance``). For an Event
        I/O processor that delivers while the driver is busy performing a step (Basic HTTP's
        inbound posts, handed over on the driver's thread)."""
        if not self.running:
            raise NotRunningError(f"session {self.session_id} is no longer running")
        if data is not None:
            check_tagged(data)
        event = Event(name, EXTERNAL, data, **fields) if fields else external_event(name, data)
        self.driver._enqueue(self, event)
        return self

    def cancel(self) -> MemorySession:
        """Stop the session: onexit handlers run, then it is done with outcome "cancelled".

        A halted session (a step went over a budget) can be cancelled too: its onexit handlers
        run in the configuration it kept."""
        if self.state is not None and self.state.running:
            state = self.state
            self.driver._step(self, CANCEL, None, lambda: self.interpreter.cancel(state))
            self.driver.run_until_idle()
        return self


def configured_default_datamodel() -> str:
    """The ``DEFAULT_DATAMODEL`` setting when Django is configured, else its shipped default.

    The driver stands on the core alone (tests/architecture): it imports no Django, and only
    reads the settings of a Django that the process has already imported and configured, so
    that the same document runs under the same datamodel in memory and in the database."""
    conf = sys.modules.get("django.conf")
    if conf is None or not conf.settings.configured:
        return DEFAULT_DATAMODEL
    configured = getattr(conf.settings, "STATECHARTS", None) or {}
    return str(configured.get("DEFAULT_DATAMODEL", DEFAULT_DATAMODEL))


class MemoryDriver:
    """Runs sessions in memory on a virtual clock, starting at ``clock_ms`` (default 0).

    ``datamodel`` is the datamodel of a chart without a ``datamodel`` attribute (the spec
    leaves it to the platform): by default the ``DEFAULT_DATAMODEL`` setting when Django is
    configured, ``ecmascript`` otherwise, as for a chart loaded into the database."""

    def __init__(
        self,
        *,
        tracing: bool = False,
        resolver: Resolver = default_resolver,
        round_budget: int = DEFAULT_ROUND_BUDGET,
        budgets: StepBudgets | None = None,
        limits: Limits | None = None,
        clock_ms: int = 0,
        on_effect: Callable[[MemorySession, Effect], None] | None = None,
        on_instruction: Callable[[MemorySession, Instruction], None] | None = None,
        types: RegisteredTypes = IN_MEMORY_TYPES,
        routes: Mapping[str, MemoryRoute] | None = None,
        datamodel: str | None = None,
    ) -> None:
        self.tracing = tracing
        self.datamodel = datamodel if datamodel is not None else configured_default_datamodel()
        self.resolver = resolver
        self.round_budget = round_budget
        self.budgets = budgets or StepBudgets(rounds=round_budget)
        self.limits = limits
        self.now_ms = clock_ms
        self.on_effect = on_effect
        self.on_instruction = on_instruction
        # What the core may rely on (statecharts.core.host): SCXML children and delayed sends.
        # Routes (host-registered <send type>s) this driver delivers to, by name: their types
        # join the registered types, with a timer queue (the virtual clock) for delayed ones.
        self.routes: dict[str, MemoryRoute] = dict(routes or {})
        if self.routes:
            send = dict(types.send)
            for name, route in self.routes.items():
                send.update(dict.fromkeys(route.types, name))
            types = RegisteredTypes.of(
                send=send, invoke=types.invoke, timers=types.timers, route_timers=True
            )
        self.host = Host(types, self._is_reachable, check_route=self._check_route)
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
            source,
            base_path=base_path,
            resolver=self.resolver,
            source_name=source_name,
            default_datamodel=self.datamodel,
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
        io_processors: dict[str, str] | None = None,
    ) -> MemorySession:
        """Start a session of ``chart`` (a Chart or SCXML source) and run it to quiescence.

        ``io_processors`` adds host Event I/O processors to the session's ``_ioprocessors``
        (type -> location), e.g. the Basic HTTP processor's address."""
        if not isinstance(chart, Chart):
            chart = self.load(chart)
        if data is not None:
            check_tagged(data)
        session = self._new_session(chart, session_id)
        if telemetry.listeners:
            telemetry.emit(STARTED, MEMORY, session.session_id, chart=chart.name)
        self._step(
            session,
            START,
            None,
            lambda: session.interpreter.initialize(
                session.session_id, data=data, io_processors=io_processors
            ),
        )
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
            {
                "due_ms": t.due_ms,
                "session_id": t.session_id,
                **t.effect.data,
                "target": t.delivery.target.to_dict() if t.delivery.target else None,
            }
            for t in sorted(self._timers)
            if not t.cancelled and (session is None or t.session_id == session.session_id)
        ]

    def run_until_idle(self) -> None:
        """Deliver queued external events until every queue is empty."""
        while self._queue:
            session, event = self._queue.popleft()
            if not session.running:
                continue
            state = session.state
            assert state is not None
            if not telemetry.listeners:
                self._apply(session, session._handle(state, event))
                continue
            run = partial(session._handle, state, event)
            self._step(session, EVENT, event.name, run)

    # -- internals -------------------------------------------------------------------------

    def _new_session(self, chart: Chart, session_id: str | None) -> MemorySession:
        session_id = session_id or f"session-{next(self._session_numbers)}"
        if session_id in self.sessions:
            raise ValueError(f"session id {session_id!r} is already in use")
        interpreter = Interpreter(
            chart,
            tracing=self.tracing,
            budgets=self.budgets,
            limits=self.limits,
            host=self.host,
        )
        session = MemorySession(self, session_id, chart, interpreter)
        self.sessions[session_id] = session
        return session

    def _is_reachable(self, session_id: str) -> bool:
        session = self.sessions.get(session_id)
        return session is not None and session.running

    def _enqueue(self, session: MemorySession, event: Event) -> None:
        self._queue.append((session, event))

    def _step(
        self,
        session: MemorySession,
        input_kind: str,
        event_name: str | None,
        run: Callable[[], Step],
    ) -> None:
        """Run one step (``run`` calls the interpreter) and perform it; with a telemetry
        listener, time it and emit ``step`` (the same event the durable stepper emits)."""
        if not telemetry.listeners:
            self._apply(session, run())
            return
        was_done, was_halted = session.done, session.halted
        started = perf_counter()
        step = run()
        self._apply(session, step)
        effects = step.effects
        # A step over a budget is rolled back (the session keeps its state): "refused", as
        # the durable stepper records it.
        halted = session.halted is not None and was_halted is None
        telemetry.emit(
            TelemetryEvent.STEP,
            MEMORY,
            session.session_id,
            chart=session.chart.name,
            input_kind=input_kind,
            event_name=event_name,
            disposition="refused" if halted else "applied",
            duration_s=perf_counter() - started,
            effects=len(effects),
            effect_counts=telemetry.effect_counts(e.kind for e in effects if not e.kind.is_trace),
            status=_status(session),
        )
        if halted:
            telemetry.emit(
                TelemetryEvent.EXECUTION_HALTED,
                MEMORY,
                session.session_id,
                chart=session.chart.name,
                budget=session.halted,
            )
        if session.done and not was_done:
            telemetry.emit(
                TelemetryEvent.EXECUTION_FINISHED,
                MEMORY,
                session.session_id,
                chart=session.chart.name,
                status=_status(session),
                outcome=session.outcome,
            )

    def _apply(self, session: MemorySession, step: Step) -> None:
        session.state = step.state
        on_effect, on_instruction = self.on_effect, self.on_instruction
        perform = None
        # Observed effects (datamodel changes, traces: the commonest) are performed as
        # nothing; unless someone watches the instructions, they are not planned one by one.
        skip = OBSERVED if on_instruction is None else ()
        record = session.effects.append
        for effect in step.effects:
            record(effect)
            if on_effect is not None:
                on_effect(session, effect)
            if effect.kind in skip:
                continue
            if perform is None:
                perform = self._performers
            instruction = plan_one(effect)
            if on_instruction is not None:
                on_instruction(session, instruction)
            perform[instruction.kind](session, instruction)
            if telemetry.listeners and instruction.kind not in _NOT_PERFORMED:
                telemetry.emit(
                    TelemetryEvent.EFFECT_PERFORMED,
                    MEMORY,
                    session.session_id,
                    effect=str(effect.kind),
                    instruction=instruction.kind.value,
                )

    # -- performing instructions (how this driver does what the planner decided) -----------

    @property
    def _performers(self) -> dict[InstructionKind, Callable[[MemorySession, Instruction], None]]:
        performers = self.__dict__.get("_performer_table")
        if performers is None:
            k = InstructionKind
            performers = self.__dict__["_performer_table"] = {
                k.OBSERVE: _nothing,
                k.DELIVER_SELF: self._deliver_self,
                k.DELIVER_INTERNAL: self._deliver_internal,
                k.DELIVER_SESSION: self._deliver_session,
                k.DELIVER_PARENT: self._deliver_parent,
                k.DELIVER_CHILD: self._deliver_child,
                k.DELIVER_ROUTE: self._deliver_route,
                k.SCHEDULE: self._schedule,
                k.SCHEDULE_ROUTE: self._schedule,
                k.CANCEL_TIMERS: self._cancel_timers,
                k.START_INVOCATION: self._start_invocation,
                k.CANCEL_INVOCATION: self._cancel_invocation,
                k.AUTOFORWARD: self._autoforward,
                k.FINISH: self._finish,
                k.HALT: self._halt,
                k.LOG: self._log,
                k.UNROUTABLE: self._unroutable,
            }
        return performers

    def _deliver_self(self, session: MemorySession, instruction: Instruction) -> None:
        assert instruction.event is not None
        self._enqueue(session, instruction.event)

    def _deliver_internal(self, session: MemorySession, instruction: Instruction) -> None:
        assert instruction.event is not None
        if session.running:
            assert session.state is not None
            state, event = session.state, instruction.event
            self._step(
                session,
                INTERNAL,
                event.name,
                lambda: session.interpreter.deliver_internal(state, event),
            )

    def _deliver_parent(self, session: MemorySession, instruction: Instruction) -> None:
        assert instruction.event is not None
        if session.parent is not None and not session.cancelled_by_parent:
            self._enqueue(session.parent, instruction.event)

    def _deliver_child(self, session: MemorySession, instruction: Instruction) -> None:
        assert instruction.event is not None and instruction.target is not None
        invokeid = instruction.target.invokeid
        child = session.children.get(invokeid or "")
        if child is not None and child.running:
            self._enqueue(child, instruction.event)
        else:
            self._communication_error(session, f"invocation {invokeid!r} is gone")

    def _deliver_session(self, session: MemorySession, instruction: Instruction) -> None:
        assert instruction.event is not None and instruction.target is not None
        session_id = instruction.target.session_id
        other = self.sessions.get(session_id or "")
        if other is not None and other.running:
            self._enqueue(other, instruction.event)
        else:
            self._communication_error(session, f"session {session_id!r} is gone")

    def _check_route(self, route: str, send_type: str, target: str | None) -> RouteAnswer:
        known = self.routes.get(route)
        return known.check(send_type, target) if known is not None else ROUTE_OK

    def _deliver_route(self, session: MemorySession, instruction: Instruction) -> None:
        assert instruction.target is not None and instruction.event is not None
        route = self.routes.get(instruction.target.route or "")
        if route is None:
            self._communication_error(session, f"no route {instruction.target.route!r} here")
            return
        key = f"{session.session_id}:{instruction.data.get('send_ordinal', 0)}"
        try:
            route.deliver(session, instruction, key)
        except Exception as exc:  # the delivery failed: the sender is told (spec 6.2)
            self._communication_error(session, f"{type(exc).__name__}: {exc}")

    def _unroutable(self, session: MemorySession, instruction: Instruction) -> None:
        reason = instruction.reason or f"this driver has no {instruction.kind.value}"
        if telemetry.listeners:
            effect = instruction.effect
            telemetry.emit(
                TelemetryEvent.EFFECT_UNROUTABLE,
                MEMORY,
                session.session_id,
                effect=str(effect.kind) if effect is not None else None,
                reason=reason,
            )
        self._communication_error(session, reason)

    def _schedule(self, session: MemorySession, instruction: Instruction) -> None:
        assert instruction.effect is not None and instruction.target is not None
        timer = _Timer(
            self.now_ms + instruction.data["delay_ms"],
            next(self._seq),
            session.session_id,
            instruction.effect,
            # The delivery it becomes, keeping the send's effect (its ordinal, its payload).
            replace(delivery(instruction.target, instruction.event), effect=instruction.effect),
        )
        heapq.heappush(self._timers, timer)

    def _cancel_timers(self, session: MemorySession, instruction: Instruction) -> None:
        send_id = instruction.data["send_id"]
        for timer in self._timers:
            if timer.session_id == session.session_id and timer.effect.data["send_id"] == send_id:
                timer.cancelled = True

    def _log(self, session: MemorySession, instruction: Instruction) -> None:
        data = instruction.data
        session.logs.append((data["label"], data["value"]))

    def _start_invocation(self, session: MemorySession, instruction: Instruction) -> None:
        self._invoke(session, instruction.data)

    def _cancel_invocation(self, session: MemorySession, instruction: Instruction) -> None:
        child = session.children.pop(instruction.data["invokeid"], None)
        if child is not None and child.running:
            child.cancelled_by_parent = True
            assert child.state is not None
            state = child.state
            self._step(child, CANCEL, None, lambda: child.interpreter.cancel(state))

    def _autoforward(self, session: MemorySession, instruction: Instruction) -> None:
        data = instruction.data
        child = session.children.get(data["invokeid"])
        if child is not None and child.running:
            self._enqueue(child, Event.from_dict(data["event"]))
        elif telemetry.listeners:  # not forwarded, and no error (SCXML 6.4 defines none)
            telemetry.emit(
                TelemetryEvent.AUTOFORWARD_DROPPED,
                MEMORY,
                session.session_id,
                invokeid=data["invokeid"],
                event_name=data["event"].get("name"),
                reason="the child is not running" if child is not None else "no such child",
            )

    def _finish(self, session: MemorySession, instruction: Instruction) -> None:
        data = instruction.data
        for timer in self._timers:  # a finished session's delayed sends never fire
            if timer.session_id == session.session_id:
                timer.cancelled = True
        session.done = True
        session.donedata = data["donedata"]
        session.donedata_error = data.get("error") if data.get("donedata_error") else None
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

    def _halt(self, session: MemorySession, instruction: Instruction) -> None:
        session.outcome = "budget_exhausted"
        session.halted = dict(instruction.data)

    def _communication_error(self, session: MemorySession, message: str) -> None:
        if session.running:
            assert session.state is not None
            event = Event("error.communication", PLATFORM, {"message": message})
            state = session.state
            self._step(
                session,
                INTERNAL,
                event.name,
                lambda: session.interpreter.deliver_internal(state, event),
            )

    def _fire(self, timer: _Timer) -> None:
        session = self.sessions.get(timer.session_id)
        if session is None or not session.running:
            return  # the sender is gone: a delayed event is discarded (spec 6.2)
        self._performers[timer.delivery.kind](session, timer.delivery)

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
                state = parent.state
                self._step(
                    parent,
                    INTERNAL,
                    event.name,
                    lambda: parent.interpreter.deliver_internal(state, event),
                )
            return
        child_id = f"{parent.session_id}.{data['invokeid']}"
        while child_id in self.sessions:  # the same invoke id, invoked again
            child_id = f"{parent.session_id}.{data['invokeid']}.{next(self._seq)}"
        child = self._new_session(chart, child_id)
        child.parent = parent
        child.invokeid = data["invokeid"]
        parent.children[data["invokeid"]] = child
        overrides = data["data"] if isinstance(data["data"], dict) else None
        if telemetry.listeners:
            telemetry.emit(STARTED, MEMORY, child.session_id, chart=chart.name)
        self._step(
            child,
            START,
            None,
            lambda: child.interpreter.initialize(
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
                source,
                base_path=base_path,
                resolver=self.resolver,
                default_datamodel=self.datamodel,
            )
        return chart


def _nothing(_session: MemorySession, _instruction: Instruction) -> None:
    return None
