"""The null datamodel (spec B.1): no data, and ``In('state')`` as the only expression."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from statecharts.core.datamodel.base import Datamodel
from statecharts.core.errors import DatamodelError
from statecharts.core.model import Data, Expr

_IN = re.compile(r"""^\s*In\(\s*(?:'([^']*)'|"([^"]*)")\s*\)\s*$""")


def parse_in_predicate(text: str) -> str | None:
    match = _IN.match(text)
    if not match:
        return None
    return match.group(1) if match.group(1) is not None else match.group(2)


class NullDatamodel(Datamodel):
    name = "null"

    def __init__(self) -> None:
        self._in_state: Callable[[str], bool] = lambda _id: False
        self._conds: dict[int, str | None] = {}

    def bind_system(
        self,
        session_id: str,
        name: str | None,
        ioprocessors: dict[str, Any],
        in_state: Callable[[str], bool],
        active_ids: Callable[[], list[str]],
        platform: dict[str, Any] | None = None,
    ) -> None:
        self._in_state = in_state  # (no expressions: nothing can read ``_x``)

    def declare(self, data: Data, *, bind: bool) -> None:
        raise DatamodelError("the null datamodel has no data")

    def declare_value(self, name: str, value: Any) -> None:
        raise DatamodelError("the null datamodel has no data")

    def bind(self, data: Data) -> None:
        raise DatamodelError("the null datamodel has no data")

    def set_event(self, event: dict[str, Any]) -> None:
        pass

    def evaluate(self, expr: Expr) -> Any:
        raise DatamodelError(f"the null datamodel cannot evaluate {expr.source!r}")

    def evaluate_cond(self, expr: Expr) -> bool:
        state_id = self._conds.get(expr.index, "")
        if state_id == "":
            state_id = self._conds[expr.index] = parse_in_predicate(expr.source)
        if state_id is None:
            raise DatamodelError(
                f"the null datamodel only understands In('id'), not {expr.source!r}"
            )
        return self._in_state(state_id)

    def assign(self, location: Expr, expr: Expr) -> None:
        raise DatamodelError("the null datamodel has no locations")

    def assign_value(self, location: Expr, value: Any) -> None:
        raise DatamodelError("the null datamodel has no locations")

    def run_script(self, script: Expr) -> None:
        raise DatamodelError("the null datamodel cannot run scripts")

    def foreach(
        self, array: Expr, item: Expr, index: Expr | None, body: Callable[[], bool]
    ) -> None:
        raise DatamodelError("the null datamodel cannot iterate")

    def snapshot(self) -> str:
        return "{}"

    def restore(self, snapshot: str) -> None:
        pass
