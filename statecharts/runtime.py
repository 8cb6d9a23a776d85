"""Per-process caches between stored charts and the core: compiled charts and interpreters.

A compiled chart is immutable and shared by every thread. An interpreter keeps the datamodel
engine of the last state it produced, and embedded engines must stay on their thread, so
interpreters are cached per thread (one per chart).

**Stored resources.** A chart loaded from a file (``Chart.objects.load_file``) may reference
other files (``<data src>``, ``<script src>``, ``<invoke src>``). They are read once, when it
is loaded, and stored with it (``Chart.resources``: URI -> text), so an execution never depends
on a file that may have changed or gone. The chart's identity then covers them too
(``identity_of``); a chart without resources keeps exactly the identity it always had, the
sha256 of its source (or every running execution would need migration).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from statecharts.conf import statecharts_settings
from statecharts.core import Interpreter, load_chart
from statecharts.core.budget import StepBudgets
from statecharts.core.datamodel import Limits
from statecharts.core.errors import ChartError, LoadCheck, Problem, ResolveError
from statecharts.core.expressions import check_expressions
from statecharts.core.model import Chart as CompiledChart
from statecharts.core.parse import decode_utf8, encode_utf8, read_document
from statecharts.core.position import ChartMismatchError
from statecharts.core.references import references
from statecharts.core.resolve import (
    Resolver,
    default_resolver,
    is_relative_reference,
    names_a_file,
    refusal,
)
from statecharts.core.runnability import runnability_problems

if TYPE_CHECKING:
    from statecharts.models import Chart

class ExpressionSyntax(StrEnum):
    """The ``EXPRESSION_SYNTAX`` setting: what a syntax error in chart code does at load."""

    WARNING = "warning"  # reported (the admin, the API, ``statechart load``); stored anyway
    ERROR = "error"  # the chart is refused


_CACHE_SIZE = 256
_compiled: OrderedDict[str, CompiledChart] = OrderedDict()
_compiled_lock = threading.Lock()
_local = threading.local()


def _resolver():  # type: ignore[no-untyped-def]
    from django.utils.module_loading import import_string

    resolver = statecharts_settings.RESOLVER
    return import_string(resolver) if isinstance(resolver, str) else resolver


# Bounds on what loading a chart from a file may store with it.
MAX_RESOURCE_BYTES = 1_000_000
MAX_RESOURCES = 100


def identity_of(source: str, resources: Mapping[str, str] | None = None) -> str:
    """A stored chart's identity: the sha256 of its source, and of its resources if any.
    A source that is not text UTF-8 can hold (a lone surrogate) is a ChartError naming its
    line and column."""
    data = encode_utf8(source)
    if resources:
        canonical = json.dumps(sorted(resources.items()), ensure_ascii=False)
        data += b"\0" + canonical.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def stored_resolver(resources: Mapping[str, str], fallback: Resolver) -> Resolver:
    """Serves the chart's stored resources; anything else goes to ``fallback``."""

    def resolve(uri: str, base_path: str | None) -> str:
        if uri in resources:
            return resources[uri]
        return fallback(uri, base_path)

    return resolve


def default_datamodel() -> str:
    """Today's ``DEFAULT_DATAMODEL`` setting: what a chart loaded now without a
    ``datamodel`` attribute gets (recorded on its row: ``Chart.datamodel``)."""
    return str(statecharts_settings.DEFAULT_DATAMODEL)


def no_folder(uri: str) -> str:
    """Why a relative reference of a chart that has no folder cannot be resolved."""
    return (
        f"{uri!r} is a file relative to the chart's folder, and this chart has none (it was "
        f"not loaded from a file): load it from its file (manage.py statechart load PATH, or "
        f"Chart.objects.load_file), or inline the content"
    )


def _folderless(fallback: Resolver) -> Resolver:
    """A chart with no folder: its relative references are refused with the reason."""

    def resolve(uri: str, base_path: str | None) -> str:
        if is_relative_reference(uri):
            raise ResolveError(no_folder(uri))
        return fallback(uri, base_path)

    return resolve


def compile_source(
    source: str,
    resources: Mapping[str, str] | None = None,
    folder: str = "",
    datamodel: str | None = None,
) -> CompiledChart:
    """Compile (or fetch from the cache) the chart whose source is ``source`` (with its stored
    ``resources``; ``folder`` is where it was loaded from, for run-time references).
    ``datamodel``: the datamodel of a chart that declares none (a stored chart's
    ``Chart.datamodel``; by default today's setting, for a chart being loaded)."""
    datamodel = datamodel or default_datamodel()
    key = identity_of(source, resources) + "\0" + folder + "\0" + datamodel
    with _compiled_lock:
        found = _compiled.get(key)
        if found is not None:
            _compiled.move_to_end(key)
            return found
    resolver = stored_resolver(resources, _resolver()) if resources else _resolver()
    if not folder:
        resolver = _folderless(resolver)
    compiled = load_chart(
        source, resolver=resolver, base_path=folder or None, default_datamodel=datamodel
    )
    if resources:
        compiled = dataclasses.replace(compiled, source_hash=identity_of(source, resources))
    with _compiled_lock:
        _compiled[key] = compiled
        while len(_compiled) > _CACHE_SIZE:
            _compiled.popitem(last=False)
    return compiled


def read_chart_file(path: str | Path) -> tuple[str, dict[str, str], str]:
    """A chart file's source, the files it references (read now, bounded) and its folder.

    ``<data src>`` and ``<script src>`` are whatever the core's file resolver read while
    compiling it; each static ``<invoke src>`` is read too. A reference that cannot be read is
    left out: the core reports it (a load problem, or ``error.execution`` when it runs).
    """
    path = Path(path)
    folder = str(path.parent.resolve())
    source = decode_utf8(read_document(path))
    recorded: dict[str, str] = {}

    def recording(uri: str, base_path: str | None) -> str:
        text = default_resolver(uri, base_path)
        if len(text.encode("utf-8")) > MAX_RESOURCE_BYTES:
            raise ResolveError(f"{uri!r} is larger than {MAX_RESOURCE_BYTES} bytes")
        if uri not in recorded and len(recorded) >= MAX_RESOURCES:
            raise ResolveError(f"a chart may reference at most {MAX_RESOURCES} files")
        recorded[uri] = text
        return text

    compiled = load_chart(
        source,
        resolver=recording,
        base_path=folder,
        source_name=str(path),
        default_datamodel=default_datamodel(),
    )
    for reference in references(compiled):
        if reference.tagname == "invoke":
            # One that cannot be read fails when it runs: error.execution, as the spec says.
            with contextlib.suppress(ResolveError):
                recording(reference.uri, folder)
    return source, recorded, folder


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
    compiled = compile_source(
        source, chart.resources or None, chart.folder or "", chart.datamodel or "null"
    )
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
        output_bytes=statecharts_settings.OUTPUT_BYTES_BUDGET,
        time_ms=statecharts_settings.STEP_TIME_BUDGET_MS,
    )


def interpreter_for(compiled: CompiledChart, *, tracing: bool = False) -> Interpreter:
    """This thread's interpreter for ``compiled`` (settings are read when it is created);
    ``tracing`` (an execution's flag) makes the core emit its trace effects too."""
    cache: dict[str, Interpreter] | None = getattr(_local, "interpreters", None)
    if cache is None:
        cache = _local.interpreters = {}
    step_budgets = budgets()
    key = f"{compiled.source_hash}:{step_budgets}:{limits()}:{tracing}"
    interpreter = cache.get(key)
    if interpreter is None or interpreter.chart is not compiled:
        if len(cache) >= _CACHE_SIZE:
            cache.clear()
        interpreter = cache[key] = Interpreter(
            compiled, budgets=step_budgets, limits=limits(), tracing=tracing
        )
    return interpreter


def fresh_interpreter(compiled: CompiledChart) -> Interpreter:
    """An interpreter that shares nothing with the cached ones (for replay)."""
    return Interpreter(compiled, budgets=budgets(), limits=limits())


def load_problems(
    compiled: CompiledChart, source: str, *, strict: bool | None = None
) -> list[Problem]:
    """What loading ``compiled`` (compiled from ``source``) adds to its warnings: syntax
    errors in its code (``EXPRESSION_SYNTAX``, or ``strict`` if given: warnings, or errors
    that refuse the chart)."""
    if strict is None:
        strict = statecharts_settings.EXPRESSION_SYNTAX == ExpressionSyntax.ERROR
    return check_expressions(compiled, source, strict=strict)


def refuse_relative_references(
    compiled: CompiledChart, resources: Mapping[str, str] | None = None
) -> None:
    """Refuse a chart that has no folder (pasted into the admin, posted to the API) but
    references a file relative to one (``src="lib.js"``, ``file:lib.js``) that it does not
    carry in ``resources``: nothing could ever resolve it. ChartError, one problem each."""
    carried = resources or {}
    problems = [
        Problem(ref.line, ref.column or 1, f"<{ref.tagname} src=...>: {no_folder(ref.uri)}")
        for ref in references(compiled)
        if is_relative_reference(ref.uri) and ref.uri not in carried
    ]
    if problems:
        raise ChartError(problems)


def refused_references(
    compiled: CompiledChart, resources: Mapping[str, str] | None, folder: str
) -> list[Problem]:
    """The references no execution could ever read, with the reason the file resolver's
    rules give (``statecharts.core.resolve.refusal``: an absolute path, one that leaves the
    chart's folder, a scheme it does not read): a ``<data src>`` the compiler could not
    resolve (a file that merely cannot be read now stays a warning: ``error.execution`` when
    it is bound), and a static ``<invoke src>`` naming a file (other schemes, such as
    ``chart:NAME``, are an app's to answer when it runs). ``<script src>`` is refused by the
    compiler itself. Checked at load only (a stored chart keeps compiling)."""
    carried = resources or {}
    base = folder or None
    found = []
    for state in compiled.states:
        for data in state.datas:
            if data.src is None or data.has_body or data.src in carried:
                continue
            why = refusal(data.src, base)
            if why is not None and (folder or not is_relative_reference(data.src)):
                found.append(Problem(data.line, data.column or 1, why))
    for ref in references(compiled):
        if ref.tagname != "invoke" or ref.uri in carried or not names_a_file(ref.uri):
            continue
        why = refusal(ref.uri, base)
        if why is not None and (folder or not is_relative_reference(ref.uri)):
            found.append(Problem(ref.line, ref.column or 1, f"<invoke src=...>: {why}"))
    return found


def refused_at_load(warnings: Iterable[Problem]) -> list[Problem]:
    """The compiler's warnings as the load doors see them: those coded with a
    :class:`~statecharts.core.errors.LoadCheck` are errors here. The compiler keeps them
    warnings so that a source stored before a check was added still compiles and runs
    (``compiled_chart`` never applies them); only loading and validating refuse."""
    return [
        dataclasses.replace(p, severity="error") if p.code in _LOAD_CHECKS else p
        for p in warnings
    ]


_LOAD_CHECKS = frozenset(LoadCheck)


def check_source(
    source: str,
    resources: Mapping[str, str] | None = None,
    folder: str = "",
    *,
    strict: bool | None = None,
    load_checks: bool = True,
) -> tuple[CompiledChart, list[Problem]]:
    """Everything loading ``source`` checks, for every door (``Chart.objects.load``, the
    admin's add-chart form, the API, ``statechart validate``/``load``): it compiles (with
    today's ``DEFAULT_DATAMODEL``), has no relative reference it could not resolve (without a
    ``folder``), and its code compiles (``EXPRESSION_SYNTAX``). Returns the compiled chart and
    every warning; raises ChartError listing every problem (and the warnings).

    Warns of a chart the step time budget would refuse however it is used
    (``statecharts.core.runnability``: too many ``<data>`` to start, too many transitions
    one event selects at once); an error with ``strict=True`` (``statechart validate
    --strict``), never with the ``EXPRESSION_SYNTAX`` setting alone.

    ``load_checks``: what only loading refuses (``refused_at_load``, ``refused_references``:
    checks added after charts were stored). Off for the child of an ``<invoke>``, which is
    part of a chart already stored: it fails where it runs, as before."""
    compiled = compile_source(source, resources or None, folder)
    if not folder:
        refuse_relative_references(compiled, resources)
    warnings: list[Problem] = list(compiled.warnings)
    refused: list[Problem] = []
    if load_checks:
        refused = refused_references(compiled, resources, folder)
        at = {(p.line, p.column) for p in refused}  # (the resolver's warning there says less)
        warnings = refused_at_load(p for p in warnings if (p.line, p.column) not in at)
    found = [*refused, *warnings, *load_problems(compiled, source, strict=strict)]
    if load_checks:  # (an estimate: an error only when asked to be strict, --strict)
        found += runnability_problems(
            compiled, statecharts_settings.STEP_TIME_BUDGET_MS, strict=strict is True
        )
    if any(p.severity == "error" for p in found):
        raise ChartError(found)
    return compiled, found


def stored_warnings(chart: Chart) -> list[Problem]:
    """What a stored chart's author should know: the compiler's warnings and its code's
    syntax errors (always as warnings here: the chart is stored). ChartError or a
    StatechartError when the row cannot be compiled."""
    compiled = compiled_chart(chart)
    return [*compiled.warnings, *check_expressions(compiled, chart.source)]
