"""The ECMAScript datamodel (spec B.2) in a sandboxed QuickJS context.

One QuickJS context per live interpreter. Every call into it runs under a time limit and
the context under a memory cap: ``while(true){}`` or a memory bomb raises DatamodelError
(hence ``error.execution``) and the context stays usable. Expressions are compiled to JS
functions once per context and cached by expression index.

Guarantees (see docs/embedding.md, "The ECMAScript datamodel"):

- Chart code never reaches the machinery: it lives in closures of the sandbox prelude
  (sandbox.js), which runs before any chart code and hands its functions to Python only.
- Nothing chart code does raises out of this class except DatamodelError: what it throws
  leaves the engine as text, values leave as JSON text or primitives the binding reads
  exactly (no NUL truncation, no lone surrogates, no ropes).
- The realm is locked down (built-ins frozen, the global object only takes plain variables),
  and at the end of every step the live datamodel is exactly what its snapshot restores: a
  value the snapshot cannot hold as it is gets the snapshot's coercion in the live engine too.
  So a step gives the same result whether the engine was kept alive or rebuilt.
- A snapshot only writes what restore reads (a function is re-created before it is written);
  restore refuses what it cannot read with DamagedDatamodelError (a PositionError).
- The engine is given the system variables, and a restore of scalars it cannot refuse, only
  with the first call that needs it, before anything of that call runs and under the
  per-evaluation limits: a step the mirror answers whole never calls into QuickJS.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from importlib import resources
from typing import Any

import quickjs

from statecharts.core.datamodel import refusals
from statecharts.core.datamodel.base import (
    MAX_VALUE_DEPTH,
    Datamodel,
    Limits,
    loads_snapshot,
    tagged,
)
from statecharts.core.datamodel.scalar import NotScalar, Program, compile_scalar
from statecharts.core.errors import DatamodelError, SnapshotLimitError
from statecharts.core.model import Data, Expr

_SANDBOX = resources.files("statecharts.core.datamodel").joinpath("sandbox.js").read_text()
# The prelude evaluates to a function taking the codec's source, which it compiles on first use.
# What the realm refuses, removes or fixes (refusals.py), as the prelude reads it.
_REFUSALS = refusals.as_json()
_PRELUDE, _CODEC = _SANDBOX.split("\n// ==== codec: compiled on first use (loadCodec above) ====\n")
# What a call into QuickJS can raise: what the engine threw (the prelude turns everything
# chart code throws into text first), and the binding's own conversion errors.
_JS_ERRORS = (quickjs.JSException, quickjs.StackOverflow, TypeError, UnicodeError)

# An expression that cannot change the datamodel: no assignment (compound ones included),
# ++/--, delete, new, or call other than In(), no tagged template. Evaluating one leaves the
# last snapshot valid, so it is not retaken. Implicit calls could still run chart functions
# (a valueOf or toString stored in an object): the snapshot reports whether the datamodel
# holds any (its "h" mark), and while it does every expression counts as impure. Getters
# cannot be held across steps (a snapshot turns them into data).
_IMPURE = re.compile(
    r"(?<![=!<>])=(?!=)|<<=|>>=|\+\+|--|\bdelete\b|\bnew\b|`|(?<!\bIn)\s*\("
)


def _is_pure(source: str) -> bool:
    return _IMPURE.search(source) is None


def is_side_effect_free(source: str) -> bool:
    """Whether an expression's text cannot change the datamodel (the test above: no
    assignment, ``++``/``--``, ``delete``, ``new``, call but ``In()``, tagged template).
    Conservative: a pure expression may be called impure, never the reverse (implicit calls
    of functions stored in the datamodel aside: see the snapshot's "h" mark)."""
    return _is_pure(source)


_MAX_SAFE_INT = 2**53 - 1
_UNSEEN: Any = object()
_MIN_SAFE_INT = -_MAX_SAFE_INT
_ESCAPED = re.compile(r'["\\]')  # what JSON.stringify escapes in printable ASCII
_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
# Plain identifiers met in restored snapshots -> their snapshot prefix ('"name":'), so that a
# restore does not match each name again (names come from outside: bounded).
_prefixes: dict[str, str] = {}
_MAX_PREFIXES = 4096


def _piece(value: Any) -> str | None:
    """``value`` as the sandbox's snapshot writes it (the text after ``"key":``), for the
    scalars whose text Python can reproduce exactly; None for anything else."""
    kind = type(value)
    if kind is int:
        return str(value) if -_MAX_SAFE_INT <= value <= _MAX_SAFE_INT else None
    if kind is bool:
        return "true" if value else "false"
    if value is None:
        return "null"
    if kind is str and value.isascii() and value.isprintable() and not _ESCAPED.search(value):
        return f'"{value}"'
    return None


_WHAT = {
    "expression": "expression {!r}",
    "condition": "condition {!r}",
    "assign": "<assign location={!r}>",
    "location": "location {!r}",
}

# ---- compiling chart code without running it -------------------------------------------------

# Chart code is compiled by evaluating a function expression that contains it. Code written
# to close that expression early (`0); }), sideEffect(), (function () { (0`) would run while
# being compiled, outside any evaluation, so every text is first evaluated in a throwaway
# engine: only a text whose value is exactly one function spanning the whole text is then
# compiled in the session's engine, where compiling it runs nothing. Verdicts are kept per
# text (a chart's texts are few; the check costs a fresh engine).
_CHECK = """(function (text) {
  const apply = Reflect.apply, toString = Function.prototype.toString, evaluate = eval;
  const inner = text.slice(1, -1);
  let f;
  try { f = evaluate(text); } catch (e) { return false; }
  if (typeof f !== "function") return false;
  try { return apply(toString, f, []) === inner; } catch (e) { return false; }
})"""
_verdicts: dict[str, bool] = {}
_MAX_VERDICTS = 8192


def _is_one_function(text: str) -> bool:
    """Whether evaluating ``text`` (``"(function ... )"``) only makes that one function."""
    verdict = _verdicts.get(text)
    if verdict is None:
        context = quickjs.Context()
        context.set_memory_limit(16 * 1024 * 1024)
        context.set_max_stack_size(256 * 1024)
        context.set_time_limit(0.5)
        try:
            verdict = context.eval(_CHECK)(text) is True
        except _JS_ERRORS:
            verdict = False
        if len(_verdicts) >= _MAX_VERDICTS:
            _verdicts.clear()
        _verdicts[text] = verdict
    return verdict


_ENGINE_FUNCTIONS = (
    "install", "reset", "wrapValue", "wrapCond", "wrapAssign", "wrapAssignValue", "compile",
    "declare", "declareFrom", "runScript", "setEvent", "clearEvent", "setConfiguration",
    "isIdentifier", "loopBegin", "loopSet", "loopEnd", "snapshot", "restore", "setGlobals",
)
_MAX_COMPILED = 4096  # chart functions an engine keeps compiled, across the sessions it serves
_MAX_RESTORABLE = 4096  # names an engine remembers a restore accepted
# The longest snapshot whose restore into the engine may be deferred: a small scalar datamodel
# (a restore this size cannot meet the memory cap or the time limit).
_DEFERRABLE_BYTES = 4096


class _Engine:
    """A QuickJS context with the sandbox prelude run in it: the realm locked down and the
    machinery's functions. Serves one session at a time; between sessions it is reset (the
    previous session's variables, event and configuration removed; the realm is frozen, so
    nothing else can carry over), so building one (a new context, compiling the prelude and
    freezing the realm: a few milliseconds) happens once per thread, not per restore."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.context = quickjs.Context()
        self.context.set_memory_limit(limits.memory_bytes)
        self.context.set_max_stack_size(limits.stack_bytes)
        self.context.set_time_limit(limits.time_ms / 1000)
        pick = self.context.eval(_PRELUDE)(_CODEC, MAX_VALUE_DEPTH, _REFUSALS)
        self.functions: dict[str, Any] = {name: pick(name) for name in _ENGINE_FUNCTIONS}
        # (wrapper name or "", text) -> compiled chart function; each is frozen and stateless,
        # so sessions share them.
        self.compiled: dict[tuple[str, str], Any] = {}
        # Names a restore into this engine has accepted as datamodel variables (none of the
        # realm's own globals, which the prelude fixed before any chart code ran): a restore
        # of scalars under these names cannot be refused, so it may be deferred.
        self.restorable: set[str] = set()

    def release(self) -> bool:
        """Make the engine ready for another session; False if it cannot be (drop it)."""
        try:
            self.functions["reset"]()
            self.context.set_time_limit(self.limits.time_ms / 1000)
        except _JS_ERRORS:
            return False
        if len(self.compiled) > _MAX_COMPILED:
            self.compiled.clear()
        if len(self.restorable) > _MAX_RESTORABLE:
            self.restorable.clear()
        return True


_spare_engines = threading.local()
_SPARES_PER_THREAD = 2  # per Limits: one session stepped while another is being restored


def _take_engine(limits: Limits) -> _Engine:
    spares: dict[Limits, list[_Engine]] | None = getattr(_spare_engines, "by_limits", None)
    if spares:
        kept = spares.get(limits)
        if kept:
            return kept.pop()
    return _Engine(limits)


def _give_back(engine: _Engine, used: bool = True) -> None:
    """Keep ``engine`` for the thread's next session; ``used`` False: no call reached it
    since it was taken (it is as it was given: reset, or new), so it is not reset again."""
    spares: dict[Limits, list[_Engine]] | None = getattr(_spare_engines, "by_limits", None)
    if spares is None:
        spares = _spare_engines.by_limits = {}
    kept = spares.setdefault(engine.limits, [])
    if len(kept) >= _SPARES_PER_THREAD:
        return
    if used:
        if engine.release():
            kept.append(engine)
        return
    try:  # (a lowered per-evaluation limit is not the next session's)
        engine.context.set_time_limit(engine.limits.time_ms / 1000)
    except _JS_ERRORS:
        return
    kept.append(engine)


class EcmascriptDatamodel(Datamodel):
    name = "ecmascript"

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self._time_limit_ms: float = self.limits.time_ms
        # Called before every evaluation of chart code (set_evaluation_guard): the step's
        # time budget. None: no guard.
        self._guard: Callable[[], None] | None = None
        self._engine: _Engine | None = None
        try:
            engine = _take_engine(self.limits)
        except _JS_ERRORS as exc:
            raise self._error("the sandbox prelude", exc) from None
        self._engine = engine
        self.context = engine.context
        self._compiled = engine.compiled
        # The binding refuses calls from JS into Python while a time limit is set, so
        # nothing the sandbox needs lives in Python: In() reads a copy of the configuration
        # pushed before each evaluation, and XML arrives already parsed.
        self._active_ids: Callable[[], list[str]] = list
        self._uses_configuration = True
        self._configuration_dirty = True
        self._prepare = True  # something to push or check before the next evaluation
        self._ids_texts: dict[int, tuple[list[str], str]] = {}
        self._pending_event: tuple[Any, ...] | None = None
        self._event_stale = False  # the sandbox's _event belongs to a step that has ended
        self._event_pushed = False
        self._dirty = True  # the datamodel may differ from self._last_snapshot
        self._keys_dirty = True  # a new global may exist: the snapshot must look for it
        self._hooks = False  # the datamodel holds functions that implicit conversions call
        self._last_snapshot = "{}"
        self._restored_text: str | None = None  # the snapshot text restore was given
        self._restored_as: str | None = None  # the engine's own text for that same value
        self._pure: dict[int, bool] = {}
        # The mirror: while every global of the datamodel is a scalar (number, string, boolean,
        # null) under a plain identifier and the context has only ever run pure expressions
        # and assignments to those identifiers, Python keeps the values (and their snapshot
        # text), so such an assignment updates the mirror and the snapshot is written here,
        # without a call into QuickJS or a JSON decode. Anything else drops it; the next full
        # snapshot (decoded for the datamodel_change effect) sets it up again.
        self._mirror: dict[str, Any] | None = None
        self._mirror_pieces: dict[str, str] = {}
        self._mirror_stale = False  # the mirror changed since _last_snapshot was written
        self._mirror_allowed = True  # False once impure code ran
        self._values: dict[Any, Any] = {}
        self._conds: dict[int, Any] = {}
        self._pure_conds: dict[int, Any] = {}
        # location index -> (expression index, function, mirrored name, pure, snapshot prefix)
        self._assigns: dict[int, tuple[int, Any, str | None, bool, str]] = {}
        self._assign_functions: dict[tuple[int, int], Any] = {}
        self._setters: dict[Any, Any] = {}
        # Expression index -> its scalar program (scalar.py) or None, kept by the
        # interpreter's accelerator (use_scalar_programs); None: every expression runs in
        # QuickJS. Globals a program's assignment set in the mirror and not yet in the engine:
        # written (one call) before the next call into the engine.
        self._scalars: dict[int, Program | None] | None = None
        self._unsynced: dict[str, Any] = {}
        # A snapshot given to restore and not yet written into the engine: it held scalars
        # only, under names this engine has accepted before, so the mirror answers from it
        # and the engine is restored (one call) just before the first call that needs it. A
        # step that only reads and assigns scalars then makes no call into QuickJS at all.
        self._deferred: str | None = None
        # The system variables (install's arguments) not yet given to the engine: installed
        # with the first call into it. Until then nothing has reached the engine, which goes
        # back to the thread's spares without a reset if nothing ever does.
        self._system: tuple[str, str | None, str, str | None] | None = None
        self._pending = True  # install or a deferred restore to do before the next call
        self._opened = False  # a call reached the engine since this datamodel took it
        functions = engine.functions
        self._install = functions["install"]
        self._wrappers = {
            "value": functions["wrapValue"],
            "cond": functions["wrapCond"],
            "assign": functions["wrapAssign"],
            "assign_value": functions["wrapAssignValue"],
        }
        self._compile_js = functions["compile"]
        self._declare = functions["declare"]
        self._declare_from = functions["declareFrom"]
        self._run_script = functions["runScript"]
        self._set_event = functions["setEvent"]
        self._clear_event = functions["clearEvent"]
        self._set_configuration = functions["setConfiguration"]
        self._is_identifier = functions["isIdentifier"]
        self._loop_begin = functions["loopBegin"]
        self._loop_set = functions["loopSet"]
        self._loop_end = functions["loopEnd"]
        self._snapshot = functions["snapshot"]
        self._restore = functions["restore"]
        self._set_globals = functions["setGlobals"]

    # -- plumbing --------------------------------------------------------------------------

    def set_evaluation_time_limit(self, time_ms: float | None) -> None:
        """Cap the following evaluations at ``time_ms`` (at most the per-evaluation limit);
        None restores the limit. The seam for a per-step time budget: a host that knows
        what is left of a step's time passes it before the evaluations it starts."""
        limit = self.limits.time_ms if time_ms is None else min(time_ms, self.limits.time_ms)
        self._time_limit_ms = max(limit, 0)
        self.context.set_time_limit(self._time_limit_ms / 1000)

    def set_evaluation_guard(self, guard: Callable[[], None] | None) -> None:
        """Call ``guard()`` before every evaluation of chart code: each expression, condition,
        assignment, ``<script>``, ``<data>`` binding and ``<foreach>`` array (not the snapshot:
        its caller checks before taking it). What the guard raises leaves this datamodel as it
        is, before the evaluation runs."""
        self._guard = guard

    def use_scalar_programs(self, programs: dict[int, Program | None] | None) -> None:
        """Answer the expressions of scalar.py's subset from the mirror while it holds every
        global, keeping each expression's program in ``programs`` (the accelerator's table,
        by expression index); None: run every expression in QuickJS."""
        self._scalars = programs

    def _scalar(self, expr: Expr) -> Program | None:
        """The scalar program of ``expr`` while the mirror can answer it, else None."""
        programs = self._scalars
        if programs is None or self._mirror is None or self._hooks:
            return None
        program = programs.get(expr.index, _UNSEEN)
        if program is _UNSEEN:
            program = programs[expr.index] = compile_scalar(_js(expr))
        return program

    def _sync(self) -> None:
        """Write the globals set from the mirror into the engine (before any call that could
        read them: an evaluation, a snapshot)."""
        pending, self._unsynced = self._unsynced, {}
        self._set_globals(json.dumps(pending, separators=(",", ":")))

    def configuration_changed(self) -> None:
        self._configuration_dirty = True
        self._prepare = True

    def configuration_unused(self) -> None:
        self._uses_configuration = False  # In() then sees no active state

    def _before_call(self) -> None:
        """Push what the next evaluation may read: the globals set from the mirror, the
        configuration for In(), _event."""
        if self._pending:
            self._open()
        if self._unsynced:
            self._sync()
        if self._configuration_dirty and self._uses_configuration:
            self._configuration_dirty = False
            self._set_configuration(" ".join(self._active_ids()))
        if self._pending_event is not None:
            pending, self._pending_event = self._pending_event, None
            self._event_stale = False
            self._event_pushed = True
            self._set_event(*pending)
        elif self._event_stale:
            # A step that ended left its event behind; a restored engine has none.
            self._event_stale = self._event_pushed = False
            self._clear_event()

    def _call_js(self, what: str, call: Callable[[], Any]) -> Any:
        if self._engine is None:
            self._check_open()
        try:
            self._before_call()
            return call()
        except _JS_ERRORS as exc:
            raise self._error(what, exc) from None

    def _compile_call(self, what: str, call: Callable[[], Any]) -> Any:
        self._check_open()
        try:
            return call()
        except _JS_ERRORS as exc:
            raise self._error(what, exc) from None

    def _run(self, kind: str, source: str, function: Any) -> Any:
        """Call a wrapped chart function: ``function(configuration)``.

        The configuration rides along as the argument (the text for In(), or None when the
        sandbox already has it), saving a round trip into QuickJS per change. Whether anything
        must be pushed first (the configuration, ``_event``) or checked (a closed datamodel)
        is one flag, ``_prepare``, set by whatever makes it so.
        """
        guard = self._guard
        if guard is not None:
            guard()
        try:
            return function(self._prepare_call() if self._prepare else None)
        except _JS_ERRORS as exc:
            raise self._error(_WHAT[kind].format(source), exc) from None

    def _run_with(self, kind: str, source: str, function: Any, argument: Any) -> Any:
        """``_run`` for a wrapped chart function that takes one more argument."""
        guard = self._guard
        if guard is not None:
            guard()
        try:
            return function(self._prepare_call() if self._prepare else None, argument)
        except _JS_ERRORS as exc:
            raise self._error(_WHAT[kind].format(source), exc) from None

    def _prepare_call(self) -> str | None:
        """Before an evaluation: refuse a closed datamodel, push a pending or stale
        ``_event``, and return the configuration's text for In() if it changed (else None)."""
        self._check_open()
        self._prepare = False
        if self._pending:
            self._open()
        if self._unsynced:
            self._sync()
        configuration = None
        if self._configuration_dirty and self._uses_configuration:
            self._configuration_dirty = False
            ids = self._active_ids()
            # The same list object comes back for the same configuration: its text is
            # kept (with the list, so that its id stays its own).
            seen = self._ids_texts.get(id(ids))
            if seen is None or seen[0] is not ids:
                if len(self._ids_texts) >= 256:
                    self._ids_texts.clear()
                seen = self._ids_texts[id(ids)] = (ids, " ".join(ids))
            configuration = seen[1]
        if self._pending_event is not None or self._event_stale:
            self._before_call()
        return configuration

    def _error(self, what: str, exc: Exception) -> DatamodelError:
        message = str(exc).split("\n", 1)[0]
        if "interrupted" in message:
            message = f"evaluation exceeded the {self._time_limit_ms:g} ms time limit"
        elif "out of memory" in message:
            message = f"evaluation exceeded the {self.limits.memory_bytes} byte memory cap"
        elif message == "null":
            # QuickJS throws null when it runs out of memory while reporting it
            message = (
                f"null was thrown, or the evaluation exceeded the {self.limits.memory_bytes} "
                f"byte memory cap"
            )
        elif isinstance(exc, TypeError | UnicodeError):
            message = f"the value could not be read ({message})"
        return DatamodelError(f"{what}: {message}", message)

    def _function(self, cache: dict[Any, Any], key: Any, text: str, what: str,
                  wrap_name: str = "") -> Any:
        """The chart function ``text`` (one function expression), compiled once per engine
        and wrapped by the prelude's wrapper ``wrap_name`` if given."""
        function = cache.get(key)
        if function is None:
            shared = (wrap_name, text)
            function = self._compiled.get(shared)
            if function is None:
                if not _is_one_function(text):
                    raise DatamodelError(f"{what}: not a single expression")
                # (compiling runs no chart code and reads nothing of the session: nothing is
                # pushed into the engine for it, a deferred restore included)
                compiled = self._compile_call(what, lambda: self._compile_js(text))
                wrapper = self._wrappers.get(wrap_name)
                function = (
                    compiled if wrapper is None
                    else self._compile_call(what, lambda: wrapper(compiled))
                )
                self._compiled[shared] = function
            cache[key] = function
        return function

    def _from_js(self, result: Any) -> Any:
        if isinstance(result, quickjs.Object):
            # [tagged JSON text], nesting no deeper than MAX_VALUE_DEPTH (the sandbox checked)
            return json.loads(json.loads(result.json())[0])
        if isinstance(result, float) and result.is_integer() and abs(result) <= _MAX_SAFE_INT:
            # JavaScript has one number type; an integral value reads back as int, as it
            # does through JSON (JSON.stringify(3.0) is "3").
            return int(result)
        return result

    def _changed(self, *, keys: bool = False, impure: bool = True) -> None:
        self._dirty = True
        if keys:
            self._keys_dirty = True
        if impure:
            self._mirror_allowed = False
        self._mirror = None

    # -- interface -------------------------------------------------------------------------

    def bind_system(
        self,
        session_id: str,
        name: str | None,
        ioprocessors: dict[str, Any],
        in_state: Callable[[str], bool],
        active_ids: Callable[[], list[str]],
        platform: dict[str, Any] | None = None,
    ) -> None:
        self._active_ids = active_ids
        try:
            x = None if platform is None else json.dumps(platform)
            self._system = (session_id, name, json.dumps(ioprocessors), x)
        except _JS_ERRORS as exc:
            raise self._error("system variables", exc) from None
        self._pending = self._prepare = True  # (installed before the first call into QuickJS)

    def _open(self) -> None:
        """Before the first call into the engine: the system variables, then a deferred
        restore."""
        self._opened = True
        # (under the per-evaluation limit they had when they were not deferred, even if the
        # step has lowered it since for what is left of its budget)
        lowered = self._time_limit_ms != self.limits.time_ms
        if lowered:
            self.context.set_time_limit(self.limits.time_ms / 1000)
        try:
            system = self._system
            if system is not None:
                try:
                    self._install(*system)
                except _JS_ERRORS as exc:
                    raise self._error("system variables", exc) from None
                self._system = None
            if self._deferred is not None:
                self._restore_deferred()
        finally:
            if lowered:
                self.context.set_time_limit(self._time_limit_ms / 1000)
        self._pending = False

    def declare(self, data: Data, *, bind: bool) -> None:
        self._changed(keys=True, impure=False)
        self._call_js(f"<data id={data.id!r}>", lambda: self._declare(data.id, None))
        if bind:
            self.bind(data)

    def declare_value(self, name: str, value: Any) -> None:
        self._changed(keys=True, impure=False)
        text = json.dumps(value)
        self._call_js(f"<data id={name!r}>", lambda: self._declare(name, text))

    def bind(self, data: Data) -> None:
        self._changed(keys=True, impure=False)
        what = f"<data id={data.id!r}>"
        if data.expr is not None:
            if not _is_pure(data.expr.source):
                self._mirror_allowed = False
            function = self._function(
                self._values, ("data", data.expr.index),
                f"(function () {{ return ({_js(data.expr)}\n); }})", what,
            )
            if self._guard is not None:
                self._guard()
            self._call_js(what, lambda: self._declare_from(data.id, function))
        elif data.has_body:
            text = json.dumps(tagged(data.body))
            self._call_js(what, lambda: self._declare(data.id, text))
        elif data.src is not None:
            raise DatamodelError(f"<data id={data.id!r}> could not load {data.src!r}")

    def set_event(self, event: dict[str, Any]) -> None:
        # Pushed into the sandbox lazily, just before the next evaluation that could read it.
        data = event["data"]
        text = None if data is None else json.dumps(data)
        if text is not None and '"function"' in text:
            # Event data carrying code (a trusted host's): implicit conversions of it could
            # call chart-visible functions, so nothing counts as read-only this step.
            self._hooks = True
            self._changed()
        self._prepare = True
        self._pending_event = (
            event["name"],
            event["type"],
            event["sendid"],
            event["origin"],
            event["origintype"],
            event["invokeid"],
            text,
            event.get("raw"),  # (Basic HTTP's _event.raw; None for other events)
        )

    def _mark(self, expr: Expr) -> None:
        pure = self._pure.get(expr.index)
        if pure is None:
            pure = self._pure[expr.index] = _is_pure(expr.source)
        if not pure or self._hooks:
            self._changed(keys=True)

    def evaluate(self, expr: Expr) -> Any:
        program = self._scalar(expr)
        if program is not None:
            if self._guard is not None:
                self._guard()
            try:
                return program(self._mirror)  # type: ignore[arg-type]
            except NotScalar:
                pass  # (QuickJS answers)
        self._mark(expr)
        function = self._values.get(expr.index)
        if function is None:
            function = self._function(
                self._values, expr.index, f"(function () {{ return ({_js(expr)}\n); }})",
                f"expression {expr.source!r}", "value",
            )
        return self._from_js(self._run("expression", expr.source, function))

    def evaluate_cond(self, expr: Expr) -> bool:
        # (the scalar program kept for this expression, read inline: see _scalar)
        programs = self._scalars
        program = None
        if programs is not None and self._mirror is not None:
            program = programs.get(expr.index, _UNSEEN)
            if program is _UNSEEN:
                program = self._scalar(expr)
        if program is not None and not self._hooks:
            if self._guard is not None:
                self._guard()
            try:
                return bool(program(self._mirror))  # type: ignore[arg-type]
            except NotScalar:
                pass  # (QuickJS answers)
        function = None if self._hooks else self._pure_conds.get(expr.index)
        if function is None:  # (a pure one has nothing to mark)
            self._mark(expr)
            function = self._function(
                self._conds, expr.index, f"(function () {{ return ({_js(expr)}\n); }})",
                f"condition {expr.source!r}", "cond",
            )
            if self._pure[expr.index]:
                self._pure_conds[expr.index] = function
        return self._run("condition", expr.source, function) is True  # (wrapCond gives a bool)

    def assign(self, location: Expr, expr: Expr) -> None:
        # One record per location (an <assign>'s location is its own expression), checked
        # against the expression in case a caller pairs them differently.
        record = self._assigns.get(location.index)
        if record is None or record[0] != expr.index:
            record = self._assign_record(location, expr)
        _, function, name, pure, prefix = record
        mirror = self._mirror
        if mirror is not None and name in mirror and self._scalars is not None:
            # (name = expr from the mirror, when scalar.py can answer expr)
            program = self._scalars.get(expr.index, _UNSEEN)
            if program is _UNSEEN:
                program = self._scalar(expr)
            if program is not None and not self._hooks:
                if self._guard is not None:
                    self._guard()
                try:
                    value = program(mirror)
                except NotScalar:
                    value = _UNSEEN  # (QuickJS answers)
                if value is not _UNSEEN:
                    mirror[name] = value
                    self._mirror_pieces[name] = prefix + (
                        str(value) if type(value) is int else "true" if value else "false"
                    )
                    self._mirror_stale = True
                    self._unsynced[name] = value
                    self._prepare = True  # (the engine is written before its next call)
                    return
        if function is None:  # (compiled when QuickJS first runs this pair)
            function = self._assign_function(location, expr)
        if self._hooks or not pure:
            self._changed(keys=True)
        mirror = self._mirror
        if mirror is None or name is None or name not in mirror:
            self._dirty = True
            self._mirror = None
            self._run("assign", location.source, function)
            return
        try:
            value = self._run("assign", location.source, function)
        except DatamodelError:
            self._dirty = True
            self._mirror = None
            raise
        if type(value) is int and _MIN_SAFE_INT <= value <= _MAX_SAFE_INT:
            piece: str | None = str(value)  # (the commonest: a counter; what _piece writes)
        else:
            if type(value) is float and value.is_integer() and abs(value) <= _MAX_SAFE_INT:
                value = int(value)
            piece = None if value is None else _piece(value)
            if piece is None:
                self._dirty = True
                self._mirror = None
                return
        mirror[name] = value
        self._mirror_pieces[name] = prefix + piece
        self._mirror_stale = True

    def _assign_record(
        self, location: Expr, expr: Expr
    ) -> tuple[int, Any, str | None, bool, str]:
        """What ``assign`` needs of a (location, expression) pair: the compiled function
        (None until QuickJS first runs the pair: an assignment the mirror answers needs none),
        the global it sets when the mirror can follow it (a plain identifier, a pure
        expression), whether the expression is pure, and the snapshot's text before that
        global's value."""
        name = location.source.strip()
        pure = _is_pure(expr.source)
        plain_name = name if pure and _IDENTIFIER.fullmatch(name) is not None else None
        function = None if plain_name is not None else self._assign_function(location, expr)
        record = (expr.index, function, plain_name, pure, f'"{name}":')
        self._assigns[location.index] = record
        return record

    def _assign_function(self, location: Expr, expr: Expr) -> Any:
        """The pair's compiled function (refused first if the location is a system
        variable), kept in its record."""
        self._check_location(location)
        function = self._function(
            self._assign_functions, (location.index, expr.index),
            f'(function () {{ "use strict"; return ({location.source} = ({_js(expr)}\n)); }})',
            f"<assign location={location.source!r}>", "assign",
        )
        record = self._assigns.get(location.index)
        if record is not None and record[0] == expr.index:
            self._assigns[location.index] = (record[0], function, *record[2:])
        return function

    def assign_value(self, location: Expr, value: Any) -> None:
        self._changed(impure=False)
        function = self._setters.get(location.index)
        if function is None:
            self._check_location(location)
            function = self._function(
                self._setters, location.index,
                f'(function (v) {{ "use strict"; {location.source} = v; }})',
                f"location {location.source!r}", "assign_value",
            )
        self._run_with("location", location.source, function, json.dumps(value))

    def _check_location(self, location: Expr) -> None:
        source = location.source.strip()
        head = source.split(".", 1)[0].split("[", 1)[0]
        if head in ("_event", "_sessionid", "_name", "_ioprocessors", "_x", "In"):
            raise DatamodelError(f"{source!r} is a read-only system variable")

    def run_script(self, script: Expr) -> None:
        self._changed(keys=True)
        source = script.source
        if self._guard is not None:
            self._guard()
        self._call_js("<script>", lambda: self._run_script(source))

    def foreach(
        self, array: Expr, item: Expr, index: Expr | None, body: Callable[[], bool]
    ) -> None:
        self._changed(keys=True)
        for name in (item, index):
            if name is not None and not self._call_js(
                "<foreach>", lambda n=name: self._is_identifier(n.source)
            ):
                raise DatamodelError(f"<foreach> {name.source!r} is not a legal variable name")
        what = f"<foreach array={array.source!r}>"
        array_fn = self._function(
            self._values, ("array", array.index),
            f"(function () {{ return ({_js(array)}\n); }})", what,
        )
        if self._guard is not None:
            self._guard()
        count = int(self._call_js(what, lambda: self._loop_begin(array_fn)))
        item_name = item.source
        index_name = index.source if index is not None else None
        try:
            for i in range(count):
                self._call_js("<foreach>", lambda i=i: self._loop_set(item_name, index_name, i))
                if not body():
                    break
        finally:
            self._call_js("<foreach>", self._loop_end)

    def snapshot(self) -> str:
        # The step is over: its event is not the next step's (a restored engine has none).
        self._pending_event = None
        if self._event_pushed:
            self._event_stale = True  # cleared before the next step's first evaluation
            self._prepare = True
        if self._dirty:
            self._check_open()
            if self._pending:
                self._open()
            if self._unsynced:
                try:
                    self._sync()
                except _JS_ERRORS as exc:
                    raise self._snapshot_error(exc) from None
            refresh, self._keys_dirty = self._keys_dirty, False
            # Reads the globals only (no chart code runs), so the configuration and _event
            # are not pushed for it. When a value would not come back from a restore as it
            # is, the sandbox has already replaced it with what would (see sandbox.js).
            try:
                marked = str(self._snapshot(refresh))
            except _JS_ERRORS as exc:
                raise self._snapshot_error(exc) from None
            self._hooks = marked[0] == "h"
            self._last_snapshot = self._as_restored(marked[1:])
            self._dirty = False
            self._mirror_stale = False
        elif self._mirror_stale:
            self._last_snapshot = "{" + ",".join(self._mirror_pieces.values()) + "}"
            self._mirror_stale = False
        return self._last_snapshot

    def _snapshot_error(self, exc: Exception) -> SnapshotLimitError:
        """Why the snapshot could not be taken, typed by the limit it met."""
        error = self._error("snapshot", exc)
        text = str(exc)
        limit_name: str
        limit: float
        if "interrupted" in text:
            limit_name, limit = "time_ms", self._time_limit_ms
        elif "out of memory" in text or error.reason.startswith("null was thrown"):
            limit_name, limit = "memory_bytes", self.limits.memory_bytes
        elif "nests more than" in text:
            limit_name, limit = "value_depth", MAX_VALUE_DEPTH
        else:
            limit_name, limit = "other", 0
        return SnapshotLimitError(str(error), error.reason, limit_name, limit)

    def _as_restored(self, text: str) -> str:
        """``text``, or the text this engine was restored from when both hold the same value.

        A host may hand back the snapshot re-encoded (Python writes ``1e-05`` where JSON.stringify
        writes ``0.00001``). Until the datamodel changes, its snapshot is the text it was given,
        so the step reports no change that the live engine would not report."""
        given = self._restored_text
        if given is None or text == given:
            return text
        if text == self._restored_as:
            return given
        if self._restored_as is None and _python_text(text) == _python_text(given):
            self._restored_as = text
            return given
        self._restored_text = self._restored_as = None  # changed: the engine's own text now
        return text

    def snapshot_value(self, snapshot: str) -> Any:
        mirror = self._mirror
        fresh = not self._dirty and not self._mirror_stale and snapshot == self._last_snapshot
        if mirror is not None and fresh:
            return dict(mirror)
        value = loads_snapshot(snapshot)
        if fresh and self._mirror_allowed and type(value) is dict:
            pieces: dict[str, str] = {}
            for name, item in value.items():
                piece = _piece(item)
                if piece is None or _IDENTIFIER.fullmatch(name) is None:
                    return value
                pieces[name] = f'"{name}":{piece}'
            self._mirror = dict(value)
            self._mirror_pieces = pieces
        return value

    def restore(self, snapshot: str) -> None:
        self._mirror = None
        self._unsynced.clear()  # (what the engine held is replaced)
        self._deferred = None
        self._check_open()
        scalars = None if self._scalars is None else self._scalar_snapshot(snapshot)
        engine: _Engine = self._engine  # type: ignore[assignment]
        if scalars is not None and engine.restorable.issuperset(scalars[0]):
            # Nothing the engine could refuse: restored when first needed (see _deferred).
            self._deferred = snapshot
            self._pending = self._prepare = True
            self._hooks = False  # (scalars hold no function)
        else:
            if self._pending:
                self._open()  # (the system variables first, as the engine expects)
            self._restore_engine(snapshot)
            if scalars is not None:
                engine.restorable.update(scalars[0])
        self._mirror_stale = False
        if scalars is not None and self._mirror_allowed:
            self._mirror = scalars[0]
            self._mirror_pieces = scalars[1]
        self._last_snapshot = self._restored_text = snapshot
        self._restored_as = None
        self._dirty = False
        self._keys_dirty = True

    def _restore_engine(self, snapshot: str) -> None:
        from statecharts.core.position import DamagedDatamodelError

        try:
            self._hooks = bool(self._restore(snapshot))
        except _JS_ERRORS as exc:
            raise DamagedDatamodelError(
                f"the datamodel snapshot cannot be restored: {self._error('restore', exc)}"
            ) from None

    def _restore_deferred(self) -> None:
        """Write the deferred snapshot into the engine (before anything else reaches it)."""
        snapshot = self._deferred
        assert snapshot is not None
        # (the restore's own answer is False, scalars; what an event set since is kept)
        hooks = self._hooks
        self._restore_engine(snapshot)  # (raises, and stays deferred, if the engine refuses)
        self._hooks = hooks
        self._deferred = None

    @staticmethod
    def _scalar_snapshot(snapshot: str) -> tuple[dict[str, Any], dict[str, str]] | None:
        """The snapshot's globals and their snapshot pieces when it holds scalars only (the
        mirror's kind of value), under plain identifiers, and is written exactly as the
        sandbox writes those values (so no number, escape or spacing reads differently in
        the engine); else None."""
        if len(snapshot) > _DEFERRABLE_BYTES or snapshot[:1] != "{":
            return None
        try:
            value = loads_snapshot(snapshot)
        except ValueError:
            return None  # (the engine's restore says why)
        if type(value) is not dict:
            return None
        pieces: dict[str, str] = {}
        prefixes = _prefixes
        for name, item in value.items():
            if type(item) is int and _MIN_SAFE_INT <= item <= _MAX_SAFE_INT:
                piece: str | None = str(item)  # (the commonest: a counter; what _piece writes)
            else:
                piece = _piece(item)
                if piece is None:
                    return None
            prefix = prefixes.get(name)
            if prefix is None:
                if _IDENTIFIER.fullmatch(name) is None:
                    return None
                if len(prefixes) >= _MAX_PREFIXES:
                    prefixes.clear()
                prefix = prefixes[name] = f'"{name}":'
            pieces[name] = prefix + piece
        if "{" + ",".join(pieces.values()) + "}" != snapshot:
            return None
        return value, pieces

    def close(self) -> None:
        """Done with this session: its engine is reset and kept for the next session the
        thread starts or restores. This object can no longer be used."""
        self._values.clear()
        self._conds.clear()
        self._pure_conds.clear()
        self._assigns.clear()
        self._assign_functions.clear()
        self._setters.clear()
        self._mirror = None  # (nothing is answered from it any more)
        self._unsynced.clear()
        self._deferred = self._system = None  # (the engine is reset anyway, if it was used)
        engine, self._engine = self._engine, None
        self._prepare = True  # (the next evaluation finds it closed)
        if engine is not None:
            _give_back(engine, self._opened)

    def _check_open(self) -> None:
        if self._engine is None:
            raise DatamodelError("this datamodel was closed (its engine serves another session)")


def _python_text(snapshot: str) -> str:
    """A snapshot as Python writes it: equal for two texts of the same values in the same
    order (key order is part of a datamodel), whatever each writer does with numbers."""
    return json.dumps(loads_snapshot(snapshot), separators=(",", ":"), ensure_ascii=False)


def _js(expr: Expr) -> str:
    """An expression as written, minus trailing semicolons (``expr="new Foo();"`` is common)."""
    return expr.source.strip().rstrip(";").rstrip()
