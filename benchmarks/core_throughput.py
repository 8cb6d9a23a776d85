"""Core interpreter throughput: external events per second, ours against two Python libraries.

Two statecharts, each run through three implementations in ONE process and ONE run:

(a) ``charts/nested_parallel.scxml``: null datamodel, compound states nested four deep and a
    three-region ``<parallel>``, driven round a loop by the cyclic external events
    ``go, next, split, tick, tock, reset`` (8 transitions per cycle of 6 events, two of them
    simultaneous transitions in orthogonal regions; no final state is ever reached).
(b) ``charts/datamodel_ecmascript.scxml``: ECMAScript datamodel, a four-region ``<parallel>``,
    guards that read the datamodel (``count < 1000000000``, ``consumed === count``, ...),
    ``<assign>`` updates and ``<raise>``d internal events consumed in the same macrostep,
    driven by ``produce, tick, done, tick, audit, stats`` (6 external + 3 internal events,
    9 transitions, 4 guards, 7 assignments and 3 raises per cycle).

Implementations and how each loads the charts:

1. ours: ``statecharts.core.load_chart`` on the SCXML text, run by
   ``statecharts.drivers.memory.MemoryDriver`` (in-memory, virtual clock).
2. python-statemachine (>= 3.2): ``statemachine.io.load(path)`` (its SCXML reader, secure
   default ``trusted=False``) returns a ``StateChart`` class; one instance per run,
   ``instance.send(name)``. It has no ECMAScript engine, so chart (b) is loaded from
   ``charts/datamodel_python.scxml``, the same document with Python expressions.
3. sismic (>= 1.6): ``sismic.io.import_from_yaml`` on ``charts/nested_parallel.yaml`` and
   ``charts/datamodel.yaml`` (the same statecharts in sismic's YAML; guards and actions are
   Python code, ``<raise>`` is ``send(...)``), run by ``sismic.interpreter.Interpreter``;
   one event is ``queue(name)`` followed by ``execute()`` (which also consumes the internal
   events that the external one raised, before returning).

Method: charts are parsed once, outside the timing. Each implementation first has its full
trajectory checked for two cycles (configuration, and for (b) the datamodel counters, after
every single event). Then one untimed warm-up run, then ``--repeat`` timed runs interleaved
across implementations; each run starts a fresh session (untimed), sends ``--events``
external events timed with ``time.perf_counter`` (``--clock cpu``: ``time.process_time``) and
is verified afterwards (configuration and counters must match the expected values after
exactly that many events, and one more cycle is checked step by step). Reported: the MEDIAN
events/s of the timed runs (the best run is shown too), and ours / max(python-statemachine,
sismic) on medians. The garbage collector stays on (a real process has it) but is run before
every timed run.

Any implementation that does not do the expected work fails the run loudly (exit status 1).
If ours cannot be imported or cannot load a chart, it is reported as "not available" and the
other two are still measured.

Usage (from the repository root)::

    python benchmarks/core_throughput.py [--events N] [--repeat R] [--json out.json]
                                         [--warmup W] [--require-ours] [--clock wall|cpu]

``--clock cpu`` times the runs by this process's CPU time (``time.process_time``) instead of
the wall clock: on a shared, loaded machine other processes then blur the ratio far less
(they still share caches and cores); the published ratios are wall-clock runs on a quiet
machine.

The libraries compared against are the project's ``bench`` extra: ``pip install -e '.[bench]'``.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CHARTS = HERE / "charts"
REPO = HERE.parent

OURS = "ours"
PYSM = "python-statemachine"
SISMIC = "sismic"
IMPLEMENTATIONS = (OURS, PYSM, SISMIC)
COMPETITORS = (PYSM, SISMIC)

MIN_VERSIONS = {PYSM: (3, 2), SISMIC: (1, 6)}


# --------------------------------------------------------------------------- expectations


def _conf(names: str) -> frozenset[str]:
    return frozenset(names.split())


@dataclass(frozen=True)
class Step:
    """One external event of a chart's cycle and what must hold once it is processed."""

    event: str
    configuration: frozenset[str]
    increments: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ChartSpec:
    key: str
    title: str
    files: Mapping[str, str]  # implementation name -> file under charts/
    initial: frozenset[str]
    steps: tuple[Step, ...]
    counters: tuple[str, ...] = ()

    @property
    def cycle(self) -> tuple[str, ...]:
        return tuple(step.event for step in self.steps)

    def events(self, count: int, start: int = 0) -> list[str]:
        cycle = self.cycle
        return [cycle[(start + i) % len(cycle)] for i in range(count)]

    def expected_configuration(self, sent: int) -> frozenset[str]:
        if sent == 0:
            return self.initial
        return self.steps[(sent - 1) % len(self.steps)].configuration

    def expected_counters(self, sent: int) -> dict[str, int]:
        cycles, rest = divmod(sent, len(self.steps))
        totals = dict.fromkeys(self.counters, 0)
        for index, step in enumerate(self.steps):
            times = cycles + (1 if index < rest else 0)
            for name, amount in step.increments.items():
                totals[name] += amount * times
        return totals


_A_ACTIVE = "machine active"
_A_GRID = f"{_A_ACTIVE} grid left mid right"
CHART_A = ChartSpec(
    key="a",
    title="(a) nested compound + 3-region parallel, null datamodel",
    files={
        OURS: "nested_parallel.scxml",
        PYSM: "nested_parallel.scxml",
        SISMIC: "nested_parallel.yaml",
    },
    initial=_conf("machine idle"),
    steps=(
        Step("go", _conf(f"{_A_ACTIVE} prep prep_a")),
        Step("next", _conf(f"{_A_ACTIVE} prep prep_b")),
        Step("split", _conf(f"{_A_GRID} left_1 mid_1 right_1")),
        Step("tick", _conf(f"{_A_GRID} left_2 mid_2 right_1")),
        Step("tock", _conf(f"{_A_GRID} left_2 mid_1 right_2")),
        Step("reset", _conf("machine idle")),
    ),
)

_B_REGIONS = "pipeline producer consumer ticker auditor"
_B_IDLE = _conf(f"{_B_REGIONS} p_idle c_idle t_even a_idle")
CHART_B = ChartSpec(
    key="b",
    title="(b) 4-region parallel, datamodel guards + assign + raise",
    files={
        OURS: "datamodel_ecmascript.scxml",
        PYSM: "datamodel_python.scxml",
        SISMIC: "datamodel.yaml",
    },
    initial=_B_IDLE,
    steps=(
        Step(
            "produce",
            _conf(f"{_B_REGIONS} p_wait c_busy t_even a_idle"),
            {"count": 1, "consumed": 1},
        ),
        Step("tick", _conf(f"{_B_REGIONS} p_wait c_busy t_odd a_idle"), {"ticks": 1}),
        Step("done", _conf(f"{_B_REGIONS} p_idle c_idle t_odd a_idle"), {"acks": 1}),
        Step("tick", _B_IDLE, {"ticks": 1}),
        Step("audit", _B_IDLE, {"audits": 1}),
        Step("stats", _B_IDLE, {"polls": 1}),
    ),
    counters=("count", "consumed", "acks", "ticks", "audits", "polls"),
)

CHARTS_UNDER_TEST = (CHART_A, CHART_B)


# --------------------------------------------------------------------------- adapters


class Unavailable(Exception):
    """The implementation cannot run this benchmark here (not installed, not written yet)."""


class VerificationError(Exception):
    """The implementation ran but did not do the expected work."""


@dataclass
class Instance:
    """One running statechart. ``send`` is the library's own call, as directly as it allows."""

    send: Callable[[str], object]
    configuration: Callable[[], frozenset[str]]
    data: Callable[[], Mapping[str, Any]]


Factory = Callable[[], Instance]


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _version_tuple(version: str) -> tuple[int, ...]:
    parts: list[int] = []
    for piece in version.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def _dist_version(dist: str, minimum: tuple[int, ...] | None = None) -> str:
    try:
        version = metadata.version(dist)
    except metadata.PackageNotFoundError as exc:
        raise Unavailable(f"{dist} is not installed (pip install '{dist}')") from exc
    if minimum is not None and _version_tuple(version) < minimum:
        wanted = ".".join(map(str, minimum))
        raise Unavailable(f"{dist} {version} is older than the required {wanted}")
    return version


class Adapter:
    name: str = ""

    def version(self) -> str:
        raise NotImplementedError

    def prepare(self, chart: ChartSpec) -> Factory:
        """Load (parse) the chart once; return a factory of fresh running instances."""
        raise NotImplementedError


class OursAdapter(Adapter):
    name = OURS

    def __init__(self) -> None:
        if str(REPO) not in sys.path:
            # Benchmark the working tree, also when the package is not pip-installed.
            sys.path.insert(0, str(REPO))
        try:
            core = importlib.import_module("statecharts.core")
            memory = importlib.import_module("statecharts.drivers.memory")
            self._load_chart: Callable[..., Any] = core.load_chart
            self._driver_class: Callable[[], Any] = memory.MemoryDriver
            self._location = str(getattr(memory, "__file__", None) or REPO)
        except Exception as exc:  # ImportError, or whatever the package raises on import
            raise Unavailable(_describe(exc)) from exc

    def version(self) -> str:
        try:
            version = metadata.version("django-statecharts")
        except metadata.PackageNotFoundError:
            version = "(no package metadata)"
        return f"{version} ({self._location})"

    def prepare(self, chart: ChartSpec) -> Factory:
        source = (CHARTS / chart.files[OURS]).read_text(encoding="utf-8")
        driver_class = self._driver_class
        try:
            compiled = self._load_chart(source)
            driver_class().start(compiled)  # probe: a chart it cannot start is unavailable
        except Exception as exc:
            raise Unavailable(f"cannot load/start {chart.files[OURS]}: {_describe(exc)}") from exc

        def start() -> Instance:
            session = driver_class().start(compiled)
            return Instance(
                send=session.send,
                configuration=lambda: frozenset(session.configuration),
                data=lambda: session.datamodel,
            )

        return start


class PysmAdapter(Adapter):
    name = PYSM

    def __init__(self) -> None:
        self._version = _dist_version("python-statemachine", MIN_VERSIONS[PYSM])
        from statemachine.io import load

        self._load: Callable[..., Any] = load

    def version(self) -> str:
        return self._version

    def prepare(self, chart: ChartSpec) -> Factory:
        # Secure default (trusted=False): the restricted expression evaluator. Its trusted
        # (plain eval) mode measured within noise of it on these charts.
        path = CHARTS / chart.files[PYSM]
        load = self._load
        load(path)  # fail here, outside the runs, if it cannot load the document
        counters = chart.counters

        def start() -> Instance:
            # A class from statemachine.io.load runs the <datamodel> initialisation for its
            # FIRST instance only (python-statemachine 3.2.2: a once-flag in the closure
            # that create_datamodel_action_callable builds per class), so a second instance
            # has no `count` and every guard raises into error.execution, silently. Hence
            # one freshly loaded class per session; loading is not timed.
            machine = load(path)()
            model = machine.model
            return Instance(
                send=machine.send,
                configuration=lambda: frozenset(machine.configuration_values),
                data=lambda: {name: getattr(model, name) for name in counters},
            )

        return start


class SismicAdapter(Adapter):
    name = SISMIC

    def __init__(self) -> None:
        self._version = _dist_version("sismic", MIN_VERSIONS[SISMIC])
        from sismic.interpreter import Interpreter
        from sismic.io import import_from_yaml

        self._interpreter_class: Callable[..., Any] = Interpreter
        self._import: Callable[..., Any] = import_from_yaml

    def version(self) -> str:
        return self._version

    def prepare(self, chart: ChartSpec) -> Factory:
        statechart = self._import(filepath=str(CHARTS / chart.files[SISMIC]))
        interpreter_class = self._interpreter_class

        def start() -> Instance:
            interpreter = interpreter_class(statechart)
            interpreter.execute()  # initial macrostep: enter the initial configuration
            queue = interpreter.queue
            execute = interpreter.execute

            def send(name: str) -> None:
                queue(name)
                execute()  # the external event, then every internal event it raised

            return Instance(
                send=send,
                configuration=lambda: frozenset(interpreter.configuration),
                data=lambda: interpreter.context,
            )

        return start


ADAPTER_CLASSES: dict[str, type[Adapter]] = {
    OURS: OursAdapter,
    PYSM: PysmAdapter,
    SISMIC: SismicAdapter,
}


# --------------------------------------------------------------------------- verification


def _check(chart: ChartSpec, impl: str, instance: Instance, sent: int, what: str) -> None:
    expected = chart.expected_configuration(sent)
    got = instance.configuration()
    last = chart.events(1, sent - 1)[0] if sent else "(start)"
    where = f"{impl} on chart {chart.key}, after {sent} events (last: {last}, {what})"
    if got != expected:
        raise VerificationError(
            f"{where}: configuration {sorted(got)} != expected {sorted(expected)}"
            f" (missing {sorted(expected - got)}, unexpected {sorted(got - expected)})"
        )
    if not chart.counters:
        return
    data = instance.data()
    for name, value in chart.expected_counters(sent).items():
        actual = data.get(name)
        if isinstance(actual, bool) or not isinstance(actual, int | float) or actual != value:
            raise VerificationError(f"{where}: datamodel {name} = {actual!r}, expected {value}")


def verify_trajectory(chart: ChartSpec, impl: str, factory: Factory, cycles: int = 2) -> None:
    """Fresh instance: check the state after every event for ``cycles`` whole cycles."""
    instance = factory()
    _check(chart, impl, instance, 0, "trajectory")
    for sent, name in enumerate(chart.events(cycles * len(chart.steps)), start=1):
        instance.send(name)
        _check(chart, impl, instance, sent, "trajectory")


def verify_after_run(chart: ChartSpec, impl: str, instance: Instance, sent: int) -> None:
    """After a timed run: the totals must match, and the next cycle must still step right."""
    _check(chart, impl, instance, sent, "end of timed run")
    for offset, name in enumerate(chart.events(len(chart.steps), sent), start=1):
        instance.send(name)
        _check(chart, impl, instance, sent + offset, "cycle after timed run")


# --------------------------------------------------------------------------- measurement


@dataclass
class Result:
    status: str = "ok"  # ok | unavailable | failed
    reason: str = ""
    samples: list[float] = field(default_factory=list)  # events/s, one per timed run
    factory: Factory | None = None

    @property
    def median(self) -> float | None:
        return statistics.median(self.samples) if self.samples else None

    @property
    def best(self) -> float | None:
        return max(self.samples) if self.samples else None


# What a timed run reads: the wall clock (the default), or with ``--clock cpu`` this
# process's CPU time, which other processes on a loaded machine blur far less.
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}
CLOCK_NAMES = {"wall": "time.perf_counter", "cpu": "time.process_time, this process's CPU time"}
_clock: Callable[[], float] = time.perf_counter


def timed_run(factory: Factory, events: Sequence[str]) -> tuple[float, Instance]:
    instance = factory()
    send = instance.send
    clock = _clock
    gc.collect()
    start = clock()
    for name in events:
        send(name)
    elapsed = clock() - start
    return elapsed, instance


def _fail(result: Result, impl: str, chart: ChartSpec, exc: BaseException) -> None:
    result.status = "failed"
    if isinstance(exc, VerificationError):
        result.reason = str(exc)
    else:
        result.reason = f"{impl} on chart {chart.key} raised {_describe(exc)}"
    result.factory = None


def run(args: argparse.Namespace) -> tuple[dict[str, dict[str, Result]], dict[str, str]]:
    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    adapters: dict[str, Adapter] = {}
    unavailable: dict[str, str] = {}
    versions: dict[str, str] = {}
    for impl, adapter_class in ADAPTER_CLASSES.items():
        try:
            adapters[impl] = adapter_class()
            versions[impl] = adapters[impl].version()
        except Unavailable as exc:
            unavailable[impl] = str(exc)
            versions[impl] = f"not available ({exc})"

    results: dict[str, dict[str, Result]] = {}
    for chart in CHARTS_UNDER_TEST:
        results[chart.key] = {}
        for impl in IMPLEMENTATIONS:
            result = results[chart.key][impl] = Result()
            if impl in unavailable:
                result.status, result.reason = "unavailable", unavailable[impl]
                continue
            try:
                result.factory = adapters[impl].prepare(chart)
            except Unavailable as exc:
                result.status, result.reason = "unavailable", str(exc)
                continue
            try:
                verify_trajectory(chart, impl, result.factory)
                if args.warmup:
                    log(f"warm-up: chart {chart.key}, {impl}, {args.warmup} events")
                    _, instance = timed_run(result.factory, chart.events(args.warmup))
                    verify_after_run(chart, impl, instance, args.warmup)
            except Exception as exc:
                _fail(result, impl, chart, exc)

    for repetition in range(1, args.repeat + 1):
        for chart in CHARTS_UNDER_TEST:
            events = chart.events(args.events)
            for impl in IMPLEMENTATIONS:
                result = results[chart.key][impl]
                if result.factory is None:
                    continue
                try:
                    elapsed, instance = timed_run(result.factory, events)
                    verify_after_run(chart, impl, instance, args.events)
                except Exception as exc:
                    _fail(result, impl, chart, exc)
                    continue
                result.samples.append(args.events / elapsed)
                log(
                    f"run {repetition}/{args.repeat}: chart {chart.key}, {impl}: "
                    f"{args.events / elapsed:,.0f} events/s"
                )
    return results, versions


# --------------------------------------------------------------------------- reporting


def ratio_of(chart_results: Mapping[str, Result]) -> float | None:
    ours = chart_results[OURS].median
    others = [m for impl in COMPETITORS if (m := chart_results[impl].median) is not None]
    if ours is None or not others:
        return None
    return ours / max(others)


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def render(
    args: argparse.Namespace,
    command: str,
    results: Mapping[str, Mapping[str, Result]],
    versions: Mapping[str, str],
) -> str:
    lines = [
        f"command: {command}",
        f"cwd:     {os.getcwd()}",
        f"python:  {platform.python_implementation()} {platform.python_version()}"
        f" on {platform.platform()}",
    ]
    lines += [f"{impl}: {versions[impl]}" for impl in IMPLEMENTATIONS]
    lines += [
        f"runs: {args.repeat} timed x {args.events} external events per chart and implementation"
        f" (after {args.warmup} warm-up events); statistic: MEDIAN events/s (best shown too);",
        f"      clock: {args.clock} ({CLOCK_NAMES[args.clock]});",
        "      parse/load and session start are not timed; a fresh session per run.",
        "",
    ]
    header = f"  {'implementation':<22}{'median ev/s':>14}{'best ev/s':>14}{'us/event':>11}"
    for chart in CHARTS_UNDER_TEST:
        chart_results = results[chart.key]
        lines.append(f"{chart.title}   [cycle: {', '.join(chart.cycle)}]")
        lines.append(header)
        for impl in IMPLEMENTATIONS:
            result = chart_results[impl]
            if result.status == "unavailable":
                lines.append(f"  {impl}: not available ({result.reason})")
                continue
            if result.status == "failed":
                lines.append(f"  {impl}: FAILED ({result.reason})")
                continue
            median = result.median
            per_event = None if median is None else 1e6 / median
            lines.append(
                f"  {impl:<22}{_fmt(median, ',.0f'):>14}{_fmt(result.best, ',.0f'):>14}"
                f"{_fmt(per_event, '.1f'):>11}"
            )
        ratio = ratio_of(chart_results)
        reason = "ours not measured" if chart_results[OURS].median is None else "no competitor"
        lines.append(
            "  ratio ours / max(python-statemachine, sismic), medians: "
            + (f"{ratio:.2f}x" if ratio is not None else f"n/a ({reason})")
        )
        lines.append("")
    return "\n".join(lines)


def as_json(
    args: argparse.Namespace,
    command: str,
    results: Mapping[str, Mapping[str, Result]],
    versions: Mapping[str, str],
) -> dict[str, Any]:
    charts: dict[str, Any] = {}
    for chart in CHARTS_UNDER_TEST:
        chart_results = results[chart.key]
        charts[chart.key] = {
            "title": chart.title,
            "cycle": list(chart.cycle),
            "files": dict(chart.files),
            "results": {
                impl: {
                    "status": result.status,
                    "reason": result.reason or None,
                    "events_per_second_samples": result.samples,
                    "median_events_per_second": result.median,
                    "best_events_per_second": result.best,
                }
                for impl, result in chart_results.items()
            },
            "ratio_ours_over_best_competitor_median": ratio_of(chart_results),
        }
    return {
        "command": command,
        "cwd": os.getcwd(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "platform": platform.platform(),
        "versions": dict(versions),
        "settings": {
            "events": args.events,
            "repeat": args.repeat,
            "warmup": args.warmup,
            "clock": args.clock,
            "statistic": "median events/s over the timed runs",
        },
        "charts": charts,
    }


def parse_args(argv: Iterable[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Events/second of ours vs python-statemachine vs sismic on two charts."
    )
    parser.add_argument("--events", type=int, default=12_000, help="external events per timed run")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per implementation")
    parser.add_argument(
        "--warmup", type=int, default=2_000, help="events in the untimed warm-up run (0: none)"
    )
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write results as JSON")
    parser.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="what a timed run reads: wall (time.perf_counter, the default) or cpu "
        "(time.process_time: this process's CPU time, for a loaded machine)",
    )
    parser.add_argument(
        "--require-ours",
        action="store_true",
        help="exit 1 unless ours was measured on both charts (default: report it as missing)",
    )
    args = parser.parse_args(None if argv is None else list(argv))
    if args.events < 1 or args.repeat < 1 or args.warmup < 0:
        parser.error("--events and --repeat must be >= 1, --warmup >= 0")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    global _clock
    args = parse_args(argv)
    _clock = CLOCKS[args.clock]
    command = shlex.join([sys.executable, *sys.argv] if argv is None else [__file__, *argv])
    results, versions = run(args)
    print(render(args, command, results, versions))
    if args.json is not None:
        payload = as_json(args, command, results, versions)
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        print(f"JSON written to {args.json}")
    failures = [
        result.reason
        for chart_results in results.values()
        for result in chart_results.values()
        if result.status == "failed"
    ]
    if failures:
        print("\nBENCHMARK FAILED: implementation(s) not doing the expected work:", file=sys.stderr)
        for failure in failures:
            print(f"  {failure}", file=sys.stderr)
        return 1
    if args.require_ours and any(not r[OURS].samples for r in results.values()):
        print("\nours was not measured on every chart (--require-ours)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
