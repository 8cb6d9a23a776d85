"""Chart expressions the ECMAScript datamodel can answer without crossing into QuickJS.

A guard such as ``count < 1000000000`` or an ``<assign expr="ticks + 1">`` costs a call into
the sandbox each time it runs (the binding releases the GIL, reads the process clock for the
time limit, converts the arguments and the result). While the datamodel's mirror holds every
global as a Python scalar (see ``EcmascriptDatamodel``), the expressions of a small subset of
the language can be worked out from the mirror instead, with ECMAScript's own results:

- integer literals (decimal, no leading zero, at most 2**53 - 1), ``true``, ``false``;
- identifiers (a global of the mirror);
- parentheses, ``!``, unary ``-`` and ``+``;
- ``*``, ``%``, ``+``, ``-``, ``<``, ``<=``, ``>``, ``>=``, ``==``, ``!=``, ``===``, ``!==``,
  ``&&``, ``||``, with the language's precedence and associativity.

Nothing else is in the subset: a text with any other token (a string, a call, ``In()``, a
member, a comment, a float, an assignment, ``++``) is not compiled here (``compile_scalar``
gives None) and always runs in QuickJS.

Guarantees:

- A compiled expression reads the mirror only and changes nothing; it runs no chart code.
- It returns exactly what QuickJS would return through the sandbox (an ``int`` for a
  number, a ``bool``), or raises ``NotScalar`` before returning anything when an operand or
  a result is outside what it handles exactly: a name the mirror does not hold, a value that
  is not a safe integer or a boolean, a result past 2**53 - 1, a negative zero (``-0``,
  ``0 * -1``, ``-4 % 2``), a remainder by zero. The caller then runs the same expression in
  QuickJS, whose answer (or error) is the reference. So the subset never answers
  differently from the sandbox; it only answers fewer questions.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping
from typing import Any

MAX_SAFE_INT = 2**53 - 1

Program = Callable[[Mapping[str, Any]], Any]


class NotScalar(Exception):
    """A value met while evaluating is outside the subset: run the expression in QuickJS."""


_NOT_SCALAR = NotScalar()

# Longest operators first, so that ``===`` is not read as ``==`` then ``=``. ``++``, ``--``,
# ``=`` alone and every other punctuator are not tokens of the subset (the text is refused).
_TOKEN = re.compile(
    r"(?:(?P<number>[0-9]+(?![0-9A-Za-z_$.]))|(?P<name>[A-Za-z_$][A-Za-z0-9_$]*)"
    r"|(?P<op>===|!==|==|!=|<=|>=|&&|\|\||\+\+|--|[-+*%<>!()]))"
)
# ECMAScript white space and line terminators of ASCII (any other character is refused).
_WHITESPACE = re.compile(r"[ \t\n\r\v\f]*")
_MAX_TOKENS = 128  # (a longer text is QuickJS's business: no deep closures here)
_REFUSED_OPS = frozenset({"++", "--"})
# Words that are not a global's name (keywords, literals the subset does not hold, and the
# non-writable globals a datamodel cannot hold).
_RESERVED_WORDS = (
    "break case catch class const continue debugger default delete do else export extends "
    "finally for function if import in instanceof new return super switch this throw try "
    "typeof var void while with yield let static enum await implements package protected "
    "interface private public null undefined NaN Infinity arguments eval async of get set In"
)
_RESERVED = frozenset(_RESERVED_WORDS.split())

# Binary operators by precedence level (lowest first), as ECMAScript groups them.
_LEVELS: tuple[frozenset[str], ...] = (
    frozenset({"||"}),
    frozenset({"&&"}),
    frozenset({"==", "!=", "===", "!=="}),
    frozenset({"<", "<=", ">", ">="}),
    frozenset({"+", "-"}),
    frozenset({"*", "%"}),
)


def _tokens(text: str) -> list[tuple[str, str]] | None:
    found: list[tuple[str, str]] = []
    position, end = 0, len(text)
    while True:
        position = _WHITESPACE.match(text, position).end()  # type: ignore[union-attr]
        if position == end:
            return found
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            return None
        kind = match.lastgroup
        value = match.group(kind)  # type: ignore[arg-type]
        if kind == "op" and value in _REFUSED_OPS:
            return None
        if kind == "number" and ((len(value) > 1 and value[0] == "0") or int(value) > MAX_SAFE_INT):
            return None  # (a leading zero is octal or an error; a big one is not exact)
        if kind == "name" and value in _RESERVED:
            return None
        found.append((kind, value))  # type: ignore[arg-type]
        if len(found) > _MAX_TOKENS:
            return None
        position = match.end()


# ---- evaluation: one closure per node --------------------------------------------------------
#
# A node is compiled to a closure of the mirror. A literal or a name is a *leaf*; an operator
# whose two operands are leaves reads them itself (the commonest shapes, ``count + 1``,
# ``consumed === count``, cost one call).

_ABSENT: Any = object()


class _Leaf:
    """A literal (``name`` None) or a name, as the parser found it."""

    __slots__ = ("name", "value")

    def __init__(self, name: str | None, value: Any = None) -> None:
        self.name = name
        self.value = value

    def program(self) -> Program:
        return _literal(self.value) if self.name is None else _name(self.name)


def _literal(value: Any) -> Program:
    return lambda mirror: value


def _name(name: str) -> Program:
    def read(mirror: Mapping[str, Any]) -> Any:
        value = mirror.get(name)
        kind = type(value)
        if kind is int or kind is bool:  # (the mirror holds only safe integers)
            return value
        raise _NOT_SCALAR  # absent, a string, null, a fraction: QuickJS decides

    return read


def _integers(a: Any, b: Any) -> None:
    if type(a) is not int or type(b) is not int:
        raise _NOT_SCALAR


def _safe(value: int) -> int:
    if -MAX_SAFE_INT <= value <= MAX_SAFE_INT:
        return value
    raise _NOT_SCALAR


def _remainder(a: int, b: int) -> int:
    # ECMAScript's %: the sign of the dividend; a zero remainder of a negative is -0.
    if b == 0:
        raise _NOT_SCALAR  # NaN
    r = abs(a) % abs(b)
    if a < 0:
        if r == 0:
            raise _NOT_SCALAR  # -0
        return -r
    return r


def _product(a: int, b: int) -> int:
    value = a * b
    if value == 0 and (a < 0 or b < 0):
        raise _NOT_SCALAR  # -0
    return _safe(value)


_ARITHMETIC: dict[str, Callable[[int, int], Any]] = {
    "+": lambda a, b: _safe(a + b),
    "-": lambda a, b: _safe(a - b),
    "*": _product,
    "%": _remainder,
}
# Relational and loose equality: booleans compare as the numbers 0 and 1 in both languages.
_COMPARISON: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
    "===": lambda a, b: type(a) is type(b) and a == b,
    "!==": lambda a, b: type(a) is not type(b) or a != b,
}
_STRICT = {"===": True, "!==": False}


def _leaves(op: str, left: _Leaf, right: _Leaf) -> Program:
    """``left op right`` for two leaves, reading the mirror itself."""
    left_name, left_value = left.name, left.value
    right_name, right_value = right.name, right.value
    strict = _STRICT.get(op)
    if strict is not None:  # === and !==

        def identical(mirror: Mapping[str, Any]) -> bool:
            a = left_value if left_name is None else mirror.get(left_name, _ABSENT)
            b = right_value if right_name is None else mirror.get(right_name, _ABSENT)
            kind = type(a)
            if (kind is int or kind is bool) and type(b) in _NUMERIC:
                return (kind is type(b) and a == b) is strict
            raise _NOT_SCALAR

        return identical
    compare = _COMPARISON.get(op)
    if compare is not None:

        def comparison(mirror: Mapping[str, Any]) -> bool:
            a = left_value if left_name is None else mirror.get(left_name, _ABSENT)
            b = right_value if right_name is None else mirror.get(right_name, _ABSENT)
            if type(a) in _NUMERIC and type(b) in _NUMERIC:
                return compare(a, b)  # type: ignore[no-any-return]
            raise _NOT_SCALAR

        return comparison
    if op == "+":

        def add(mirror: Mapping[str, Any]) -> int:
            a = left_value if left_name is None else mirror.get(left_name, _ABSENT)
            b = right_value if right_name is None else mirror.get(right_name, _ABSENT)
            if type(a) is int and type(b) is int:
                value = a + b
                if -MAX_SAFE_INT <= value <= MAX_SAFE_INT:
                    return value
            raise _NOT_SCALAR

        return add
    operate = _ARITHMETIC[op]

    def arithmetic(mirror: Mapping[str, Any]) -> int:
        a = left_value if left_name is None else mirror.get(left_name, _ABSENT)
        b = right_value if right_name is None else mirror.get(right_name, _ABSENT)
        if type(a) is int and type(b) is int:
            return operate(a, b)  # type: ignore[no-any-return]
        raise _NOT_SCALAR

    return arithmetic


_NUMERIC = frozenset({int, bool})  # (the mirror holds only safe integers)


def _binary(op: str, left: Program, right: Program) -> Program:
    if op == "&&":

        def both(mirror: Mapping[str, Any]) -> Any:
            a = left(mirror)
            return right(mirror) if a else a

        return both
    if op == "||":

        def either(mirror: Mapping[str, Any]) -> Any:
            a = left(mirror)
            return a if a else right(mirror)

        return either
    compare = _COMPARISON.get(op)
    if compare is not None:

        def comparison(mirror: Mapping[str, Any]) -> bool:
            return compare(left(mirror), right(mirror))

        return comparison
    operate = _ARITHMETIC[op]

    def arithmetic(mirror: Mapping[str, Any]) -> int:
        a, b = left(mirror), right(mirror)
        _integers(a, b)
        return operate(a, b)

    return arithmetic


def _unary(op: str, operand: Program) -> Program:
    if op == "!":
        return lambda mirror: not operand(mirror)

    def sign(mirror: Mapping[str, Any]) -> int:
        a = operand(mirror)
        if type(a) is not int or (op == "-" and a == 0):
            raise _NOT_SCALAR  # (a boolean's sign, or -0)
        return -a if op == "-" else a

    return sign


# ---- parsing: precedence climbing over the token list ----------------------------------------


class _Refused(Exception):
    pass


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens = tokens
        self.at = 0
        self.depth = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        token = self.peek()
        if token is None:
            raise _Refused
        self.at += 1
        return token

    def expression(self, level: int = 0) -> Program | _Leaf:
        if level == len(_LEVELS):
            return self.unary()
        left = self.expression(level + 1)
        while True:
            token = self.peek()
            if token is None or token[0] != "op" or token[1] not in _LEVELS[level]:
                return left
            self.at += 1
            op, right = token[1], self.expression(level + 1)
            if type(left) is _Leaf and type(right) is _Leaf and op not in ("&&", "||"):
                left = _leaves(op, left, right)
            else:
                left = _binary(op, _program(left), _program(right))

    def unary(self) -> Program | _Leaf:
        self.depth += 1
        if self.depth > 32:
            raise _Refused  # (deep nesting: QuickJS's business)
        try:
            kind, value = self.take()
            if kind == "op" and value in ("!", "-", "+"):
                return _unary(value, _program(self.unary()))
            if kind == "op" and value == "(":
                inner = self.expression()
                if self.take() != ("op", ")"):
                    raise _Refused
                return inner
            if kind == "number":
                return _Leaf(None, int(value))
            if kind == "name":
                if value in ("true", "false"):
                    return _Leaf(None, value == "true")
                return _Leaf(value)
            raise _Refused
        finally:
            self.depth -= 1


def compile_scalar(text: str) -> Program | None:
    """The expression ``text`` (as the sandbox would run it, trailing semicolons removed) as
    a function of the mirror, or None when it is not in the subset."""
    tokens = _tokens(text)
    if not tokens:
        return None
    parser = _Parser(tokens)
    try:
        found = parser.expression()
    except _Refused:
        return None
    if parser.at != len(tokens):
        return None
    return _program(found)


def _program(node: Program | _Leaf) -> Program:
    return node.program() if type(node) is _Leaf else node  # type: ignore[union-attr]
