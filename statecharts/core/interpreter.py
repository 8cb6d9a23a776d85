"""The SCXML interpreter: W3C SCXML 1.0 Appendix D, function by function.

Functions keep the spec's names (``enterStates``, ``computeExitSet``, ...) so the code can be
held against the spec. The interpreter is a fold: each entry point takes a :class:`State`
and returns a :class:`Step` (the new state and the effects, as data). It owns no clock,
thread, randomness or I/O. For speed it keeps the datamodel engine of the last state it
produced alive; given any other state it rebuilds the engine from that state's snapshot,
so results never depend on which states were seen before. The answers that depend on the
chart alone (which transitions match an event name, a transition's domain or entry set, ...)
are kept by its accelerator (``statecharts.core.accelerator``), which it consults through
one small call or dict lookup where a spec function needs an answer; the step budgets
(``statecharts.core.budget``) are its own, and always on.

The class is laid out as the spec: the entry points (``initialize`` is the spec's
``interpret``), the working state, the main loop (``mainEventLoop``, split where it waits
for an external event: ``_one_round`` is one pass of its inner loop, ``_finish_macrostep``
the rest), then Appendix D's functions in the spec's order, from ``exitInterpreter`` to
``getChildStates``. What is not the spec's is in small named functions beside them: the
budgets (``_check_time``, ``_tick``, ``_append``), tracing (behind ``if self.tracing``, one
attribute read when off), the configuration's bookkeeping (``_configuration_add`` and
``_configuration_remove``: the sorted atomic states, the datamodel told), the snapshot
(``_snapshot_step``, ``_new_state``). The executable content, ``<send>`` and ``<invoke>``
(spec 4 and 6, not Appendix D) are in ``statecharts.core.content``, the class's base.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, cast

from statecharts.core import effects as fx
from statecharts.core.accelerator import accelerator_for
from statecharts.core.budget import DEFAULT_ROUND_BUDGET, BudgetExceeded, StepBudgets
from statecharts.core.content import ExecutableContent, json_bytes
from statecharts.core.datamodel import Datamodel, Limits, create_datamodel, tagged
from statecharts.core.effects import Effect
from statecharts.core.errors import DatamodelError, NotRunningError, SnapshotLimitError
from statecharts.core.events import (
    INTERNAL,
    PLATFORM,
    SCXML_PROCESSOR,
    SCXML_PROCESSOR_SHORT,
    Event,
    descriptor_matches,
)
from statecharts.core.host import (
    DEFAULT_HOST,
    SCXML_INVOKE_TYPES,
    SCXML_SEND_TYPES,
    Host,
)
from statecharts.core.model import (
    Action,
    Assign,
    Block,
    Cancel,
    Chart,
    Data,
    DoneData,
    Foreach,
    If,
    Invoke,
    Kind,
    Log,
    Raise,
    Script,
    Send,
    StateNode,
    Transition,
)
from statecharts.core.state import (
    Invocation,
    State,
    new_counters,
    new_state,
    positional_constructor,
)

# Units of the interpreter's own work (about one set operation each) between two reads of
# the step's clock in loops that run no chart code (see Interpreter._tick): a read every few
# milliseconds at most, and none at all in a small chart's step.
_WORK_PER_CHECK = 10_000
SCXML_TYPES = SCXML_SEND_TYPES
INVOKE_SCXML_TYPES = SCXML_INVOKE_TYPES


@dataclass(frozen=True, slots=True)
class Step:
    """What one entry point produced: the new state and the effects, in spec order."""

    state: State
    effects: tuple[Effect, ...]
    # The bytes (UTF-8 JSON) the effects carried, with ``Host.output_bytes_spent`` (what the
    # step's earlier calls carried) included: the ``output_bytes`` budget's running total.
    output_bytes: int = 0
    # ``handle_event`` only: no transition was selected for the external event (spec
    # mainEventLoop: it was still consumed, bound to ``_event``, finalized and autoforwarded).
    unhandled: bool = False


_new_step = positional_constructor(Step)
_new_effect = positional_constructor(Effect)

# The effects that carry values out of the step (the ``output_bytes`` budget): all but the
# trace effects and the datamodel's (whose values the position holds, bounded by its own
# budget), and the budget's own.
_CARRYING = frozenset(
    kind
    for kind in fx.EffectKind
    if not kind.is_trace
    and kind not in (fx.DATAMODEL_CHANGE, fx.DATAMODEL_INIT, fx.BUDGET_EXHAUSTED)
)


# What an error event can point at: the failing element, with its line and column.
_Where = Action | Transition | Data | Invoke | DoneData
_ACTION_TAGS: dict[type[Action], str] = {
    Raise: "raise", Log: "log", Assign: "assign", Script: "script", If: "if",
    Foreach: "foreach", Send: "send", Cancel: "cancel",
}


def ioprocessors(session_id: str, extra: dict[str, str] | None = None) -> dict[str, Any]:
    """``_ioprocessors``: the SCXML processor, plus what the host added (type -> location)."""
    location = {"location": f"#_scxml_{session_id}"}
    processors: dict[str, Any] = {SCXML_PROCESSOR_SHORT: location, SCXML_PROCESSOR: location}
    for kind, where in (extra or {}).items():
        processors.setdefault(kind, {"location": where})
    return processors


def _code_mentions(chart: Chart, name: str) -> bool:
    """Whether some code of ``chart`` (not of the null datamodel) contains ``name``."""
    return chart.datamodel != "null" and any(name in e.source for e in chart.expressions)


class Interpreter(ExecutableContent):
    """Steps one chart. Create one per session you drive; share the Chart between them."""

    def __init__(
        self,
        chart: Chart,
        *,
        tracing: bool = False,
        round_budget: int = DEFAULT_ROUND_BUDGET,
        limits: Limits | None = None,
        host: Host | None = None,
        is_reachable: Callable[[str], bool] | None = None,
        budgets: StepBudgets | None = None,
        accelerated: bool | None = None,
    ) -> None:
        self.chart = chart
        self.states = chart.states
        self.tracing = tracing
        self._set_budgets(budgets or StepBudgets(rounds=round_budget), limits)
        # What the host tells the core (statecharts.core.host): its registered types and the
        # answer to "can session X be reached?". The default for every entry point; a host
        # that steps several sessions passes its own per call (``host=``).
        if host is None:
            host = DEFAULT_HOST if is_reachable is None else Host(is_reachable=is_reachable)
        self.host = host
        self._host = host  # the one in force for the entry point running now
        self._live: State | None = None
        self._dm: Datamodel | None = None
        self._starting = False  # in a start, until its snapshot (datamodel_init)
        self._consult_accelerator(accelerated)
        self._learn_chart(chart)
        # Executable content, by element (spec 4.2-4.6, 5.9, 6.2-6.3): see _run_action.
        self._performers: dict[type[Action], Callable[[Any, Block], None]] = {
            Raise: self._raise, Assign: self._assign, Log: self._log, If: self._if,
            Send: self.send, Cancel: self._cancel, Script: self._script,
            Foreach: self._foreach,
        }
        self._bound_cache: tuple[int, ...] = ()  # sorted self.bound (it only ever grows)
        self._atomics: list[int] | None = None  # atomic active states, doc order; None = stale
        self._config_tuple: tuple[int, ...] | None = None  # sorted configuration, or None

    def _set_budgets(self, budgets: StepBudgets, limits: Limits | None) -> None:
        """What one step may use (statecharts.core.budget; ``round_budget`` is the older way
        to give the rounds budget alone), and the datamodel's limits."""
        self.budgets = budgets
        self.round_budget = budgets.rounds
        self._timed = budgets.time_ms is not None  # whether steps read the host's clock
        self._effects_budget = budgets.effects
        self._rounds_budget = budgets.rounds
        self.limits = limits
        # The datamodel's own per-evaluation limit, and whether this step lowered it.
        self._eval_limit_ms = (limits or Limits()).time_ms
        self._eval_capped = False

    def _consult_accelerator(self, accelerated: bool | None) -> None:
        """What is worked out once and kept (statecharts.core.accelerator); ``accelerated``
        False, or None with STATECHARTS_ACCELERATOR=off: everything computed when needed.
        Its tables are read directly where a hit is one dict lookup."""
        self.accelerator = accelerator_for(self.chart.states, accelerated)
        self._eventless = self.accelerator.eventless(self._eventless_of)
        self._domains = self.accelerator.domains
        self._entry_sets = self.accelerator.entry_sets
        self._matching = self.accelerator.tables
        self._selections = self.accelerator.selections

    def _learn_chart(self, chart: Chart) -> None:
        """Facts of the chart the steps read: what kind each state is, and what the chart
        never does (a chart without eventless transitions, invokes or history states skips
        those per-macrostep scans; a datamodel is told the system variables its code never
        names are unused)."""
        self._is_atomic = [node.is_atomic for node in chart.states]
        self._is_final = [node.kind == Kind.FINAL for node in chart.states]
        self._any_eventless = any(t.eventless for node in chart.states for t in node.transitions)
        self._any_invokes = any(node.invokes for node in chart.states)
        self._any_history = any(node.history for node in chart.states)
        # _event, and the configuration In() reads, are only pushed into the datamodel when
        # some code of the chart mentions them (docs/embedding.md, "The ECMAScript sandbox");
        # _x (the host's chart facts, which it may read rows for): only for code that names it.
        self._uses_event = _code_mentions(chart, "_event")
        self._uses_in = _code_mentions(chart, "In")
        self._uses_x = _code_mentions(chart, "_x")

    # ==== entry points =========================================================================

    def initialize(
        self,
        session_id: str,
        *,
        data: dict[str, Any] | None = None,
        parent_session_id: str | None = None,
        invokeid: str | None = None,
        io_processors: dict[str, str] | None = None,
        host: Host | None = None,
    ) -> Step:
        """Start the chart: datamodel, global script, initial entry, first macrostep.

        ``data`` overrides top-level ``<data>`` values by id (spec: invoke params/namelist).
        ``io_processors`` adds host Event I/O processors to ``_ioprocessors`` (type ->
        location); the state keeps them, so later steps see the same.
        """
        self._host = host or self.host
        try:
            return self._initialize(session_id, data, parent_session_id, invokeid, io_processors)
        except BudgetExceeded as exc:
            return self._rolled_back(None, exc)

    def _initialize(
        self,
        session_id: str,
        data: dict[str, Any] | None,
        parent_session_id: str | None,
        invokeid: str | None,
        io_processors: dict[str, str] | None,
    ) -> Step:
        self._begin_fresh(session_id, parent_session_id, invokeid, io_processors or None)
        chart = self.chart
        self.n_send = self.n_invoke = self.n_ordinal = self.n_microstep = self.n_round = 0
        self.n_invocation = 0
        self.n_macrostep = 1
        if chart.binding == "early":
            for node in self.states:
                self._initialize_data(node, bind=True, overrides=data if node.index == 0 else None)
            self.bound = set(range(len(self.states)))
        else:
            for node in self.states:
                self._initialize_data(
                    node, bind=node.index == 0, overrides=data if node.index == 0 else None
                )
            self.bound = {0}
        self._starting = True  # (the start's snapshot is also its datamodel_init)
        self.running = True
        if chart.script is not None:
            self.executeContent(chart.script)
        root = self.states[0]
        if root.initial is not None:
            self.enterStates([root.initial])
        return self._finish_macrostep()

    def handle_event(self, state: State, event: Event, *, host: Host | None = None) -> Step:
        """Process one external event to quiescence (one macrostep)."""
        if not state.running:
            raise NotRunningError(f"session {state.session_id} is no longer running")
        self._host = host or self.host
        try:  # (one frame: this is the hot path of every driver)
            self._begin(state)
            if self.tracing:
                self._emit(fx.TRACE_EVENT, event=event.to_dict())
            if self._uses_event:
                self._set_event(event)
            if self.invocations:
                self._finalize_and_autoforward(event)
            if self._clock is not None:
                self._check_time()  # before the event's guards run
            enabled = self.selectTransitions(event)
            if enabled:
                self.microstep(enabled)
                return self._finish_macrostep()
            # (only an event no transition selected pays for saying so)
            step = self._finish_macrostep()
            return _new_step(step.state, step.effects, step.output_bytes, True)
        except BudgetExceeded as exc:
            return self._rolled_back(state, exc)

    def _finalize_and_autoforward(self, event: Event) -> None:
        """The invocations' part of an external event (spec mainEventLoop): ``<finalize>`` of
        the invocation it came from, and a copy to each invocation that autoforwards."""
        for invocation in list(self.invocations):
            if invocation.state not in self.configuration:
                continue
            inv = self.chart.invokes[invocation.invoke]
            if invocation.invokeid == event.invokeid:
                self.applyFinalize(inv, event)
            if invocation.autoforward:
                self._emit(
                    fx.AUTOFORWARD,
                    invokeid=invocation.invokeid,
                    invoke_ordinal=invocation.ordinal,
                    event=event.to_dict(),
                )

    def deliver_internal(self, state: State, event: Event, *, host: Host | None = None) -> Step:
        """Put ``event`` on the internal queue and run a macrostep (delayed ``#_internal``)."""
        if not state.running:
            raise NotRunningError(f"session {state.session_id} is no longer running")
        self._host = host or self.host
        try:
            self._begin(state)
            self.internal_queue.append(event)
            return self._finish_macrostep()
        except BudgetExceeded as exc:
            return self._rolled_back(state, exc)

    def cancel(
        self, state: State, *, reason: str = "cancelled", host: Host | None = None
    ) -> Step:
        """Stop the chart from outside: onexit runs for every active state, then ``done``."""
        if not state.running:
            raise NotRunningError(f"session {state.session_id} is no longer running")
        self._host = host or self.host
        try:
            self._begin(state)
            self.running = False
            self.outcome = reason
            return self._finish_macrostep()
        except BudgetExceeded as exc:
            return self._rolled_back(state, exc)

    def macrostep(
        self, state: State, event: Event | None = None, *, host: Host | None = None
    ) -> Step:
        """Fold to quiescence: with an event, ``handle_event``; else drain the internal queue."""
        if event is not None:
            return self.handle_event(state, event, host=host)
        if not state.running:
            raise NotRunningError(f"session {state.session_id} is no longer running")
        self._host = host or self.host
        try:
            self._begin(state)
            return self._finish_macrostep()
        except BudgetExceeded as exc:
            return self._rolled_back(state, exc)

    def microstep_once(self, state: State, *, host: Host | None = None) -> tuple[Step, bool]:
        """One round (for a step debugger): an eventless microstep, or one internal event.

        Returns the step and whether anything happened. Does not run invocations or the
        end-of-macrostep work; call :meth:`macrostep` to finish.
        """
        if not state.running:
            raise NotRunningError(f"session {state.session_id} is no longer running")
        self._host = host or self.host
        try:
            self._begin(state)
            progressed = self._one_round()
            return self._snapshot_step(), progressed
        except BudgetExceeded as exc:
            return self._rolled_back(state, exc), False

    # ==== working state ========================================================================

    def _begin_fresh(
        self,
        session_id: str,
        parent: str | None,
        invokeid: str | None,
        io_processors: dict[str, str] | None,
    ) -> None:
        self._discard_live()
        self.session_id = session_id
        self.name = self.chart.name
        self.parent_session_id = parent
        self.invokeid = invokeid
        self.io_processors = dict(io_processors) if io_processors else None
        self.configuration: set[int] = set()
        self._atomics = None
        self._config_tuple = None
        self.statesToInvoke: set[int] = set()
        self.internal_queue: list[Event] = []
        self.historyValue: dict[int, tuple[int, ...]] = {}
        self._history_shared = False  # historyValue is also the last returned state's history
        self.invocations: list[Invocation] = []
        self.running = False
        self.outcome: str | None = None
        self.effects: list[Effect] = []
        self.rounds_this_macrostep = 0
        self._start_budgets()
        self._previous_snapshot = "{}"
        self.dm = self._new_datamodel()

    def _begin(self, state: State) -> None:
        """Take up ``state`` for a step: the live engine when ``state`` is the one it last
        produced, else the state restored into a fresh one (_restore)."""
        self._starting = False
        if state is self._live and self._dm is not None:
            # The working fields still hold exactly what produced this state (nothing touches
            # them after _snapshot_step), so only the per-macrostep fields are reset.
            self._live = None
            self.dm = self._dm
            self._dm = None
            # (no configuration_changed(): the datamodel's flag is still accurate)
            if self._any_invokes:  # (else it is never filled: see enterStates)
                self.statesToInvoke = set()
            self.n_macrostep += 1
            self.effects = []
            self.rounds_this_macrostep = 0
            if self._timed or self._eval_capped:
                self._start_budgets()
            else:  # (no time budget: the clock stays None, nothing else to reset)
                self._foreach_iterations = self._log_bytes = 0
                self._output_bytes = self._host.output_bytes_spent
        else:
            self._restore(state)
        self._previous_snapshot = state.datamodel_json

    def _restore(self, state: State) -> None:
        """The working fields from ``state``, its datamodel restored into a new engine."""
        self.session_id = state.session_id
        self.name = state.name
        self.parent_session_id = state.parent_session_id
        self.invokeid = state.invokeid
        self.io_processors = state.io_processors
        self.configuration = set(state.configuration)
        self._atomics = None
        self._config_tuple = None
        self._discard_live()  # (until this step finishes, no state is "live")
        dm = self._new_datamodel(name=state.name)
        dm.restore(state.datamodel_json)
        self.dm = dm
        dm.configuration_changed()
        self.statesToInvoke = set()
        self.internal_queue = [Event.from_dict(e) for e in state.internal_queue]
        self.historyValue = dict(state.history)
        self._history_shared = False
        self.invocations = list(state.invocations)
        self.running = state.running
        self.outcome = state.outcome
        self.bound = set(state.bound)
        c = state.counters
        self.n_send, self.n_invoke, self.n_ordinal = c.send, c.invoke, c.ordinal
        self.n_macrostep, self.n_microstep, self.n_round = c.macrostep + 1, c.microstep, c.round
        self.n_invocation = c.invocation
        self.effects = []
        self.rounds_this_macrostep = 0
        self._start_budgets()

    def _new_datamodel(self, name: str | None = None) -> Datamodel:
        dm = create_datamodel(self.chart.engine or self.chart.datamodel, self.limits)
        chart_row = self._host.chart if self._uses_x else None
        dm.bind_system(
            self.session_id,
            name if name is not None else self.chart.name,
            ioprocessors(self.session_id, self.io_processors),
            self._in_state,
            self._active_ids,
            None if chart_row is None else {"chart": dict(chart_row())},
        )
        if not self._uses_in:
            dm.configuration_unused()
        dm.use_scalar_programs(self.accelerator.scalar_programs)
        if self._timed:
            # The step's clock is read before every evaluation of chart code (each one capped
            # at what is left of the step): a step of many evaluations stops at the first
            # one after the deadline, whatever it is (a <data>, a <script>, a guard ...).
            dm.set_evaluation_guard(self._check_time)
        return dm

    def _start_budgets(self) -> None:
        self._foreach_iterations = 0
        self._log_bytes = 0
        self._work = 0
        self._output_bytes = self._host.output_bytes_spent
        self._work_check = _WORK_PER_CHECK
        host = self._host
        clock, time_ms = host.clock, self.budgets.time_ms
        self._clock = clock if time_ms is not None else None
        if self._clock is None:
            self._started = 0.0
        else:
            self._started = host.started if host.started is not None else self._clock()
        self._deadline = self._started + (time_ms or 0) / 1000
        if self._eval_capped:
            self._eval_capped = False
            working = getattr(self, "dm", None)
            if working is not None:
                working.set_evaluation_time_limit(None)

    def _check_time(self) -> None:
        clock = self._clock
        if clock is not None:
            now = clock()
            if now > self._deadline:
                used = int((now - self._started) * 1000)
                raise BudgetExceeded("time_ms", self.budgets.time_ms or 0, used)
            # One evaluation may not outlast the step: near the deadline, the datamodel's
            # per-evaluation limit is lowered to what is left (an evaluation cut short is
            # error.execution; the next check then finds the budget spent).
            left_ms = (self._deadline - now) * 1000
            if left_ms < self._eval_limit_ms:
                self._eval_capped = True
                self.dm.set_evaluation_time_limit(max(left_ms, 1.0))

    def _tick(self, work: int) -> None:
        """Count ``work`` units (about a set operation each) of the interpreter's own loops;
        read the step's clock every ``_WORK_PER_CHECK`` of them. Called only when timed: a
        microstep over thousands of states (a wide ``<parallel>``) is bounded by the time
        budget even when it evaluates no chart code."""
        self._work += work
        if self._work >= self._work_check:
            self._work_check = self._work + _WORK_PER_CHECK
            self._check_time()

    def _rolled_back(self, state: State | None, exc: BudgetExceeded) -> Step:
        """The step went over a budget: nothing of it is kept. The state given comes back
        unchanged (still running, cancellable), with one ``budget_exhausted`` effect."""
        working = getattr(self, "dm", None)
        if working is not None and working is not self._dm:
            working.close()
        self._discard_live()
        effect = _new_effect(
            fx.BUDGET_EXHAUSTED, exc.as_data(), self.n_macrostep, self.n_microstep, self.n_round
        )
        if state is None:  # a start that ran away: there is no earlier state to keep
            state = new_state(
                self.session_id, self.name, (), (), {}, "{}", (), False, (),
                new_counters(0, 0, 0, 0, 0, 0, 0), self.parent_session_id, self.invokeid,
                "budget_exhausted", self.io_processors,
            )
        step: Step = _new_step(state, (effect,), self._host.output_bytes_spent, False)
        return step

    def _discard_live(self) -> None:
        if self._dm is not None:
            self._dm.close()
        self._dm = None
        self._live = None

    def _configuration_tuple(self) -> tuple[int, ...]:
        config = self._config_tuple
        if config is None:
            config = self._config_tuple = tuple(sorted(self.configuration))
        return config

    def _active_ids(self) -> list[str]:
        """Ids of the active states in document order. The same list object comes back for
        the same configuration (datamodels may cache on it): callers must not change it."""
        return self.accelerator.ids(self._configuration_tuple())

    def _in_state(self, state_id: str) -> bool:
        index = self.chart.ids.get(state_id)
        return index is not None and index in self.configuration

    def _emit(self, kind: str, **data: Any) -> None:
        self._append(kind, data, json_bytes(data) if kind in _CARRYING else 0)

    def _append(self, kind: str, data: dict[str, Any], size: int) -> None:
        """Emit one effect carrying ``size`` bytes, within the step's ``effects`` and
        ``output_bytes`` budgets (counted as each effect is emitted: a step over them stops
        before the next effect's values are built)."""
        effects = self.effects
        if len(effects) >= self._effects_budget:
            raise BudgetExceeded("effects", self._effects_budget, len(effects) + 1)
        if size:
            self._output_bytes += size
            if self._output_bytes > self.budgets.output_bytes:
                raise BudgetExceeded(
                    "output_bytes", self.budgets.output_bytes, self._output_bytes
                )
        effects.append(_new_effect(kind, data, self.n_macrostep, self.n_microstep, self.n_round))

    def _ids(self, indexes: Iterable[int]) -> list[str]:
        return [self.states[i].id for i in indexes]

    def _set_event(self, event: Event) -> None:
        if not self._uses_event:
            return
        self.dm.set_event(
            {
                "name": event.name,
                "type": event.type,
                "sendid": event.sendid,
                "origin": event.origin,
                "origintype": event.origintype,
                "invokeid": event.invokeid,
                "data": tagged(event.data),
                "raw": event.raw,
            }
        )

    def _raise_error(
        self,
        name: str,
        message: str,
        sendid: str | None = None,
        where: _Where | None = None,
        reason: str | None = None,
    ) -> None:
        """Raise the platform's ``error.execution`` / ``error.communication``. Its data: the
        ``message``, and where it happened (``tagname``, ``line``, ``column`` of the failing
        element, ``reason``: what went wrong, without the where). The ``error``
        effect records the same in the history."""
        data: dict[str, Any] = {"message": message}
        if where is not None:
            tagname, line, column = self._site(where)
            data.update(
                tagname=tagname, line=line, column=column,
                reason=message if reason is None else reason,
            )
        event = Event(name, PLATFORM, data, sendid=sendid)
        self.internal_queue.append(event)
        self._emit(fx.ERROR, name=name, sendid=sendid, **data)
        if self.tracing:
            self._emit(fx.TRACE_RAISED, event=event.to_dict())

    def _site(self, where: _Where) -> tuple[str, int, int]:
        """The tag name, line and column of the element ``where`` stands for."""
        if isinstance(where, Action):
            columns = self.chart.content_columns
            index = where.content_index
            column = columns[index] if 0 <= index < len(columns) else 0
            return _ACTION_TAGS.get(type(where), "?"), where.line, column
        if isinstance(where, Transition):
            return "transition", where.line, where.column
        if isinstance(where, Data):
            return "data", where.line, where.column
        if isinstance(where, Invoke):
            return "invoke", where.line, where.column
        return "donedata", where.line, where.column

    # ==== the main loop (spec: mainEventLoop), split at the external-queue wait ================

    def _one_round(self) -> bool:
        """One iteration of the inner macrostep loop: the eventless transitions, else those
        of the next internal event. Returns False when the macrostep is done.

        The step's time budget is checked before the round's guards run (the eventless ones,
        else those of the internal event dequeued); a round that runs no guard (nothing
        eventless in the chart, an empty queue) only ends the loop, and reads no clock. The
        rounds budget is counted here, always."""
        any_eventless = self._any_eventless
        if not any_eventless and not self.internal_queue:
            return False
        if self._clock is not None:
            self._check_time()  # before this round's guards run
        enabled = self.selectEventlessTransitions() if any_eventless else None
        if not enabled:
            if not self.internal_queue:
                return False
            enabled = self.selectTransitions(self._dequeue_internal())
        self.n_round += 1
        self.rounds_this_macrostep += 1
        if self.rounds_this_macrostep > self._rounds_budget:
            raise BudgetExceeded("rounds", self._rounds_budget, self.rounds_this_macrostep)
        if enabled:
            self.microstep(enabled)
        return True

    def _dequeue_internal(self) -> Event:
        """The next internal event, bound to ``_event`` (spec mainEventLoop)."""
        event = self.internal_queue.pop(0)
        if self.tracing:
            self._emit(fx.TRACE_EVENT, event=event.to_dict())
        if self._uses_event:
            self._set_event(event)
        return event

    def _finish_macrostep(self) -> Step:
        """The rest of the spec's mainEventLoop, up to its wait for the next external event:
        rounds until none is left (``macrostepDone``), then the invocations of the states
        entered, again while they raised internal events; then the snapshot of the step."""
        while self.running:
            # (a round with no internal event and nothing eventless in the chart would only
            # return False: it is not called)
            while (
                self.running
                and (self.internal_queue or self._any_eventless)
                and self._one_round()
            ):
                pass
            if not self.running:
                break
            if self._any_invokes:
                self._invoke_entered_states()
            if not self.internal_queue:
                break
        if not self.running:
            self.exitInterpreter()
        return self._snapshot_step()

    def _invoke_entered_states(self) -> None:
        """``<invoke>`` for each state entered in the macrostep, in entry order."""
        for s in sorted(self.statesToInvoke):
            for inv in self.states[s].invokes:
                self.invoke(inv)
        self.statesToInvoke.clear()

    def _snapshot_over_budget(self, exc: SnapshotLimitError) -> BudgetExceeded:
        clock = self._clock
        if clock is not None:
            now = clock()
            if now > self._deadline:  # the step's own deadline cut it
                used = int((now - self._started) * 1000)
                return BudgetExceeded("time_ms", self.budgets.time_ms or 0, used)
        limit = int(exc.limit)
        return BudgetExceeded(
            f"snapshot_{exc.limit_name}", limit, limit + 1, f"the datamodel snapshot: {exc.reason}"
        )

    def _bound_tuple(self) -> tuple[int, ...]:
        if len(self.bound) != len(self._bound_cache):
            self._bound_cache = tuple(sorted(self.bound))
        return self._bound_cache

    def _snapshot_step(self) -> Step:
        """The step's result: the datamodel's snapshot (and the effects that report it), the
        new state; the engine is kept alive for that state while it runs."""
        if self._clock is not None:
            self._check_time()  # (the snapshot's time is the step's: capped at what is left)
        try:
            snapshot = self.dm.snapshot()
        except (SnapshotLimitError, DatamodelError) as exc:
            snapshot = self._snapshot_failed(exc)
        if self._starting or snapshot != self._previous_snapshot:
            self._report_datamodel(snapshot)
        if self.tracing and self.running:
            self._emit(fx.TRACE_STABLE, configuration=self._ids(sorted(self.configuration)))
        state = self._new_state(snapshot)
        if state.running:
            self._live = state
            self._dm = self.dm
        else:
            self.dm.close()
        step: Step = _new_step(state, tuple(self.effects), self._output_bytes, False)
        return step

    def _snapshot_failed(self, exc: DatamodelError) -> str:
        """A datamodel past its limits is a step over budget; one that can no longer be
        captured stops the session, with the last good snapshot (which is returned)."""
        if isinstance(exc, SnapshotLimitError):
            # What the datamodel holds is past its limits (too big, too deep, too slow to
            # write): not chart code's failure but a step over budget. It is rolled back.
            raise self._snapshot_over_budget(exc) from None
        # The datamodel can no longer be captured for a reason that is not one of its limits
        # (a datamodel of another kind, or one already closed): the session cannot be
        # resumed, so it stops here, with the last good datamodel.
        if self.running:
            self.running = False
            self.outcome = "datamodel_error"
            self.internal_queue.clear()
            self._emit(fx.DONE, final=None, donedata=None, donedata_error=False,
                       reason="datamodel_error", error=str(exc))
        return self._previous_snapshot

    def _report_datamodel(self, snapshot: str) -> None:
        """``datamodel_init`` at the start, ``datamodel_change`` when the snapshot changed."""
        if self._starting:
            # The observers' baseline, once per session: the datamodel as the start left it.
            # (Taken with the step's own snapshot: a snapshot in the middle of a step is not
            # free of effects on the values it reads.)
            self._starting = False
            self._emit(fx.DATAMODEL_INIT, datamodel=self.dm.snapshot_value(snapshot))
        if snapshot != self._previous_snapshot:
            # (_emit, inlined: no bytes counted, as for every datamodel effect)
            effects = self.effects
            if len(effects) >= self._effects_budget:
                raise BudgetExceeded("effects", self._effects_budget, len(effects) + 1)
            effects.append(_new_effect(
                fx.DATAMODEL_CHANGE, {"datamodel": self.dm.snapshot_value(snapshot)},
                self.n_macrostep, self.n_microstep, self.n_round,
            ))

    def _new_state(self, snapshot: str) -> State:
        """The state the step leaves (positional, in State's field order: cheaper than
        keywords on this per-step path). Its history is shared until the next change."""
        queue = self.internal_queue
        invocations = self.invocations
        configuration = self._config_tuple
        if configuration is None:
            configuration = self._configuration_tuple()
        bound = self._bound_cache
        if len(bound) != len(self.bound):
            bound = self._bound_tuple()
        self._history_shared = True
        state: State = new_state(
            self.session_id, self.name, configuration,
            tuple([e.to_dict() for e in queue]) if queue else (),
            self.historyValue, snapshot,
            tuple(invocations) if invocations else (),
            self.running, bound,
            new_counters(
                self.n_send, self.n_invoke, self.n_ordinal, self.n_macrostep,
                self.n_microstep, self.n_round, self.n_invocation,
            ),
            self.parent_session_id, self.invokeid, self.outcome, self.io_processors,
        )
        return state

    # ==== spec functions =======================================================================

    def exitInterpreter(self) -> None:
        statesToExit = sorted(self.configuration, reverse=True)
        final_child: StateNode | None = None
        for s in statesToExit:
            node = self.states[s]
            for block in node.onexit:
                self.executeContent(block)
            for inv in node.invokes:
                self.cancelInvoke(inv)
            self.configuration.discard(s)
            self._atomics = None
            self._config_tuple = None
            self.dm.configuration_changed()
            if node.kind == Kind.FINAL and node.parent == 0:
                final_child = node
        if final_child is not None:
            self.outcome = self.outcome or "final"
            self.returnDoneEvent(final_child)
        else:
            self.outcome = self.outcome or "cancelled"
            self._emit(
                fx.DONE, final=None, donedata=None, donedata_error=False, reason=self.outcome
            )
        # A stopped session is quiescent by construction: nothing can dequeue an internal
        # event once the loop has stopped, so what is still queued (sibling done.state.*
        # events, or the error.execution of a failing <donedata>, raised just above) is
        # unreachable, not pending. Cleared last, after returnDoneEvent.
        self.internal_queue.clear()

    def returnDoneEvent(self, final: StateNode) -> None:
        donedata, error = self._donedata(final)
        if error is None:
            self._emit(
                fx.DONE, final=final.id, donedata=donedata, donedata_error=False,
                reason=self.outcome,
            )
        else:  # spec 5.7: the done event then carries no data; the error is kept beside it
            self._emit(
                fx.DONE, final=final.id, donedata=None, donedata_error=True,
                reason=self.outcome, error=error,
            )

    def _atomic_states(self) -> list[int]:
        atomics = self._atomics
        if atomics is None:
            is_atomic = self._is_atomic
            atomics = self._atomics = sorted(s for s in self.configuration if is_atomic[s])
        return atomics

    def selectEventlessTransitions(self) -> list[Transition]:
        if not self._any_eventless:
            return []
        candidatesOf = self._eventless  # (the accelerator's: state -> _eventless_of(state))
        enabled = self._first_enabled([candidatesOf[s] for s in self._atomic_states()])
        return enabled if len(enabled) < 2 else self.removeConflictingTransitions(enabled)

    def _eventless_of(self, state: int) -> tuple[Transition, ...]:
        """The eventless transitions of ``state`` and of its ancestors, in that order."""
        return tuple(t for s in self._self_and_ancestors(state) for t in s.transitions
                     if t.eventless)

    def selectTransitions(self, event: Event) -> list[Transition]:
        # (the accelerator's selection for this name and configuration: the transitions, a
        # Guarded selection's candidates, or None when not kept yet)
        configuration = self._config_tuple
        if configuration is None:
            configuration = self._configuration_tuple()
        key = (event.name, configuration)
        kept = self._selections.get(key)
        if type(kept) is tuple:
            return list(kept)
        candidates = self._candidates(event) if kept is None else kept.candidates
        enabled = self._first_enabled(candidates)
        if len(enabled) > 1:
            enabled = self.removeConflictingTransitions(enabled)
        if kept is None:
            self.accelerator.keep_selection(key, enabled, candidates)
        return enabled

    def _candidates(self, event: Event) -> list[tuple[Transition, ...]]:
        """For each atomic state, in document order: the transitions of it and its ancestors
        whose descriptors match ``event`` (the accelerator's table for the name)."""
        candidatesOf = self._matching.get(event.name)
        if candidatesOf is None:
            candidatesOf = self.accelerator.matching(event, self._matching_of)
        return [candidatesOf[state] for state in self._atomic_states()]

    def _first_enabled(self, candidates: Iterable[tuple[Transition, ...]]) -> list[Transition]:
        """The spec's selection loop: for each atomic state's candidates (in document order),
        the first whose condition holds, unless one of them is already enabled."""
        enabled: list[Transition] = []
        timed = self._clock is not None
        for transitions in candidates:
            if timed:
                self._tick(len(enabled) + 1)
            for t in transitions:
                if t in enabled:  # (already enabled for another atomic state)
                    break
                if self.conditionMatch(t):
                    enabled.append(t)
                    break
        return enabled

    def _matching_of(self, state: int, event: Event) -> tuple[Transition, ...]:
        """The transitions of ``state`` and its ancestors whose descriptors match ``event``."""
        return tuple(t for s in self._self_and_ancestors(state) for t in s.transitions
                     if not t.eventless and self.nameMatch(t, event))

    def _self_and_ancestors(self, state: int) -> list[StateNode]:
        states = self.states
        return [states[state], *(states[s] for s in states[state].ancestors)]

    @staticmethod
    def nameMatch(t: Transition, event: Event) -> bool:
        return any(descriptor_matches(d, event.parts) for d in t.events)

    def conditionMatch(self, t: Transition) -> bool:
        if t.cond is None:
            return True
        try:
            result = self.dm.evaluate_cond(t.cond)
        except DatamodelError as exc:
            self._raise_error("error.execution", str(exc), reason=exc.reason, where=t)
            result = False
        if self.tracing:
            self._emit(
                fx.TRACE_GUARD,
                transition={"index": t.index, "source": self.states[t.source].id},
                cond=t.cond.source,
                result=bool(result),
            )
        return result

    def removeConflictingTransitions(self, enabled: list[Transition]) -> list[Transition]:
        if len(enabled) < 2:
            return enabled
        filtered: list[Transition] = []
        exit_sets: dict[int, set[int]] = {}

        def exit_set(t: Transition) -> set[int]:
            key = id(t)
            found = exit_sets.get(key)
            if found is None:
                found = exit_sets[key] = self.computeExitSet([t])
            return found

        timed = self._clock is not None
        for t1 in enabled:
            if timed:
                self._tick(len(filtered) + 1)
            t1Preempted = False
            transitionsToRemove = []
            for t2 in filtered:
                if not exit_set(t1).isdisjoint(exit_set(t2)):
                    if self.isDescendant(t1.source, t2.source):
                        transitionsToRemove.append(t2)
                    else:
                        t1Preempted = True
                        break
            if not t1Preempted:
                for t3 in transitionsToRemove:
                    filtered.remove(t3)
                filtered.append(t1)
        return filtered

    def microstep(self, enabled: list[Transition]) -> None:
        self.n_microstep += 1
        if self.tracing:
            self._trace_transitions(enabled)
        self.exitStates(enabled)
        self.executeTransitionContent(enabled)
        self.enterStates(enabled)
        if self.tracing:
            self._emit(fx.TRACE_MICROSTEP, configuration=self._ids(sorted(self.configuration)))

    def _trace_transitions(self, enabled: list[Transition]) -> None:
        self._emit(
            fx.TRACE_TRANSITIONS,
            transitions=[
                {
                    "index": t.index,
                    "source": self.states[t.source].id,
                    "event": t.event_text,
                    "targets": self._ids(t.targets),
                }
                for t in enabled
            ],
        )

    def exitStates(self, enabled: list[Transition]) -> None:
        # (statesToExit, and the same in exit order: the accelerator's, kept per configuration)
        statesToExit, ordered, quiet = self.accelerator.exit_set(
            self._configuration_tuple(), enabled, self.computeExitSet
        )
        if self.statesToInvoke:
            self.statesToInvoke -= statesToExit
        if self.tracing:
            self._emit(fx.TRACE_EXIT, states=self._ids(ordered))
        if self._any_history:
            for s in ordered:
                self._remember_history(self.states[s])
        if quiet is not None:  # (the accelerator's: nothing runs on the way out)
            self._change_configuration(statesToExit, quiet, entering=False)
            return
        timed = self._clock is not None
        for s in ordered:
            node = self.states[s]
            if timed:
                self._tick_state()
            for block in node.onexit:
                self.executeContent(block)
            for inv in node.invokes:
                self.cancelInvoke(inv)
            self._configuration_remove(s)

    def _remember_history(self, node: StateNode) -> None:
        """The spec's exitStates, first loop: the history values of ``node``'s history states."""
        if node.history and self._clock is not None:
            self._tick(len(self.configuration) * len(node.history))
        for h in node.history:
            hnode = self.states[h]
            remembered = self._history_states(node, hnode)
            if self._history_shared:  # copy on write: returned states never change
                self.historyValue = dict(self.historyValue)
                self._history_shared = False
            self.historyValue[h] = remembered
            if self.tracing:
                self._emit(fx.TRACE_HISTORY, history=hnode.id, states=self._ids(remembered))

    def _history_states(self, node: StateNode, history: StateNode) -> tuple[int, ...]:
        """What a history state of ``node`` remembers: the active atomic descendants (deep),
        or the active children (shallow), in document order."""
        if history.kind == Kind.HISTORY_DEEP:
            return tuple(sorted(
                s0 for s0 in self.configuration
                if self.states[s0].is_atomic and s0 in node.descendants
            ))
        return tuple(sorted(
            s0 for s0 in self.configuration if self.states[s0].parent == node.index
        ))

    def computeExitSet(self, transitions: list[Transition]) -> set[int]:
        statesToExit: set[int] = set()
        timed = self._clock is not None
        for t in transitions:
            if t.targets:
                domain = self.getTransitionDomain(t)
                if domain is None:
                    continue
                if timed:
                    self._tick(1 + (len(self.configuration) >> 6))
                statesToExit |= self.configuration & self.states[domain].descendants
        return statesToExit

    def executeTransitionContent(self, enabled: list[Transition]) -> None:
        for t in enabled:
            self.executeContent(t.body)

    def enterStates(self, enabled: list[Transition]) -> None:
        # (the accelerator's entry set, computeEntrySet's answer: for a single transition, a
        # hit is read inline)
        entry = self._entry_sets.get(enabled[0].index) if len(enabled) == 1 else None
        if entry is None:
            entry = self.accelerator.entry_set(enabled, self.computeEntrySet)
        statesToEnter, statesForDefaultEntry, defaultHistoryContent, quiet = entry
        if self.tracing:
            self._emit(fx.TRACE_ENTRY, states=self._ids(statesToEnter))
        if quiet is not None:  # (the accelerator's: nothing runs on the way in)
            self._change_configuration(statesToEnter, quiet, entering=True)
            return
        for s in statesToEnter:
            node = self.states[s]
            self._configuration_add(s, node)
            for block in node.onentry:
                self.executeContent(block)
            if s in statesForDefaultEntry:  # (a compound state: it has an initial transition)
                self.executeContent(cast(Transition, node.initial).body)
            if s in defaultHistoryContent:
                self.executeContent(defaultHistoryContent[s])
            if self._is_final[s]:
                self._enteredFinalState(node)

    def _enteredFinalState(self, node: StateNode) -> None:
        """The end of the spec's enterStates for a final state: the chart stops, or its
        parent is done (and its grandparent, a parallel state whose regions all are)."""
        if node.parent == 0:
            self.running = False
            return
        parent = self.states[node.parent]
        self._enqueue_internal(Event("done.state." + parent.id, INTERNAL, self._donedata(node)[0]))
        if parent.parent >= 0:
            grandparent = self.states[parent.parent]
            if self._clock is not None:
                self._tick(len(grandparent.children))
            if grandparent.kind == Kind.PARALLEL and all(
                self.isInFinalState(c) for c in self.getChildStates(grandparent)
            ):
                self._enqueue_internal(Event("done.state." + grandparent.id, INTERNAL))

    def _enqueue_internal(self, event: Event) -> None:
        self.internal_queue.append(event)
        if self.tracing:
            self._emit(fx.TRACE_RAISED, event=event.to_dict())

    def computeEntrySet(
        self, transitions: list[Transition]
    ) -> tuple[list[int], frozenset[int], dict[int, Block], bool]:
        """The spec's computeEntrySet: the states to enter (in entry order), those entered
        by default, the default history content; and whether a history state was met (the
        answer then depends on the history values, not on the transitions alone)."""
        statesToEnter: set[int] = set()
        statesForDefaultEntry: set[int] = set()
        defaultHistoryContent: dict[int, Block] = {}
        self._history_seen = False
        for t in transitions:
            for s in t.targets:
                self.addDescendantStatesToEnter(
                    s, statesToEnter, statesForDefaultEntry, defaultHistoryContent
                )
            ancestor = self.getTransitionDomain(t)
            for s in self.getEffectiveTargetStates(t):
                self.addAncestorStatesToEnter(
                    s, ancestor, statesToEnter, statesForDefaultEntry, defaultHistoryContent
                )
        return (
            sorted(statesToEnter), frozenset(statesForDefaultEntry), defaultHistoryContent,
            self._history_seen,
        )

    def addDescendantStatesToEnter(
        self,
        state: int,
        statesToEnter: set[int],
        statesForDefaultEntry: set[int],
        defaultHistoryContent: dict[int, Block],
    ) -> None:
        sets = (statesToEnter, statesForDefaultEntry, defaultHistoryContent)
        node = self.states[state]
        if node.is_history:
            self._history_seen = True
            remembered = self.historyValue.get(state)
            if remembered:
                self._addTargetsToEnter(remembered, node.parent, *sets)
            elif node.initial is not None:
                defaultHistoryContent[node.parent] = node.initial.body
                self._addTargetsToEnter(node.initial.targets, node.parent, *sets)
        else:
            statesToEnter.add(state)
            if node.kind == Kind.COMPOUND:
                statesForDefaultEntry.add(state)
                assert node.initial is not None
                self._addTargetsToEnter(node.initial.targets, state, *sets)
            elif node.kind == Kind.PARALLEL:
                self._addRegionsToEnter(node, *sets)

    def _addTargetsToEnter(
        self,
        targets: Iterable[int],
        ancestor: int,
        statesToEnter: set[int],
        statesForDefaultEntry: set[int],
        defaultHistoryContent: dict[int, Block],
    ) -> None:
        """The spec's pair of loops over a history value's or an initial transition's
        targets: each one's descendants, then its ancestors up to ``ancestor``."""
        for s in targets:
            self.addDescendantStatesToEnter(
                s, statesToEnter, statesForDefaultEntry, defaultHistoryContent
            )
        for s in targets:
            self.addAncestorStatesToEnter(
                s, ancestor, statesToEnter, statesForDefaultEntry, defaultHistoryContent
            )

    def _addRegionsToEnter(
        self,
        node: StateNode,
        statesToEnter: set[int],
        statesForDefaultEntry: set[int],
        defaultHistoryContent: dict[int, Block],
    ) -> None:
        """The spec's loop over a parallel state's children: each one no state to enter is
        already a descendant of is entered by default."""
        timed = self._clock is not None
        for child in self.getChildStates(node):
            if not self._enters_below(child, statesToEnter, timed):
                self.addDescendantStatesToEnter(
                    child, statesToEnter, statesForDefaultEntry, defaultHistoryContent
                )

    def addAncestorStatesToEnter(
        self,
        state: int,
        ancestor: int | None,
        statesToEnter: set[int],
        statesForDefaultEntry: set[int],
        defaultHistoryContent: dict[int, Block],
    ) -> None:
        for anc in self.getProperAncestors(state, ancestor):
            statesToEnter.add(anc)
            if self.states[anc].kind == Kind.PARALLEL:
                self._addRegionsToEnter(
                    self.states[anc], statesToEnter, statesForDefaultEntry, defaultHistoryContent
                )

    def _enters_below(self, state: int, statesToEnter: set[int], timed: bool) -> bool:
        """Whether some state of ``statesToEnter`` is a descendant of ``state`` (the spec's
        ``statesToEnter.some(s => isDescendant(s, state))``), as one set operation when the
        subtree is small. ``timed``: count the work against the step's clock."""
        below = self.states[state].descendants
        if type(below) is frozenset:
            if timed:
                self._tick(1)
            return not below.isdisjoint(statesToEnter)
        if timed:
            self._tick(len(statesToEnter) + 1)
        return any(s in below for s in statesToEnter)

    def isInFinalState(self, s: int) -> bool:
        node = self.states[s]
        if node.kind == Kind.COMPOUND:
            return any(
                self.states[c].kind == Kind.FINAL and c in self.configuration
                for c in self.getChildStates(node)
            )
        if node.kind == Kind.PARALLEL:
            return all(self.isInFinalState(c) for c in self.getChildStates(node))
        return False

    def getTransitionDomain(self, t: Transition) -> int | None:
        if t.index in self._domains:  # (the accelerator's domains kept: a hit read inline)
            return self._domains[t.index]
        return self.accelerator.domain(t, self._transition_domain)

    def _transition_domain(self, t: Transition) -> int | None:
        tstates = self.getEffectiveTargetStates(t)
        if not tstates:
            return None
        if (
            t.internal
            and self.states[t.source].kind == Kind.COMPOUND
            and all(self.isDescendant(s, t.source) for s in tstates)
        ):
            return t.source
        return self.findLCCA([t.source, *tstates])

    def findLCCA(self, stateList: list[int]) -> int:
        head, tail = stateList[0], stateList[1:]
        for anc in self.getProperAncestors(head, None):
            if self.states[anc].is_compound and all(self.isDescendant(s, anc) for s in tail):
                return anc
        return 0

    def getEffectiveTargetStates(self, t: Transition) -> list[int]:
        targets: list[int] = []
        for s in t.targets:
            node = self.states[s]
            if node.is_history:
                self._history_seen = True
                remembered = self.historyValue.get(s)
                if remembered:
                    extra: Iterable[int] = remembered
                elif node.initial is not None:
                    extra = self.getEffectiveTargetStates(node.initial)
                else:
                    extra = ()
                for e in extra:
                    if e not in targets:
                        targets.append(e)
            elif s not in targets:
                targets.append(s)
        return targets

    def getProperAncestors(self, state1: int, state2: int | None) -> list[int]:
        result = []
        for anc in self.states[state1].ancestors:
            if anc == state2:
                break
            result.append(anc)
        return result

    def isDescendant(self, state1: int, state2: int) -> bool:
        return state1 in self.states[state2].descendants

    def getChildStates(self, node: StateNode) -> list[int]:
        return [c for c in node.children if not self.states[c].is_history]

    # ==== the configuration's bookkeeping (not the spec's: what is kept beside it) =============

    def _configuration_remove(self, s: int) -> None:
        """``configuration.delete(s)``, and what is kept of the configuration with it: the
        sorted atomic states, kept up to date rather than recomputed (they are read only when
        selecting transitions, never in between); the datamodel told (only one that tracks
        the configuration: see configuration_unused)."""
        configuration = self.configuration
        atomics = self._atomics
        if atomics is not None and self._is_atomic[s] and s in configuration:
            atomics.remove(s)
        configuration.discard(s)
        if self._uses_in:
            self.dm.configuration_changed()
        self._config_tuple = None

    def _configuration_add(self, s: int, node: StateNode) -> None:
        """The spec's first lines for each state entered: ``configuration.add(s)``, with the
        same bookkeeping as _configuration_remove; ``statesToInvoke.add(s)`` (a chart without
        invokes has nothing to invoke: it stays empty); late binding, a state's data bound on
        its first entry. Timed: counted against the step's clock first."""
        if self._clock is not None:
            self._tick_state()
        configuration = self.configuration
        atomics = self._atomics
        if atomics is not None and self._is_atomic[s] and s not in configuration:
            insort(atomics, s)
        configuration.add(s)
        self._config_tuple = None
        if self._uses_in:
            self.dm.configuration_changed()
        if self._any_invokes:
            self.statesToInvoke.add(s)
        if s not in self.bound:
            self.bound.add(s)
            self._bind_data(node)

    def _tick_state(self) -> None:
        """Count one state entered or exited against the step's clock (keeping the atomic
        states sorted is a list operation per state)."""
        atomics = self._atomics
        self._tick(1 + (len(atomics) >> 6 if atomics else 0))

    def _change_configuration(
        self, changed: Iterable[int], atomic: tuple[int, ...], *, entering: bool
    ) -> None:
        """Enter or exit ``changed`` (``atomic``: the atomic states among them) at once: what
        the spec's loops do for states with nothing to run on the way (no executable content,
        invocation, ``<data>`` or final state), in one set operation. The sorted atomic
        states are then worked out again when next read (a selection the accelerator keeps
        does not read them)."""
        if self._clock is not None:
            self._tick(len(atomic) + 1)
        if entering:
            self.configuration.update(changed)
            if self._any_invokes:
                self.statesToInvoke.update(changed)
            self.bound.update(changed)  # (none holds <data>: nothing to bind)
        else:
            self.configuration.difference_update(changed)
        self._atomics = None
        self._config_tuple = None
        if self._uses_in:
            self.dm.configuration_changed()

    # ==== datamodel initialisation, donedata ===================================================

    def _initialize_data(
        self, node: StateNode, *, bind: bool, overrides: dict[str, Any] | None
    ) -> None:
        for data in node.datas:
            try:
                if overrides and data.id in overrides:
                    self.dm.declare_value(data.id, tagged(overrides[data.id]))
                else:
                    self.dm.declare(data, bind=bind)
            except DatamodelError as exc:
                self._raise_error("error.execution", str(exc), reason=exc.reason, where=data)

    def _bind_data(self, node: StateNode) -> None:
        for data in node.datas:
            try:
                self.dm.bind(data)
            except DatamodelError as exc:
                self._raise_error("error.execution", str(exc), reason=exc.reason, where=data)

    def _donedata(self, final: StateNode) -> tuple[Any, str | None]:
        """The ``<donedata>`` value, and the error message if evaluating it failed."""
        dd = final.donedata
        if dd is None:
            return None, None
        try:
            if dd.content is not None:
                return self._content_value(dd.content), None
            return self._params_value(dd.params, ()), None
        except DatamodelError as exc:
            self._raise_error("error.execution", str(exc), reason=exc.reason, where=dd)
            return None, str(exc)
