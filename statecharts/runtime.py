"""Per-process caches between stored charts and the core: compiled charts and interpreters.

A compiled chart is immutable and shared by every thread. An interpreter keeps the datamodel
engine of the last state it produced, and embedded engines must stay on their thread, so
interpreters are cached per thread (one per chart).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

from statecharts.conf import statecharts_settings
from statecharts.core import Interpreter, load_chart
from statecharts.core.budget import StepBudgets
from statecharts.core.datamodel import Limits
from statecharts.core.model import Chart as CompiledChart
from statecharts.core.position import ChartMismatchError

if TYPE_CHECKING:
    from statecharts.models import Chart

_CACHE_SIZE = 256
_compiled: OrderedDict[str, CompiledChart] = OrderedDict()
_compiled_lock = threading.Lock()
_local = threading.local()


def _resolver():  # type: ignore[no-untyped-def]
    from django.utils.module_loading import import_string

    resolver = statecharts_settings.RESOLVER
    return import_string(resolver) if isinstance(resolver, str) else resolver


def compile_source(source: str) -> CompiledChart:
    """Compile (or fetch from the cache) the chart whose source is ``source``."""
    with _compiled_lock:
        found = _compiled.get(source)
        if found is not None:
            _compiled.move_to_end(source)
            return found
    compiled = load_chart(source, resolver=_resolver())
    with _compiled_lock:
        _compiled[source] = compiled
        while len(_compiled) > _CACHE_SIZE:
            _compiled.popitem(last=False)
    return compiled


# Stored chart (id, content hash) -> (its source, compiled). A hit still compares the row's
# source with the one compiled (equal strings: one memcmp), so a source edited in place, even
# by raw SQL that left the hash alone, is a miss and is refused below.
_by_row: dict[tuple[int, str], tuple[str, CompiledChart]] = {}


def compiled_chart(chart: Chart) -> CompiledChart:
    """The compiled form of a stored chart; refuses a row whose source no longer has its hash."""
    source = chart.source
    key = (chart.pk, chart.content_hash)
    hit = _by_row.get(key)
    if hit is not None and (hit[0] is source or hit[0] == source):
        return hit[1]
    compiled = compile_source(source)
    if compiled.source_hash != chart.content_hash:
        raise ChartMismatchError(chart.content_hash, compiled.source_hash)
    if chart.pk is not None:
        if len(_by_row) >= _CACHE_SIZE:
            _by_row.clear()
        _by_row[key] = (source, compiled)
    return compiled


def limits() -> Limits:
    return Limits(
        time_ms=statecharts_settings.TIME_LIMIT_MS,
        memory_bytes=statecharts_settings.MEMORY_LIMIT_BYTES,
    )


def budgets() -> StepBudgets:
    """The step budgets the settings give (docs/durable-executions.md)."""
    return StepBudgets(
        rounds=statecharts_settings.ROUND_BUDGET,
        foreach_iterations=statecharts_settings.FOREACH_BUDGET,
        effects=statecharts_settings.EFFECT_BUDGET,
        log_bytes=statecharts_settings.LOG_BYTES_BUDGET,
        time_ms=statecharts_settings.STEP_TIME_BUDGET_MS,
    )


def interpreter_for(compiled: CompiledChart) -> Interpreter:
    """This thread's interpreter for ``compiled`` (settings are read when it is created)."""
    cache: dict[str, Interpreter] | None = getattr(_local, "interpreters", None)
    if cache is None:
        cache = _local.interpreters = {}
    step_budgets = budgets()
    key = f"{compiled.source_hash}:{step_budgets}:{limits()}"
    interpreter = cache.get(key)
    if interpreter is None or interpreter.chart is not compiled:
        if len(cache) >= _CACHE_SIZE:
            cache.clear()
        interpreter = cache[key] = Interpreter(compiled, budgets=step_budgets, limits=limits())
    return interpreter


def fresh_interpreter(compiled: CompiledChart) -> Interpreter:
    """An interpreter that shares nothing with the cached ones (for replay)."""
    return Interpreter(compiled, budgets=budgets(), limits=limits())
