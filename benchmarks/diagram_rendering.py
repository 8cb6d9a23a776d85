"""How long the diagram renderer takes on big charts (milliseconds per render, median).

The charts: the test suite's generated chart of 20 groups of 10 states (over 600 states,
parallel and compound), and the largest W3C document. Usage::

    python benchmarks/diagram_rendering.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "diagram"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    from test_diagram import big_chart  # the generated chart the tests render

    from statecharts.core import load_chart, load_chart_file
    from statecharts.diagram import render_svg

    charts = {"generated, 20 groups x 10": load_chart(big_chart(20, 10))}
    w3c = ROOT.parent / "shared" / "w3c" / "scxml"
    if w3c.is_dir():
        largest = max(w3c.glob("test*.scxml"), key=lambda p: p.stat().st_size)
        charts[f"W3C {largest.stem}"] = load_chart_file(largest)
    for name, chart in charts.items():
        times = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            render_svg(chart)
            times.append((time.perf_counter() - started) * 1000)
        print(f"{name} ({len(chart.states)} states): median {statistics.median(times):.1f} ms, "
              f"best {min(times):.1f} ms over {args.repeat} renders")
    return 0


if __name__ == "__main__":
    sys.exit(main())
