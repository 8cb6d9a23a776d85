"""The datamodel interface the interpreter talks to (spec 5: data, expressions, locations).

Values that cross it are JSON-compatible Python values in the *tagged encoding*: plain JSON,
plus ``{"$sc": "<tag>", ...}`` objects for what JSON cannot hold (``undefined``, ``NaN``,
functions, XML, shared or cyclic references). See docs/embedding.md, "Datamodel values".
"""

from __future__ import annotations

import json
import json.scanner
import math
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from statecharts.core.errors import DatamodelError
from statecharts.core.model import Data, Expr, UnreadableValue, XmlValue

TAG = "$sc"
UNDEFINED: dict[str, str] = {TAG: "undefined"}

# How deep a datamodel value may nest, counted in JSON levels of its tagged encoding: a
# snapshot or a value leaving the sandbox that nests deeper is refused (error.execution, or
# the step is rolled back as over a budget when its snapshot cannot be taken), and a position
# holding one is refused when it is read. Far more than data needs; far less than what
# would exhaust the engine's stack (its default cap allows about 120 levels) or Python's
# recursion limit on the way back. Host data is held to the same bound (check_tagged).
MAX_VALUE_DEPTH = 100


@dataclass(frozen=True, slots=True)
class Limits:
    """Caps on every single evaluation: a runaway expression becomes error.execution."""

    time_ms: int = 500
    memory_bytes: int = 64 * 1024 * 1024
    stack_bytes: int = 256 * 1024


def tagged(value: Any) -> Any:
    """Literal values from the document (XmlValue) into the tagged encoding. An
    UnreadableValue (a body too deep to hold) is a DatamodelError: error.execution."""
    if isinstance(value, XmlValue):
        return {TAG: "xml", "v": value.markup, "tree": value.tree}
    if isinstance(value, UnreadableValue):
        raise DatamodelError(value.reason)
    return value


_scan_once = json.scanner.make_scanner(json.JSONDecoder())


def loads_snapshot(text: str) -> Any:
    """``json.loads(text)`` without its two Python-level wrappers (snapshot texts are compact
    JSON objects); anything unusual (leading or trailing whitespace, an error) goes the long
    way, so the result and the errors are json.loads's own."""
    try:
        value, end = _scan_once(text, 0)
    except StopIteration:
        return json.loads(text)
    if end != len(text):
        return json.loads(text)
    return value


_BIGINT = re.compile(r"-?[0-9]+")


def check_tagged(value: Any, where: str = "data", depth: int = 0) -> None:
    """Refuse a value a host passes in (event or start data) that the datamodel could not
    decode: a malformed ``$sc`` tag, a non-finite float, absurd nesting. Raises ValueError
    naming the path, so a bad input is refused before it reaches (and stops) a chart."""
    if depth >= MAX_VALUE_DEPTH:
        raise ValueError(f"{where}: nested more than {MAX_VALUE_DEPTH} levels deep")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(
                f'{where}: {value} is not a finite number (send {{"{TAG}": "number", "v": '
                f'"{"NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")}"}})'
            )
        return
    if value is None or isinstance(value, str | bool | int):
        return
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            check_tagged(item, f"{where}[{i}]", depth + 1)
        return
    if not isinstance(value, dict):
        raise ValueError(f"{where}: {type(value).__name__} is not a JSON value")
    for key in value:
        if not isinstance(key, str):
            raise ValueError(f"{where}: key {key!r} is not a string")
    tag = value.get(TAG)
    if tag is None:
        for key, item in value.items():
            check_tagged(item, f"{where}.{key}", depth + 1)
        return
    problem = _tag_problem(tag, value)
    if problem is not None:
        raise ValueError(f"{where}: malformed {TAG!r} value ({problem})")
    if tag == "object":
        for key, item in value["v"].items():
            check_tagged(item, f"{where}.{key}", depth + 1)
    elif tag in ("map", "set"):
        check_tagged(value["v"], f"{where}.v", depth + 1)


def _tag_problem(tag: Any, value: dict[str, Any]) -> str | None:
    v = value.get("v")
    if tag == "undefined":
        return None
    if tag == "number":
        ok = isinstance(v, str) and (v in ("NaN", "Infinity", "-Infinity") or _is_number(v))
        return None if ok else "v must be 'NaN', 'Infinity' or '-Infinity'"
    if tag == "bigint":
        return None if isinstance(v, str) and _BIGINT.fullmatch(v) else "v must be an integer"
    if tag == "date":
        ok = v is None or (isinstance(v, int | float) and not isinstance(v, bool))
        return None if ok else "v must be milliseconds since the epoch"
    if tag == "object":
        return None if isinstance(v, dict) else "v must be an object"
    if tag in ("map", "set"):
        if not isinstance(v, list):
            return "v must be a list"
        if tag == "map" and not all(isinstance(p, list) and len(p) == 2 for p in v):
            return "v must be a list of [key, value] pairs"
        return None
    if tag == "function":
        return None if isinstance(value.get("source"), str) else "source must be a string"
    if tag == "regexp":
        ok = isinstance(value.get("source"), str) and isinstance(value.get("flags"), str)
        return None if ok else "source and flags must be strings"
    if tag == "xml":
        return None if isinstance(v, str) else "v must be a string"
    if tag == "ref":
        return None if isinstance(value.get("path"), list) else "path must be a list"
    return f"unknown tag {tag!r}"


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def plain(value: Any) -> Any:
    """The tagged encoding as natural Python values, for logs and hosts (lossy by design)."""
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        tag = value.get(TAG)
        if tag is None:
            return {k: plain(v) for k, v in value.items()}
        if tag == "undefined":
            return None
        if tag == "number":
            return float(value["v"])
        if tag == "object":
            return {k: plain(v) for k, v in value["v"].items()}
        if tag in ("xml", "bigint", "date"):
            return value["v"]
        if tag == "function":
            return value["source"]
        return value
    return value


class Datamodel(ABC):
    """One live datamodel instance, bound to one session's interpreter."""

    name: str

    @abstractmethod
    def bind_system(
        self,
        session_id: str,
        name: str | None,
        ioprocessors: dict[str, Any],
        in_state: Callable[[str], bool],
        active_ids: Callable[[], list[str]],
        platform: dict[str, Any] | None = None,
    ) -> None:
        """The session's system variables; ``platform`` is ``_x`` (SCXML 5.10 leaves it to the
        platform: ``{"chart": {...}}``, ``statecharts.core.host.Host.chart``), read-only."""

    def configuration_changed(self) -> None:  # noqa: B027 - optional hook
        """The interpreter entered or exited a state (In() must see the new configuration)."""

    def use_scalar_programs(self, programs: dict[int, Any] | None) -> None:  # noqa: B027
        """A table (expression index -> compiled form, kept by the interpreter's
        accelerator) in which the datamodel may keep expressions it can answer without its
        engine; None (the accelerator off): every expression runs in the engine. Either way
        the answers are the same. A datamodel with no such shortcut ignores it."""

    def configuration_unused(self) -> None:  # noqa: B027 - optional hook
        """No code of the chart mentions ``In``: the configuration need not be tracked. The
        interpreter calls it right after ``bind_system``, and from then on no longer calls
        :meth:`configuration_changed` for each state it enters or exits."""

    @abstractmethod
    def declare(self, data: Data, *, bind: bool) -> None:
        """Create ``data.id``; with ``bind`` also give it its value. Raises DatamodelError."""

    @abstractmethod
    def declare_value(self, name: str, value: Any) -> None:
        """Create ``name`` with a value given by the host (invoke params override data)."""

    @abstractmethod
    def bind(self, data: Data) -> None:
        """Late binding: assign the value of an already declared ``data``."""

    @abstractmethod
    def set_event(self, event: dict[str, Any]) -> None: ...

    @abstractmethod
    def evaluate(self, expr: Expr) -> Any:
        """The value of ``expr`` in the tagged encoding. Raises DatamodelError."""

    @abstractmethod
    def evaluate_cond(self, expr: Expr) -> bool: ...

    @abstractmethod
    def assign(self, location: Expr, expr: Expr) -> None: ...

    @abstractmethod
    def assign_value(self, location: Expr, value: Any) -> None: ...

    @abstractmethod
    def run_script(self, script: Expr) -> None: ...

    @abstractmethod
    def foreach(
        self, array: Expr, item: Expr, index: Expr | None, body: Callable[[], bool]
    ) -> None:
        """Iterate a shallow copy of ``array``; ``body`` returns False to stop (on error)."""

    @abstractmethod
    def snapshot(self) -> str:
        """The whole datamodel as canonical JSON text (tagged encoding)."""

    @abstractmethod
    def restore(self, snapshot: str) -> None: ...

    def snapshot_value(self, snapshot: str) -> Any:
        """The value of ``snapshot`` (the text :meth:`snapshot` just returned), as a new
        object the caller may keep: what the ``datamodel_change`` effect carries."""
        return loads_snapshot(snapshot)

    def set_evaluation_time_limit(self, time_ms: float | None) -> None:  # noqa: B027
        """Cap the following evaluations at ``time_ms`` (None: the datamodel's own limit).
        A datamodel whose evaluations cannot run long (null) ignores it."""

    def set_evaluation_guard(self, guard: Callable[[], None] | None) -> None:  # noqa: B027
        """Call ``guard()`` before every evaluation of chart code (None: no guard). The seam
        for a per-step time budget: the guard reads the step's clock, raises when the step is
        over its budget (the exception leaves the datamodel untouched: it is not chart code's
        failure), and otherwise may lower the evaluation's time limit to what is left
        (:meth:`set_evaluation_time_limit`). A datamodel that runs no code (null) ignores it."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release engine resources."""
