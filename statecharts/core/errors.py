"""Errors raised by the core. Every one names what went wrong and where."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class LoadCheck(StrEnum):
    """The ``code`` of a problem the compiler reports as a warning, so that a stored source
    still compiles, and that the load and validate doors (``statecharts.runtime.
    check_source``) refuse: tightening what loads must not break charts already stored."""

    VALUE_DEPTH = "value-depth"  # a literal body (JSON) nested past what a datamodel holds
    DELAY_SYNTAX = "delay-syntax"  # a delay that is not a CSS2 time (" 1s")


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a chart document, with its position (1-based line and column)."""

    line: int
    column: int
    message: str
    severity: str = "error"  # "error" refuses the chart; "warning" is reported only
    code: str = ""  # what kind of problem, when a host treats a kind apart ("expression-syntax")

    def __str__(self) -> str:
        return f"{self.line}:{self.column}: {self.message}"


class StatechartError(Exception):
    """Base class of every error the core raises on purpose."""


class ChartError(StatechartError):
    """A chart document was refused. ``problems`` holds every problem found, not only the first."""

    def __init__(self, problems: list[Problem], *, source_name: str | None = None) -> None:
        self.problems = [p for p in problems if p.severity == "error"]
        self.warnings = [p for p in problems if p.severity != "error"]
        self.source_name = source_name
        where = f"{source_name}: " if source_name else ""
        lines = "\n".join(f"  {where}{p}" for p in self.problems)
        count = len(self.problems)
        super().__init__(f"invalid SCXML ({count} problem{'s' if count != 1 else ''}):\n{lines}")


class NotRunningError(StatechartError):
    """An event was given to a chart that has already reached a top-level final state or stopped."""


class DatamodelError(StatechartError):
    """An expression, assignment or script failed. The interpreter turns it into error.execution.

    ``reason``: what went wrong without saying where (the message names the code too)."""

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason if reason is not None else message


class SnapshotLimitError(DatamodelError):
    """The datamodel could not be captured at the end of a step: what it holds is past one of
    the datamodel's limits. ``limit_name`` says which (``time_ms``: the snapshot ran out of
    time; ``memory_bytes``; ``value_depth``: a value nests deeper than the bound; ``other``),
    ``limit`` its value. Not chart code's failure: the interpreter treats the step as over a
    budget (statecharts.core.budget) and rolls it back."""

    def __init__(self, message: str, reason: str, limit_name: str, limit: float) -> None:
        super().__init__(message, reason)
        self.limit_name = limit_name
        self.limit = limit


class ResolveError(StatechartError):
    """A ``src`` URI (invoke, data) could not be resolved by the host's resolver."""
