"""Compiling ECMAScript chart code without running it: the load-time syntax check.

Each text is compiled the way the datamodel compiles it at run time (inside the same
wrapper: a value expression as ``return (...)``, a location as the left-hand side of an
assignment, a ``<script>`` as global code), in a throwaway QuickJS context, behind a
``throw`` statement: an engine parses a whole script before it runs any of it, so a syntax
error is reported and nothing of the chart's text ever runs (not even text written to close
the wrapper early: it would only run after the ``throw``).

An expression or a location is also compiled alone inside brackets (``[text]``): a text
written to close its wrapper (``0); evil(); (0``) compiles inside the wrapper but not there,
and is reported as "not a single expression" (what the datamodel refuses it with when it
runs). What this cannot catch is what only fails when evaluated (an undefined variable, a
type error): that is ``error.execution`` at run time.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterable
from enum import StrEnum

import quickjs


class CodeKind(StrEnum):
    """How the datamodel compiles a text (the wrappers of ``EcmascriptDatamodel``)."""

    VALUE = "value"  # expr, cond, array, eventexpr, delayexpr, ...: an expression's value
    LOCATION = "location"  # location, idlocation: assigned to
    SCRIPT = "script"  # a <script> body: global code


# Each text's verdict is kept (texts repeat across charts and loads); bounded in count, and
# only short texts are kept (a long <script> is checked again: one compile, no memory kept).
_MAX_VERDICTS = 16_384
_MAX_KEPT_TEXT = 4096
_verdicts: dict[tuple[CodeKind, str], SyntaxProblem | None] = {}
_lock = threading.Lock()
_GUARD = "throw 0;\n"  # runs first: nothing after it runs
_CLOSERS = re.compile(r"[)}]")


class SyntaxProblem:
    """A syntax error: the engine's message, and where in the text (1-based; 0: unknown)."""

    __slots__ = ("column", "line", "message")

    def __init__(self, message: str, line: int, column: int) -> None:
        self.message = message
        self.line = line
        self.column = column

    def __repr__(self) -> str:
        return f"SyntaxProblem({self.message!r}, {self.line}, {self.column})"


def _wrapped(kind: CodeKind, source: str) -> tuple[str, int]:
    """The text the engine compiles for ``source``, and on which of its lines ``source``
    starts (after the guard)."""
    if kind is CodeKind.SCRIPT:
        return _GUARD + source, 2
    if kind is CodeKind.LOCATION:
        return _GUARD + f'(function (v) {{ "use strict"; {source.strip()} = v; }})', 2
    text = source.strip().rstrip(";").rstrip()  # as the datamodel strips it (_js)
    return _GUARD + f"(function () {{ return ({text}\n); }})", 2


def _problem(exc: Exception, first_line: int) -> SyntaxProblem | None:
    text = str(exc)
    head, _, rest = text.partition("\n")
    if head == "0":
        return None  # the guard's own throw: the text compiled
    message = head.removeprefix("SyntaxError: ")
    line = column = 0
    marker = rest.rfind(":", 0, rest.rfind(":"))
    if marker >= 0:
        try:
            where_line, where_column = rest[marker + 1 :].strip().split(":")[:2]
            line = max(int(where_line) - first_line + 1, 1)
            column = int(where_column)
        except ValueError:
            line = column = 0
    return SyntaxProblem(message, line, column)


def _compile(context: quickjs.Context, text: str, first_line: int) -> SyntaxProblem | None:
    try:
        context.eval(text)
    except quickjs.JSException as exc:
        return _problem(exc, first_line)
    except (quickjs.StackOverflow, TypeError, UnicodeError) as exc:
        return SyntaxProblem(f"cannot be compiled ({str(exc).splitlines()[0]})", 0, 0)
    return SyntaxProblem("compiled to something other than a function", 0, 0)  # unreachable


def check_syntax(
    texts: Iterable[tuple[CodeKind, str]], *, time_budget_s: float = 5.0
) -> list[SyntaxProblem | None] | None:
    """For each ``(kind, text)``, its syntax error or None. One throwaway context for all of
    them; a total ``time_budget_s`` bounds a pathological document (parsing runs no chart
    code, but a 2 MB text of nested brackets still takes a while): None if it ran out, so
    the caller can say the check was incomplete."""
    items = list(texts)
    results: list[SyntaxProblem | None] = []
    context: quickjs.Context | None = None
    started = time.monotonic()
    for kind, source in items:
        key = (kind, source)
        with _lock:
            known = _verdicts.get(key, False)
        if known is not False:
            results.append(known)  # type: ignore[arg-type]
            continue
        if time.monotonic() - started > time_budget_s:
            return None
        if context is None:
            context = quickjs.Context()
            context.set_memory_limit(64 * 1024 * 1024)
            context.set_max_stack_size(1024 * 1024)
            context.set_time_limit(time_budget_s)
        wrapped, first_line = _wrapped(kind, source)
        verdict = _compile(context, wrapped, first_line)
        # A text can only leave its wrapper by closing it: one without ")" or "}" cannot.
        if verdict is None and kind is not CodeKind.SCRIPT and _CLOSERS.search(source):
            alone = _GUARD + "[" + source.strip().rstrip(";").rstrip() + "\n]"
            if _compile(context, alone, 2) is not None:
                verdict = SyntaxProblem("not a single expression", 0, 0)
        if len(source) <= _MAX_KEPT_TEXT:
            with _lock:
                if len(_verdicts) >= _MAX_VERDICTS:
                    _verdicts.clear()
                _verdicts[key] = verdict
        results.append(verdict)
    return results
