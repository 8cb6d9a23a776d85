"""Before and after a change: one benchmark run on a baseline revision and on the working tree,
alternated in one run, so both see the same machine load.

The machine these numbers come from is shared and noisy; a benchmark's own ratio (ours against
sismic in ``core_throughput.py``, the stepper against a bare transaction in
``durable_steps.py``) already cancels much of the load, and alternating the two trees pair by
pair cancels most of the rest. For each pair, the baseline revision's own copy of the
benchmark runs first in a tree exported with ``git archive`` (its own code first on
``PYTHONPATH``, its own working directory), then this tree's; each writes its results as JSON
(``--json``) and the ratios are read from there. The report gives every pair and the median of
each side; "after/before" is the median's change.

Usage (from the repository root)::

    python benchmarks/revisions.py core_throughput --baseline REV [--pairs 3] [-- ARGS...]
    python benchmarks/revisions.py durable_steps --baseline REV [--pairs 3] [-- ARGS...]

``ARGS`` go to both runs of the benchmark (e.g. ``--events 20000`` or ``--db sqlite``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

Metrics = dict[str, float]


def _core_throughput(payload: dict[str, Any]) -> Metrics:
    metrics: Metrics = {}
    for key, chart in payload["charts"].items():
        ratio = chart.get("ratio_ours_over_best_competitor_median")
        if ratio is not None:
            metrics[f"{key}: ours / best competitor"] = float(ratio)
        ours = chart["results"].get("ours", {}).get("median_events_per_second")
        if ours:
            metrics[f"{key}: ours, events/s"] = float(ours)
    return metrics


def _durable_steps(payload: dict[str, Any]) -> Metrics:
    metrics: Metrics = {}
    for database in payload["results"]:
        for chart, ratio in database["ratios"].items():
            metrics[f"{database['database']} {chart}: stepper / floor"] = float(ratio)
        # This process's CPU per step (the wall time is mostly the database's fsync and, on a
        # shared machine, the other jobs): the stepper's, and against the floor's.
        for chart in database.get("charts", []):
            stepper_cpu, floor_cpu = chart.get("stepper_cpu"), chart.get("floor_cpu")
            if stepper_cpu and floor_cpu:
                key = f"{database['database']} {chart['chart']}"
                metrics[f"{key}: stepper CPU us/step"] = statistics.median(stepper_cpu)
                metrics[f"{key}: stepper CPU / floor CPU"] = statistics.median(
                    stepper_cpu
                ) / statistics.median(floor_cpu)
    return metrics


READERS: dict[str, Callable[[dict[str, Any]], Metrics]] = {
    "core_throughput": _core_throughput,
    "durable_steps": _durable_steps,
}


def export(revision: str, into: Path) -> Path:
    """The revision's files (``git archive``), as a tree of their own."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", revision],
        cwd=REPO, check=True, capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def run_once(tree: Path, benchmark: str, extra: list[str]) -> Metrics:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        environment = {**os.environ, "PYTHONPATH": str(tree)}
        command = [sys.executable, f"benchmarks/{benchmark}.py", *extra, "--json", out.name]
        done = subprocess.run(command, cwd=tree, env=environment, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(
                f"{benchmark} failed in {tree} (exit {done.returncode}):\n"
                f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
            )
        return READERS[benchmark](json.loads(Path(out.name).read_text(encoding="utf-8")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("benchmark", choices=sorted(READERS))
    parser.add_argument("--baseline", required=True, help="the git revision to compare with")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write every pair as JSON")
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    extra = argv[split + 1 :]  # after "--": the benchmark's own arguments
    revision = subprocess.run(
        ["git", "rev-parse", "--short", args.baseline],
        cwd=REPO, check=True, capture_output=True, text=True,
    ).stdout.strip()
    before: list[Metrics] = []
    after: list[Metrics] = []
    with tempfile.TemporaryDirectory(prefix="baseline-") as folder:
        baseline = export(revision, Path(folder))
        for pair in range(1, args.pairs + 1):
            before.append(run_once(baseline, args.benchmark, extra))
            after.append(run_once(REPO, args.benchmark, extra))
            print(f"pair {pair}/{args.pairs} done", file=sys.stderr, flush=True)
    print(f"{args.benchmark}: baseline {revision} against the working tree, "
          f"{args.pairs} alternated pairs ({' '.join(extra) or 'default arguments'})\n")
    print(f"| metric | before ({revision}), per pair | after, per pair | before median "
          "| after median | after/before |")
    print("|---|---|---|---:|---:|---:|")
    for metric in before[0]:
        old = [m[metric] for m in before if metric in m]
        new = [m[metric] for m in after if metric in m]
        if not new:
            continue
        old_median, new_median = statistics.median(old), statistics.median(new)
        print(
            f"| {metric} | {', '.join(f'{v:.3g}' for v in old)} | "
            f"{', '.join(f'{v:.3g}' for v in new)} | {old_median:.3g} | {new_median:.3g} | "
            f"{new_median / old_median:.2f} |"
        )
    if args.json is not None:
        args.json.write_text(
            json.dumps({"baseline": revision, "before": before, "after": after}, indent=2) + "\n",
            encoding="utf-8",
        )


if __name__ == "__main__":
    main()
