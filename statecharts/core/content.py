"""Executable content (spec 4), ``<send>`` (spec 6.2) and ``<invoke>`` (spec 6.4): what the
interpreter runs for the elements of a block, apart from Appendix D's algorithm.

:class:`ExecutableContent` is a part of :class:`statecharts.core.interpreter.Interpreter`
(its base class), not a class of its own: its methods read the interpreter's working state
(the datamodel, the internal queue, the counters, the host in force) and report through its
``_emit`` and ``_raise_error``, the step's budgets counted as there. What they use of it is
declared below. Each element's handler is a small function; ``<send>`` and ``<invoke>`` are
planned here (their attributes evaluated first, a failure sends or invokes nothing) and
carried out by the host from the effects they emit.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from statecharts.core import effects as fx
from statecharts.core.budget import BudgetExceeded, StepBudgets
from statecharts.core.datamodel import Datamodel, plain, tagged
from statecharts.core.delays import parse_time, time_problem
from statecharts.core.errors import DatamodelError
from statecharts.core.events import EXTERNAL, INTERNAL, SCXML_PROCESSOR, Event
from statecharts.core.host import SCXML_INVOKE_TYPES, SCXML_SEND_TYPES, Host, RouteVerdict
from statecharts.core.model import (
    Action,
    Assign,
    Block,
    Cancel,
    Chart,
    Content,
    Foreach,
    If,
    Invoke,
    Log,
    Param,
    Raise,
    Script,
    Send,
    StateNode,
)
from statecharts.core.state import Invocation
from statecharts.core.targets import Target, TargetKind


def json_bytes(value: Any) -> int:
    """The bytes ``value`` takes as UTF-8 JSON (what a history, timer or outbox row holds)."""
    text = json.dumps(value, default=str, ensure_ascii=False)
    return len(text) if text.isascii() else len(text.encode("utf-8", "replace"))


class Stop(Exception):
    """An element of executable content failed; the rest of its block is skipped."""


class ExecutableContent:
    """The interpreter's executable content, ``<send>`` and ``<invoke>`` (see the module)."""

    # What these methods use of the interpreter (statecharts.core.interpreter.Interpreter).
    chart: Chart
    states: list[StateNode]
    dm: Datamodel
    tracing: bool
    budgets: StepBudgets
    accelerator: Any
    internal_queue: list[Event]
    invocations: list[Invocation]
    session_id: str
    parent_session_id: str | None
    invokeid: str | None
    n_send: int
    n_invoke: int
    n_ordinal: int
    n_invocation: int
    _host: Host
    _clock: Callable[[], float] | None
    _performers: dict[type[Action], Callable[[Any, Block], None]]
    _foreach_iterations: int
    _log_bytes: int
    _emit: Callable[..., None]
    _append: Callable[[str, dict[str, Any], int], None]
    _raise_error: Callable[..., None]
    _check_time: Callable[[], None]
    _enqueue_internal: Callable[[Event], None]

    # ==== the elements (spec 4) ================================================================

    def executeContent(self, block: Block) -> None:
        if not block.actions:
            return
        performers = self._performers
        try:  # (a plain try: contextlib.suppress costs more on this per-transition path)
            for action in block.actions:
                try:  # (_run_action, inline: one call less per element)
                    performers[type(action)](action, block)
                except DatamodelError as exc:
                    self._raise_error("error.execution", str(exc), reason=exc.reason, where=action)
                    return  # (the rest of the block is skipped)
        except Stop:  # (an element inside an <if> or <foreach> failed)
            pass

    def _run_actions(self, actions: tuple[Action, ...], block: Block) -> None:
        for action in actions:
            self._run_action(action, block)

    def _run_action(self, action: Action, block: Block) -> None:
        """Run one element of executable content; a failing one raises ``error.execution``
        and skips the rest of its block (spec 4.9)."""
        try:
            self._performers[type(action)](action, block)
        except DatamodelError as exc:
            self._raise_error("error.execution", str(exc), reason=exc.reason, where=action)
            raise Stop() from None

    def _raise(self, action: Raise, block: Block) -> None:
        event = self.accelerator.raised(action)
        self.internal_queue.append(event)
        if self.tracing:
            self._emit(fx.TRACE_RAISED, event=event.to_dict())

    def _assign(self, action: Assign, block: Block) -> None:
        if action.expr is not None:
            self.dm.assign(action.location, action.expr)
        else:
            self.dm.assign_value(action.location, tagged(action.body))

    def _log(self, action: Log, block: Block) -> None:
        value = plain(self.dm.evaluate(action.expr)) if action.expr is not None else None
        size = json_bytes(action.label) + json_bytes(value)
        self._log_bytes += size
        if self._log_bytes > self.budgets.log_bytes:
            raise BudgetExceeded("log_bytes", self.budgets.log_bytes, self._log_bytes)
        # (measured once, for both budgets)
        self._append(fx.LOG, {"label": action.label, "value": value}, size)

    def _if(self, action: If, block: Block) -> None:
        for cond, branch in action.branches:
            if cond is None or self.dm.evaluate_cond(cond):
                self._run_actions(branch, block)
                return

    def _cancel(self, action: Cancel, block: Block) -> None:
        sendid = action.sendid if action.sendid is not None else self._string(action.sendidexpr)
        self.n_ordinal += 1
        self._emit(
            fx.CANCEL,
            send_id=sendid,
            ordinal=self.n_ordinal,
            content_index=action.content_index,
            owner=block.owner,
        )

    def _script(self, action: Script, block: Block) -> None:
        self.dm.run_script(action.script)

    def _foreach(self, action: Foreach, block: Block) -> None:
        failed: list[Stop] = []

        def body() -> bool:
            self._foreach_iterations += 1
            if self._foreach_iterations > self.budgets.foreach_iterations:
                raise BudgetExceeded(
                    "foreach_iterations", self.budgets.foreach_iterations,
                    self._foreach_iterations,
                )
            if self._clock is not None:
                self._check_time()
            try:
                self._run_actions(action.actions, block)
            except Stop as stop:
                failed.append(stop)
                return False
            return True

        self.dm.foreach(action.array, action.item, action.index, body)
        if failed:
            raise failed[0]

    def _string(self, expr: Any) -> str:
        value = self.dm.evaluate(expr)
        return value if isinstance(value, str) else json.dumps(plain(value))

    # ==== <send> (spec 6.2) ====================================================================

    def send(self, action: Send, block: Block) -> None:
        # Evaluate everything first: a failure sends nothing (spec 6.2, test 553).
        name = self._attribute(action.event, action.eventexpr) or ""
        target = self._attribute(action.target, action.targetexpr)
        send_type = self._attribute(action.type, action.typeexpr)
        delay_ms = self._delay_ms(action)
        data, payload = self._send_data(action)
        send_id = self._send_id(action)
        if send_type is None or send_type in SCXML_SEND_TYPES:
            resolved = self._resolve_target(target, send_id, action)
        else:
            resolved = self._route_target(send_type, target, send_id, action)
        if resolved is None:
            return
        event = self._send_event(action, name, data, send_id, resolved)
        if resolved.kind is TargetKind.INTERNAL and delay_ms <= 0:
            self._enqueue_internal(event)
        elif delay_ms > 0:
            self._send_delayed(action, block, resolved, event, send_id, payload, delay_ms)
        else:
            self._emit(
                fx.SEND, target=resolved, event=event.to_dict(), send_id=send_id,
                send_ordinal=self.n_send, payload=payload,
            )

    def _send_data(self, action: Send) -> tuple[Any, str | None]:
        """The event's data, and how it was given (``content``: an I/O processor such as
        Basic HTTP sends it as the body; ``params``; or None)."""
        if action.content is not None:
            return self._content_value(action.content), "content"
        data = self._params_value(action.params, action.namelist)
        return data, "params" if action.params or action.namelist else None

    def _send_id(self, action: Send) -> str:
        """The send's id (the author's, or one generated from its ordinal), stored at its
        ``idlocation``."""
        self.n_send += 1  # the send's ordinal (and its generated id)
        send_id = action.id if action.id is not None else f"send_{self.n_send}"
        if action.idlocation is not None:
            self.dm.assign_value(action.idlocation, send_id)
        return send_id

    def _send_event(
        self, action: Send, name: str, data: Any, send_id: str, resolved: Target
    ) -> Event:
        author_id = action.id is not None or action.idlocation is not None
        return Event(
            name,
            INTERNAL if resolved.kind is TargetKind.INTERNAL else EXTERNAL,
            data,
            sendid=send_id if author_id else None,
            origin=f"#_scxml_{self.session_id}",
            origintype=SCXML_PROCESSOR,
            invokeid=self.invokeid if resolved.kind is TargetKind.PARENT else None,
        )

    def _attribute(self, value: str | None, expr: Any) -> str | None:
        """An attribute given as a value or as an expression (``event``/``eventexpr``...)."""
        if value is not None:
            return value
        return self._string(expr) if expr is not None else None

    def _delay_ms(self, action: Send) -> int:
        if action.delayexpr is None:
            return action.delay_ms or 0
        delay_text = self._string(action.delayexpr)
        delay_ms = parse_time(delay_text)
        if delay_ms is None:
            raise DatamodelError(f"<send> delayexpr: {time_problem(delay_text)}")
        return delay_ms

    def _route_target(
        self, send_type: str, target: str | None, send_id: str, action: Send
    ) -> Target | None:
        """Where a send of a host type goes (a route); None (with an error event raised) when
        it cannot be dispatched."""
        route = self._host.types.route_for(send_type)
        if route is None:  # spec 6.2.4: a type the platform does not support
            self._raise_error(
                "error.execution", f"<send> type {send_type!r} is not supported", send_id,
                where=action,
            )
            raise Stop()
        answer = self._host.check_route(route, send_type, target)
        if answer.verdict is RouteVerdict.INVALID:  # spec 6.2.4: an invalid target
            self._raise_error(
                "error.execution",
                f"<send> target {target!r} is not valid for {send_type!r}: {answer.reason}",
                send_id,
                where=action,
            )
            raise Stop()
        if answer.verdict is RouteVerdict.UNREACHABLE:  # it cannot be dispatched
            self._raise_error(
                "error.communication",
                f"<send> to {target!r} by {send_type!r} cannot be dispatched: {answer.reason}",
                send_id,
                where=action,
            )
            return None
        return Target(TargetKind.ROUTE, route=route, type=send_type, address=target)

    def _send_delayed(
        self,
        action: Send,
        block: Block,
        resolved: Target,
        event: Event,
        send_id: str,
        payload: str | None,
        delay_ms: int,
    ) -> None:
        refusal = self._delay_refusal(resolved)
        if refusal is not None:  # refused, never dropped
            self._raise_error("error.communication", refusal, send_id, where=action)
            return
        self.n_ordinal += 1
        self._emit(
            fx.SEND_DELAYED,
            target=resolved,
            event=event.to_dict(),
            send_id=send_id,
            send_ordinal=self.n_send,
            payload=payload,
            delay_ms=delay_ms,
            ordinal=self.n_ordinal,
            content_index=action.content_index,
            owner=block.owner,
            id_from_author=action.id is not None,
            # ds:expires (statecharts.core.expiry): only when set, so the effects of charts
            # without it are what they always were
            **({} if action.expires_ms is None else {"expires_ms": action.expires_ms}),
        )

    def _delay_refusal(self, resolved: Target) -> str | None:
        """Why the host cannot keep a delayed send to ``resolved`` (it cannot dispatch it:
        spec 6.2), or None."""
        if resolved.kind is TargetKind.ROUTE and not self._host.types.route_timers:
            return (
                f"<send> with a delay by {resolved.type!r}: this host has no timer queue for "
                "delayed sends on routes"
            )
        if not self._host.types.timers:
            return "<send> with a delay: this host has no timer queue for delayed sends"
        return None

    def _resolve_target(self, target: str | None, send_id: str, action: Send) -> Target | None:
        """Where an SCXML send goes; None (with an error event raised) when it cannot go."""
        session_id = self.session_id
        if target is None or target == "":
            return Target(TargetKind.SELF, session_id=session_id)
        if target == "#_internal":
            return Target(TargetKind.INTERNAL, session_id=session_id)
        if target == "#_parent":
            if self.parent_session_id is None:
                self._undeliverable("#_parent: this session has no parent", send_id, action)
                return None
            return Target(TargetKind.PARENT, session_id=self.parent_session_id)
        if target.startswith("#_scxml_"):
            return self._session_target(target[len("#_scxml_") :], send_id, action)
        if target.startswith("#_") and len(target) > 2:
            return self._invocation_target(target[2:], send_id, action)
        self._raise_error(
            "error.execution", f"<send> target {target!r} is not a valid SCXML target", send_id,
            where=action,
        )
        raise Stop()

    def _session_target(self, other: str, send_id: str, action: Send) -> Target | None:
        """``#_scxml_<other>``: this session, its parent, or another one the host reaches."""
        if other == self.session_id:
            return Target(TargetKind.SELF, session_id=other)
        if other == self.parent_session_id:
            return Target(TargetKind.PARENT, session_id=other)
        if not self._host.is_reachable(other):
            self._undeliverable(f"session {other!r} is unreachable", send_id, action)
            return None
        return Target(TargetKind.SESSION, session_id=other)

    def _invocation_target(self, invokeid: str, send_id: str, action: Send) -> Target | None:
        """``#_<invokeid>``: an active invocation of this session."""
        if any(inv.invokeid == invokeid for inv in self.invocations):
            return Target(TargetKind.INVOKE, invokeid=invokeid)
        self._undeliverable(f"no active invocation {invokeid!r}", send_id, action)
        return None

    def _undeliverable(self, message: str, send_id: str, action: Send) -> None:
        """A send that cannot be dispatched: ``error.communication``, and nothing sent."""
        self._raise_error("error.communication", message, send_id, where=action)

    # ==== <invoke> (spec 6.4) ==================================================================

    def invoke(self, inv: Invoke) -> None:
        node = self.states[inv.state]
        try:
            invoke_type, src, invokeid, content, data = self._invoke_request(inv, node)
        except DatamodelError as exc:
            self._raise_error("error.execution", str(exc), reason=exc.reason, where=inv)
            return
        self.n_invocation += 1
        ordinal = self.n_invocation
        self.invocations.append(
            Invocation(invokeid, inv.state, inv.index, inv.autoforward, ordinal)
        )
        if isinstance(content, dict) and content.get("$sc") == "xml":
            content = content["v"]
        self._emit(
            fx.INVOKE,
            invokeid=invokeid,
            invoke_ordinal=ordinal,
            type="scxml" if invoke_type in SCXML_INVOKE_TYPES else invoke_type,
            src=src,
            content=content,
            data=data,
            autoforward=inv.autoforward,
            state=node.id,
            base_path=self.chart.base_path,
            # <content expr> or srcexpr: a chart defined at run time (a host may refuse it)
            defined_at_run_time=(inv.content is not None and inv.content.expr is not None)
            or (inv.src is None and inv.srcexpr is not None),
        )

    def _invoke_request(self, inv: Invoke, node: StateNode) -> tuple[str, Any, str, Any, Any]:
        """The invocation's type, ``src``, id, content and data, evaluated in document order
        (a DatamodelError when one fails: nothing is invoked)."""
        invoke_type = self._attribute(inv.type, inv.typeexpr)
        if invoke_type is None:
            invoke_type = "scxml"
        # Spec 6.4: a type the platform does not support is error.execution, checked
        # against what the host registered for this step.
        if invoke_type not in self._host.types.invoke:
            raise DatamodelError(f"<invoke> type {invoke_type!r} is not supported")
        src = self._attribute(inv.src, inv.srcexpr)
        invokeid = self._invoke_id(inv, node)
        content = self._content_value(inv.content) if inv.content is not None else None
        return invoke_type, src, invokeid, content, self._params_value(inv.params, inv.namelist)

    def _invoke_id(self, inv: Invoke, node: StateNode) -> str:
        """The author's id, or one generated (``<state id>.<n>``), stored at ``idlocation``."""
        if inv.id is not None:
            return inv.id
        self.n_invoke += 1
        invokeid = f"{node.id}.{self.n_invoke}"
        if inv.idlocation is not None:
            self.dm.assign_value(inv.idlocation, invokeid)
        return invokeid

    def cancelInvoke(self, inv: Invoke) -> None:
        for invocation in list(self.invocations):
            if invocation.invoke == inv.index and invocation.state == inv.state:
                self.invocations.remove(invocation)
                self._emit(
                    fx.CANCEL_INVOKE,
                    invokeid=invocation.invokeid,
                    invoke_ordinal=invocation.ordinal,
                )

    def applyFinalize(self, inv: Invoke, event: Event) -> None:
        if inv.finalize.actions:
            self.executeContent(inv.finalize)

    # ==== <content>, <param> (spec 5.5, 5.7) ===================================================

    def _content_value(self, content: Content) -> Any:
        if content.expr is not None:
            return self.dm.evaluate(content.expr)
        return tagged(content.body) if content.has_body else None

    def _params_value(self, params: tuple[Param, ...], namelist: tuple[Any, ...]) -> Any:
        if not params and not namelist:
            return None
        values: dict[str, Any] = {}
        for expr in namelist:
            values[expr.source] = self.dm.evaluate(expr)
        for p in params:
            source = p.expr if p.expr is not None else p.location
            assert source is not None
            values[p.name] = self.dm.evaluate(source)
        return values
