"""What the ECMAScript sandbox costs per step: kept alive, and rebuilt from a state.

Chart (b) of core_throughput.py (``charts/datamodel_ecmascript.scxml``: guards, assignments
and raised events in a 4-region parallel state), driven by its cycle of external events
``produce, tick, done, tick, audit, stats``:

- **live**: one session, every step handed the state the interpreter returned last, so the
  engine is kept alive (the in-memory driver's case, and the durable stepper's when it steps
  the same execution again);
- **restored**: two sessions stepped alternately, so every step rebuilds the engine from the
  state's snapshot (a durable worker stepping many executions): a fresh QuickJS context, the
  sandbox prelude (which, since the realm lockdown, also freezes the built-ins), the system
  variables and the restore;
- **new engine**: ``EcmascriptDatamodel()`` plus its system variables alone.

Each measurement runs in its own subprocess on the code tree first on ``PYTHONPATH``; with
``--baseline REV`` the same runs on that git revision (``git archive`` into a temporary
directory), alternating baseline and current ``--rounds`` times. Reported: the median over
rounds of each round's median microseconds per step (``time.perf_counter``, after warm-up).
Noise on a shared machine is large: compare the two columns of one run, not runs.

Usage (from the repository root)::

    python benchmarks/sandbox_steps.py [--baseline REV] [--rounds 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CHART = HERE / "charts" / "datamodel_ecmascript.scxml"
CYCLE = ("produce", "tick", "done", "tick", "audit", "stats")


def child(kind: str) -> None:
    from statecharts.core import Event, Interpreter, State, load_chart

    chart = load_chart(CHART.read_text())
    events = [Event(name) for name in CYCLE]

    def per_step(run: int, repeats: int, step: object) -> float:
        assert callable(step)
        for i in range(run // 5):
            step(i)
        samples = []
        for _ in range(repeats):
            began = time.perf_counter()
            for i in range(run):
                step(i)
            samples.append((time.perf_counter() - began) / run * 1e6)
        return statistics.median(samples)

    if kind == "live":
        interpreter = Interpreter(chart)
        state = [interpreter.initialize("live").state]

        def live(i: int) -> None:
            state[0] = interpreter.handle_event(state[0], events[i % 6]).state

        print(json.dumps(per_step(3000, 7, live)))
    elif kind == "restored":
        interpreter = Interpreter(chart)
        states = [
            State.from_dict(json.loads(json.dumps(interpreter.initialize(s).state.to_dict())))
            for s in ("A", "B")
        ]

        def restored(i: int) -> None:
            # The two sessions alternate, so no step is handed the state produced last.
            states[i % 2] = interpreter.handle_event(states[i % 2], events[(i // 2) % 6]).state

        print(json.dumps(per_step(400, 7, restored)))
    else:
        from statecharts.core.datamodel.ecmascript import EcmascriptDatamodel

        def new_engine(i: int) -> None:
            EcmascriptDatamodel().bind_system("s", None, {}, lambda _id: False, list)

        print(json.dumps(per_step(400, 7, new_engine)))


def export(revision: str, into: Path) -> Path:
    archive = subprocess.run(["git", "archive", revision], cwd=REPO, capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def measure(kind: str, root: Path) -> float:
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", kind],
        cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True, text=True, check=True,
    )
    value: float = json.loads(done.stdout.strip().splitlines()[-1])
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", help="a git revision to measure in the same run")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    kinds = ("live", "restored", "new engine")
    with tempfile.TemporaryDirectory() as temporary:
        trees = {"current": REPO}
        if args.baseline:
            trees = {f"baseline {args.baseline}": export(args.baseline, Path(temporary)), **trees}
        samples: dict[str, dict[str, list[float]]] = {k: {t: [] for t in trees} for k in kinds}
        print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
        for round_ in range(args.rounds):
            for kind in kinds:
                for label, root in trees.items():
                    samples[kind][label].append(measure(kind, root))
            print(f"round {round_ + 1}: " + "; ".join(
                f"{kind} " + " / ".join(f"{samples[kind][t][-1]:.1f}" for t in trees)
                for kind in kinds), flush=True)
    print()
    print("| us per step (median of rounds) | " + " | ".join(trees) + " |")
    print("|---|" + "---:|" * len(trees))
    for kind in kinds:
        print(f"| {kind} | " + " | ".join(
            f"{statistics.median(samples[kind][t]):,.1f}" for t in trees) + " |")
    if args.json:
        args.json.write_text(json.dumps(samples, indent=2))


if __name__ == "__main__":
    main()
