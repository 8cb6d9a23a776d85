"""What a chart that uses no code pays for the ECMAScript default datamodel: nothing.

The spec leaves the datamodel of an ``<scxml>`` without a ``datamodel`` attribute to the
platform; ours is the ``DEFAULT_DATAMODEL`` setting, shipped as ``ecmascript``. A chart that
is given its datamodel by default and has no code and no data at all runs on the null engine
(``Chart.engine``), so it must run as fast as the same chart declaring ``datamodel="null"``.

Three variants of core_throughput.py's chart (a) (``charts/nested_parallel.scxml``: no code),
each loaded with ``load_chart(..., default_datamodel="ecmascript")`` and driven by the same
cyclic external events through ``MemoryDriver``, interleaved, ``--repeat`` timed runs of
``--events`` events each (``time.perf_counter``), and ``--events / 10`` session starts; the
median events/s and starts/s are reported:

- ``declared null``: the chart as it is (``datamodel="null"``);
- ``no attribute``: the attribute removed (the default applies: ecmascript, null engine);
- ``declared ecmascript``: ``datamodel="ecmascript"`` (an engine it never uses: the cost
  the default would have had).

Usage (from the repository root)::

    python benchmarks/default_datamodel.py [--events 20000] [--repeat 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from statecharts.core import load_chart  # noqa: E402
from statecharts.drivers.memory import MemoryDriver  # noqa: E402

CYCLE = ("go", "next", "split", "tick", "tock", "reset")
DECLARED = 'datamodel="null"'


def variants() -> dict[str, str]:
    source = (HERE / "charts" / "nested_parallel.scxml").read_text(encoding="utf-8")
    assert DECLARED in source
    return {
        "declared null": source,
        "no attribute": source.replace(DECLARED, ""),
        "declared ecmascript": source.replace(DECLARED, 'datamodel="ecmascript"'),
    }


def run(source: str, events: int) -> float:
    chart = load_chart(source, default_datamodel="ecmascript")
    session = MemoryDriver().start(chart)
    gc.collect()
    started = time.perf_counter()
    for i in range(events):
        session.send(CYCLE[i % len(CYCLE)])
    elapsed = time.perf_counter() - started
    assert "idle" in session.configuration or events % len(CYCLE)
    return events / elapsed


def starts(source: str, count: int) -> float:
    """Sessions started (and run to their first stable configuration) per second."""
    chart = load_chart(source, default_datamodel="ecmascript")
    driver = MemoryDriver()
    gc.collect()
    started = time.perf_counter()
    for _ in range(count):
        driver.start(chart)
    return count / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path)
    options = parser.parse_args()
    charts = variants()
    engines = {
        name: (load_chart(s, default_datamodel="ecmascript").datamodel,
               load_chart(s, default_datamodel="ecmascript").engine)
        for name, s in charts.items()
    }
    for source in charts.values():
        run(source, 600)  # warm-up
    rates: dict[str, list[float]] = {name: [] for name in charts}
    start_rates: dict[str, list[float]] = {name: [] for name in charts}
    for _ in range(options.repeat):
        for name, source in charts.items():
            rates[name].append(run(source, options.events))
            start_rates[name].append(starts(source, options.events // 10))
    results = {name: statistics.median(values) for name, values in rates.items()}
    start_results = {name: statistics.median(values) for name, values in start_rates.items()}
    for name, rate in results.items():
        datamodel, engine = engines[name]
        print(
            f"{name:20} datamodel {datamodel:10} engine {engine:10} {rate:10,.0f} events/s "
            f"{start_results[name]:10,.0f} starts/s"
        )
    baseline = results["declared null"]
    print(f"no attribute / declared null: {results['no attribute'] / baseline:.2f}")
    print(f"declared ecmascript / declared null: {results['declared ecmascript'] / baseline:.2f}")
    if options.json:
        options.json.write_text(
            json.dumps(
                {"events_per_second": results, "starts_per_second": start_results,
                 "engines": engines}
            )
        )


if __name__ == "__main__":
    main()
