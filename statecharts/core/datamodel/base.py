"""The datamodel interface the interpreter talks to (spec 5: data, expressions, locations).

Values that cross it are JSON-compatible Python values in the *tagged encoding*: plain JSON,
plus ``{"$sc": "<tag>", ...}`` objects for what JSON cannot hold (``undefined``, ``NaN``,
functions, XML, shared or cyclic references). See docs/embedding.md, "Datamodel values".
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from statecharts.core.model import Data, Expr, XmlValue

TAG = "$sc"
UNDEFINED: dict[str, str] = {TAG: "undefined"}


@dataclass(frozen=True, slots=True)
class Limits:
    """Caps on every single evaluation: a runaway expression becomes error.execution."""

    time_ms: int = 500
    memory_bytes: int = 64 * 1024 * 1024
    stack_bytes: int = 256 * 1024


def tagged(value: Any) -> Any:
    """Literal values from the document (XmlValue) into the tagged encoding."""
    if isinstance(value, XmlValue):
        return {TAG: "xml", "v": value.markup, "tree": value.tree}
    return value


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
    ) -> None: ...

    def configuration_changed(self) -> None:  # noqa: B027 - optional hook
        """The interpreter entered or exited a state (In() must see the new configuration)."""

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

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release engine resources."""
