"""What ``available_events`` costs (statecharts.core.availability): the question the API's
execution detail, the admin's send form and ``statechart show`` ask of one execution.

Chart (b) of core_throughput.py (``charts/datamodel_ecmascript.scxml``: a 4-region parallel
state with guarded transitions), at its state after the start and after each event of its
cycle. Measured in this process, after warm-up, on the core alone (no database: the Django
wrapper adds the position's decode, which the durable step benchmarks measure):

- **available_events**: the whole answer, guards evaluated on a throwaway datamodel (its
  QuickJS engine comes from the thread's spares after the first call);
- **interpreter step**: one ``handle_event`` from a restored state (a new datamodel restored
  from the snapshot each time, as a durable worker stepping many executions does), for scale.

Reported: the median over ``--rounds`` of each round's median microseconds per call
(``time.perf_counter``). Noise on a shared machine is large: compare the rows of one run.

Usage (from the repository root)::

    python benchmarks/available_events.py [--rounds 5] [--calls 200] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHART = HERE / "charts" / "datamodel_ecmascript.scxml"
CYCLE = ("produce", "tick", "done", "tick", "audit", "stats")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()

    from statecharts.core import Event, Interpreter, load_chart
    from statecharts.core.availability import available_events

    chart = load_chart(CHART.read_text())
    interpreter = Interpreter(chart)
    states = [interpreter.initialize("bench").state]
    for name in CYCLE:
        states.append(interpreter.handle_event(states[-1], Event(name)).state)
    sizes = [len(available_events(chart, state)) for state in states]

    def per_call(function: object) -> float:
        for state in states[:2]:  # warm-up
            function(state)  # type: ignore[operator]
        timings = []
        for i in range(args.calls):
            state = states[i % len(states)]
            start = time.perf_counter()
            function(state)  # type: ignore[operator]
            timings.append((time.perf_counter() - start) * 1e6)
        return statistics.median(timings)

    stepper = Interpreter(chart)

    def step(state: object) -> None:
        # Each call is given another state than the last one produced: the engine is
        # restored from the state's snapshot, as a worker stepping many executions does.
        stepper.handle_event(state, Event("tick"))  # type: ignore[arg-type]

    rounds: dict[str, list[float]] = {"available_events": [], "interpreter step": []}
    for _ in range(args.rounds):
        rounds["available_events"].append(per_call(lambda s: available_events(chart, s)))
        rounds["interpreter step"].append(per_call(step))
    results = {name: round(statistics.median(values), 1) for name, values in rounds.items()}
    print(f"states: {len(states)}, available events per state: {sizes}")
    for name, value in results.items():
        print(f"{name:>18}: {value:10.1f} us per call")
    if args.json:
        Path(args.json).write_text(json.dumps({"sizes": sizes, "us_per_call": results}))


if __name__ == "__main__":
    main()
