"""The ECMAScript datamodel (spec B.2) in a sandboxed QuickJS context.

One QuickJS context per live interpreter. Every call into it runs under a time limit and
the context under a memory cap: ``while(true){}`` or a memory bomb raises DatamodelError
(hence ``error.execution``) and the context stays usable. Expressions are compiled to JS
functions once per context and cached by expression index.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from importlib import resources
from typing import Any

import quickjs

from statecharts.core.datamodel.base import Datamodel, Limits, loads_snapshot, tagged
from statecharts.core.errors import DatamodelError
from statecharts.core.model import Data, Expr

_SANDBOX = resources.files("statecharts.core.datamodel").joinpath("sandbox.js").read_text()
# The prelude evaluates to a function taking the codec's source, which it compiles on first use.
_PRELUDE, _CODEC = _SANDBOX.split("\n// ==== codec: compiled on first use (loadCodec above) ====\n")
_JS_ERRORS = (quickjs.JSException, quickjs.StackOverflow)

# An expression that cannot change the datamodel: no assignment, ++/--, delete, new, or call
# other than In(), no tagged template. Evaluating one leaves the last snapshot valid, so it
# is not retaken. (A getter or valueOf with side effects defeats this: see docs/embedding.md.)
_IMPURE = re.compile(r"(?<![=!<>])=(?!=)|\+\+|--|\bdelete\b|\bnew\b|`|(?<!\bIn)\s*\(")


def _is_pure(source: str) -> bool:
    return _IMPURE.search(source) is None


_MAX_SAFE_INT = 2**53 - 1
_ESCAPED = re.compile(r'["\\]')  # what JSON.stringify escapes in printable ASCII
_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")


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

# Compiled chart functions take the configuration text for In() as their first parameter
# (null when unchanged) and install it before running the chart's code.
_CFG = "__sc$configuration"
_PUSH = f"if ({_CFG} != null) __sc.setConfiguration({_CFG});"
_WHAT = {
    "expression": "expression {!r}",
    "condition": "condition {!r}",
    "assign": "<assign location={!r}>",
    "location": "location {!r}",
}


class EcmascriptDatamodel(Datamodel):
    name = "ecmascript"

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self.context = quickjs.Context()
        self.context.set_memory_limit(self.limits.memory_bytes)
        self.context.set_max_stack_size(self.limits.stack_bytes)
        self.context.set_time_limit(self.limits.time_ms / 1000)
        # The binding refuses calls from JS into Python while a time limit is set, so
        # nothing the sandbox needs lives in Python: In() reads a copy of the configuration
        # pushed before each evaluation, and XML arrives already parsed.
        self._active_ids: Callable[[], list[str]] = list
        self._set_configuration: Any = None
        self._configuration_dirty = True
        self._ids_texts: dict[int, tuple[list[str], str]] = {}
        self._pending_event: tuple[Any, ...] | None = None
        self._dirty = True  # the datamodel may differ from self._last_snapshot
        self._keys_dirty = True  # a new global may exist: the snapshot must look for it
        self._last_snapshot = "{}"
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
        self._mirror_allowed = True  # False once impure code ran (it may have left getters)
        self._assign_names: dict[tuple[int, int], str | None] = {}
        self._call_js("prelude", lambda: self.context.eval(_PRELUDE)(_CODEC))
        self._values: dict[int, Any] = {}
        self._conds: dict[int, Any] = {}
        self._pure_conds: dict[int, Any] = {}
        self._assigns: dict[tuple[int, int], Any] = {}
        self._setters: dict[int, Any] = {}
        self._sc = self.context.get("__sc")
        self._set_event = self.context.eval(
            "(function (n, t, s, o, ot, i, d) { __sc.setEvent(n, t, s, o, ot, i, d); })"
        )
        self._declare = self.context.eval("(function (n, t) { __sc.declare(n, t); })")
        self._loop_begin = self.context.eval("(function (f) { return __sc.loopBegin(f()); })")
        self._loop_end = self.context.eval("(function () { __sc.loopEnd(); })")
        self._snapshot = self.context.eval("(function (r) { return __sc.snapshot(r); })")
        self._restore = self.context.eval("(function (t) { __sc.restore(t); })")
        self._is_identifier = self.context.eval("(function (n) { return __sc.isIdentifier(n); })")

    # -- plumbing --------------------------------------------------------------------------

    def configuration_changed(self) -> None:
        self._configuration_dirty = True

    def configuration_unused(self) -> None:
        self._set_configuration = None  # In() then sees no active state

    def _call_js(self, what: str, call: Callable[[], Any]) -> Any:
        if self._configuration_dirty and self._set_configuration is not None:
            self._configuration_dirty = False
            self._set_configuration(" ".join(self._active_ids()))
        if self._pending_event is not None:
            pending, self._pending_event = self._pending_event, None
            self._set_event(*pending)
        try:
            return call()
        except _JS_ERRORS as exc:
            raise self._error(what, exc) from None

    def _run(self, kind: str, source: str, function: Any, *args: Any) -> Any:
        """Call a compiled chart function: ``function(configuration, *args)``.

        The configuration rides along as the first argument (the text for In(), or None when
        the sandbox already has it), saving a round trip into QuickJS per change.
        """
        configuration = None
        if self._configuration_dirty and self._set_configuration is not None:
            self._configuration_dirty = False
            ids = self._active_ids()
            # The same list object comes back for the same configuration: its text is kept
            # (with the list, so that its id stays its own).
            seen = self._ids_texts.get(id(ids))
            if seen is None or seen[0] is not ids:
                if len(self._ids_texts) >= 256:
                    self._ids_texts.clear()
                seen = self._ids_texts[id(ids)] = (ids, " ".join(ids))
            configuration = seen[1]
        if self._pending_event is not None:
            pending, self._pending_event = self._pending_event, None
            self._set_event(*pending)
        try:
            return function(configuration, *args)
        except _JS_ERRORS as exc:
            raise self._error(_WHAT[kind].format(source), exc) from None

    def _error(self, what: str, exc: Exception) -> DatamodelError:
        message = str(exc).split("\n", 1)[0]
        if "interrupted" in message:
            message = f"evaluation exceeded the {self.limits.time_ms} ms time limit"
        elif "out of memory" in message:
            message = f"evaluation exceeded the {self.limits.memory_bytes} byte memory cap"
        return DatamodelError(f"{what}: {message}")

    def _compile(self, cache: dict[Any, Any], key: Any, code: str, what: str) -> Any:
        function = cache.get(key)
        if function is None:
            function = self._call_js(what, lambda: self.context.eval(code))
            cache[key] = function
        return function

    def _from_js(self, result: Any) -> Any:
        if isinstance(result, quickjs.Object):
            return json.loads(json.loads(result.json())[0])
        if isinstance(result, float) and result.is_integer() and abs(result) <= _MAX_SAFE_INT:
            # JavaScript has one number type; an integral value reads back as int, as it
            # does through JSON (JSON.stringify(3.0) is "3").
            return int(result)
        return result

    # -- interface -------------------------------------------------------------------------

    def bind_system(
        self,
        session_id: str,
        name: str | None,
        ioprocessors: dict[str, Any],
        in_state: Callable[[str], bool],
        active_ids: Callable[[], list[str]],
    ) -> None:
        self._active_ids = active_ids
        self._set_configuration = self.context.eval("(function (t) { __sc.setConfiguration(t); })")
        install = self.context.eval(
            """(function (sid, name, io) {
                const g = globalThis;
                const ro = (k, v) => Object.defineProperty(g, k, {value: v, writable: false,
                                                           enumerable: false, configurable: false});
                ro("_sessionid", sid);
                ro("_name", name);
                const deepFreeze = (o) => { Object.values(o).forEach((v) => {
                    if (v && typeof v === "object") deepFreeze(v); }); return Object.freeze(o); };
                ro("_ioprocessors", deepFreeze(JSON.parse(io)));
                ro("In", function In(id) { return __sc.isActive(id); });
                __sc.baseline = new Set(Object.keys(g));
            })"""
        )
        install(session_id, name, json.dumps(ioprocessors))

    def declare(self, data: Data, *, bind: bool) -> None:
        self._dirty = self._keys_dirty = True
        self._mirror = None
        self._declare(data.id, None)
        if bind:
            self.bind(data)

    def declare_value(self, name: str, value: Any) -> None:
        self._dirty = self._keys_dirty = True
        self._mirror = None
        self._declare(name, json.dumps(value))

    def bind(self, data: Data) -> None:
        self._dirty = self._keys_dirty = True
        self._mirror = None
        if data.expr is not None:
            if not _is_pure(data.expr.source):
                self._mirror_allowed = False
            value_fn = self._compile(
                self._values,
                ("data", data.expr.index),
                f"(function () {{ globalThis[{json.dumps(data.id)}] = ({_js(data.expr)}\n); }})",
                f"<data id={data.id!r}>",
            )
            self._call_js(f"<data id={data.id!r}>", value_fn)
        elif data.has_body:
            self._declare(data.id, json.dumps(tagged(data.body)))
        elif data.src is not None:
            raise DatamodelError(f"<data id={data.id!r}> could not load {data.src!r}")

    def set_event(self, event: dict[str, Any]) -> None:
        # Pushed into the sandbox lazily, just before the next evaluation that could read it.
        data = event["data"]
        self._pending_event = (
            event["name"],
            event["type"],
            event["sendid"],
            event["origin"],
            event["origintype"],
            event["invokeid"],
            None if data is None else json.dumps(data),
        )

    def _mark(self, expr: Expr) -> None:
        pure = self._pure.get(expr.index)
        if pure is None:
            pure = self._pure[expr.index] = _is_pure(expr.source)
        if not pure:
            self._dirty = self._keys_dirty = True
            self._mirror_allowed = False
            self._mirror = None

    def evaluate(self, expr: Expr) -> Any:
        self._mark(expr)
        function = self._values.get(expr.index)
        if function is None:
            function = self._compile(
                self._values,
                expr.index,
                f"(function ({_CFG}) {{ {_PUSH} const r = ({_js(expr)}\n); "
                # A long string made by concatenation is a rope, which the binding cannot
                # read: joining flattens it.
                f"if (typeof r === 'string') return r.length < 256 ? r : [r].join(''); "
                f"return (r === null || typeof r === 'boolean' || (typeof r === 'number' "
                f"&& isFinite(r))) ? r : [__sc.encodeValue(r)]; }})",
                f"expression {expr.source!r}",
            )
        return self._from_js(self._run("expression", expr.source, function))

    def evaluate_cond(self, expr: Expr) -> bool:
        function = self._pure_conds.get(expr.index)  # (a pure one has nothing to mark)
        if function is None:
            self._mark(expr)
            function = self._conds.get(expr.index)
            if function is None:
                function = self._compile(
                    self._conds,
                    expr.index,
                    f"(function ({_CFG}) {{ {_PUSH} return !!({_js(expr)}\n); }})",
                    f"condition {expr.source!r}",
                )
            if self._pure[expr.index]:
                self._pure_conds[expr.index] = function
        return bool(self._run("condition", expr.source, function))

    def assign(self, location: Expr, expr: Expr) -> None:
        key = (location.index, expr.index)
        function = self._assigns.get(key)
        if function is None:
            self._check_location(location)
            # The assigned value comes back when it is a primitive the mirror can hold.
            function = self._compile(
                self._assigns,
                key,
                f'(function ({_CFG}) {{ "use strict"; {_PUSH} const v = ({location.source} = '
                f"({_js(expr)}\n)); const t = typeof v; return (t === 'number' || "
                "t === 'boolean' || (t === 'string' && v.length < 256)) ? v : undefined; })",
                f"<assign location={location.source!r}>",
            )
            name = location.source.strip()
            pure = _is_pure(expr.source)
            if not pure:
                self._mirror_allowed = False
                self._mirror = None
            self._assign_names[key] = (
                name if pure and _IDENTIFIER.fullmatch(name) is not None else None
            )
        mirror = self._mirror
        name = self._assign_names[key]
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
        if type(value) is float and value.is_integer() and abs(value) <= _MAX_SAFE_INT:
            value = int(value)
        piece = None if value is None else _piece(value)
        if piece is None:
            self._dirty = True
            self._mirror = None
            return
        mirror[name] = value
        self._mirror_pieces[name] = f'"{name}":{piece}'
        self._mirror_stale = True

    def assign_value(self, location: Expr, value: Any) -> None:
        self._dirty = True
        self._mirror = None
        function = self._setters.get(location.index)
        if function is None:
            self._check_location(location)
            function = self._compile(
                self._setters,
                location.index,
                f'(function ({_CFG}, t) {{ "use strict"; {_PUSH} {location.source} = '
                "__sc.decodeValue(t); })",
                f"location {location.source!r}",
            )
        self._run("location", location.source, function, json.dumps(value))

    def _check_location(self, location: Expr) -> None:
        source = location.source.strip()
        head = source.split(".", 1)[0].split("[", 1)[0]
        if head in ("_event", "_sessionid", "_name", "_ioprocessors", "In", "__sc"):
            raise DatamodelError(f"{source!r} is a read-only system variable")

    def run_script(self, script: Expr) -> None:
        self._dirty = self._keys_dirty = True
        self._mirror_allowed = False
        self._mirror = None
        self._call_js("<script>", lambda: self.context.eval(script.source))

    def foreach(
        self, array: Expr, item: Expr, index: Expr | None, body: Callable[[], bool]
    ) -> None:
        self._dirty = self._keys_dirty = True
        self._mirror_allowed = False
        self._mirror = None
        for name in (item, index):
            if name is not None and not self._is_identifier(name.source):
                raise DatamodelError(f"<foreach> {name.source!r} is not a legal variable name")
        array_fn = self._compile(
            self._values,
            ("array", array.index),
            f"(function () {{ return ({_js(array)}\n); }})",
            f"<foreach array={array.source!r}>",
        )
        count = self._call_js(
            f"<foreach array={array.source!r}>", lambda: self._loop_begin(array_fn)
        )
        setter = self._compile(
            self._setters,
            ("loop", item.index, index.index if index else -1),
            f"(function (i) {{ globalThis[{json.dumps(item.source)}] = __sc.loopItem(i); "
            + (f"globalThis[{json.dumps(index.source)}] = i;" if index else "")
            + " })",
            "<foreach>",
        )
        try:
            for i in range(int(count)):
                setter(i)
                if not body():
                    break
        finally:
            self._loop_end()

    def snapshot(self) -> str:
        if self._dirty:
            refresh, self._keys_dirty = self._keys_dirty, False
            # Reads the globals only (no chart code runs), so the configuration and _event
            # are not pushed for it.
            try:
                self._last_snapshot = str(self._snapshot(refresh))
            except _JS_ERRORS as exc:
                raise self._error("snapshot", exc) from None
            self._dirty = False
            self._mirror_stale = False
        elif self._mirror_stale:
            self._last_snapshot = "{" + ",".join(self._mirror_pieces.values()) + "}"
            self._mirror_stale = False
        return self._last_snapshot

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
        self._call_js("restore", lambda: self._restore(snapshot))
        self._last_snapshot = snapshot
        self._dirty = False
        self._keys_dirty = True

    def close(self) -> None:
        self._values.clear()
        self._conds.clear()
        self._pure_conds.clear()
        self._assigns.clear()
        self._setters.clear()


def _js(expr: Expr) -> str:
    """An expression as written, minus trailing semicolons (``expr="new Foo();"`` is common)."""
    return expr.source.strip().rstrip(";").rstrip()
