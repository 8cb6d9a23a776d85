"""Loading (parse, validate, compile) and starting the worst document shapes near 2 MB.

The core refuses documents over ``MAX_DOCUMENT_BYTES`` (2 MiB); anything under it must load
in time and memory linear in its size, whatever its shape. Four shapes, each generated just
under the bound:

- ``one_line``: 30k states with a transition each, all on ONE line (columns were computed by
  decoding the line from its start for every element: quadratic);
- ``deep``: chains of states nested 120 deep (each state's descendant set was built by adding
  it to every ancestor's set, copying the root's each time);
- ``many_attrs``: one element with 130k attributes (each one a warning with its position);
- ``many_states``: 30k states, one per line.

For each shape and each code tree, one fresh subprocess generates the document, then times
``load_chart`` (wall clock, ``time.perf_counter``, and this process's CPU time,
``time.process_time``: on a shared machine the CPU time is the steadier of the two) and
``Interpreter(chart).initialize`` and reports its peak resident memory. With
``--baseline REV`` the same is run on that git revision (exported with ``git archive``
into a temporary directory and put first on ``PYTHONPATH``),
alternating baseline and current per shape, in the same run. A measurement that does not
finish within ``--timeout`` seconds is reported as such.

Usage (from the repository root)::

    python benchmarks/loading.py [--baseline REV] [--timeout 120] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
NS = "http://www.w3.org/2005/07/scxml"
TARGET_BYTES = 2 * 1024 * 1024 - 4096  # just under the 2 MiB document bound
HEAD = f'<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript" initial="s0">'


def _fill(unit: Callable[[int], str], separator: str = "") -> list[str]:
    parts: list[str] = []
    size = len(HEAD) + 64
    while True:
        piece = unit(len(parts))
        if size + len(piece) + len(separator) > TARGET_BYTES:
            return parts
        parts.append(piece)
        size += len(piece) + len(separator)


def _chain(separator: str) -> str:
    parts = _fill(
        lambda i: f'<state id="s{i}"><transition event="e" target="s{i + 1}"/></state>', separator
    )
    return separator.join(parts) + separator + f'<state id="s{len(parts)}"/>'


def one_line() -> str:
    return HEAD + _chain("") + "</scxml>"


def many_states() -> str:
    return HEAD + "\n" + _chain("\n") + "\n</scxml>\n"


def deep() -> str:
    def chain(i: int) -> str:
        return "".join(f'<state id="d{i}_{j}">' for j in range(120)) + "</state>" * 120 + "\n"

    return HEAD.replace('initial="s0"', 'initial="d0_0"') + "".join(_fill(chain)) + "</scxml>"


def many_attrs() -> str:
    attributes = " ".join(_fill(lambda i: f'a{i}="{i}"', " "))
    return HEAD + f'<state id="s0" {attributes}/></scxml>'


SHAPES: dict[str, Callable[[], str]] = {
    "one_line": one_line,
    "deep": deep,
    "many_attrs": many_attrs,
    "many_states": many_states,
}


def child(shape: str) -> None:
    """Runs in the subprocess: one shape, on whatever ``statecharts`` is first on the path."""
    import statecharts
    from statecharts.core import Interpreter, load_chart

    source = SHAPES[shape]()
    began, began_cpu = time.perf_counter(), time.process_time()
    chart = load_chart(source)
    loaded, loaded_cpu = time.perf_counter(), time.process_time()
    load_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    Interpreter(chart).initialize("bench")
    started = time.perf_counter()
    print(json.dumps({
        "bytes": len(source.encode()),
        "states": len(chart.states),
        "warnings": len(chart.warnings),
        "load_s": loaded - began,
        "load_cpu_s": loaded_cpu - began_cpu,
        "start_s": started - loaded,
        "load_peak_mb": load_rss / 1024,
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "code": str(Path(statecharts.__file__).parent.parent),
    }))


def measure(shape: str, root: Path, timeout: float) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    try:
        done = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--child", shape],
            cwd=root, env=env, capture_output=True, text=True, timeout=timeout, check=True,
        )
    except subprocess.TimeoutExpired:
        return {"timeout_s": timeout}
    except subprocess.CalledProcessError as exc:
        return {"error": exc.stderr.strip().splitlines()[-1] if exc.stderr else str(exc)}
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def export(revision: str, into: Path) -> Path:
    archive = subprocess.run(["git", "archive", revision], cwd=REPO, capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def cell(result: dict[str, object], key: str, unit: str) -> str:
    if "timeout_s" in result:
        return f"> {result['timeout_s']:g} s (timeout)"
    if "error" in result:
        return f"error: {result['error']}"
    value = result[key]
    assert isinstance(value, float)
    return f"{value:,.2f} {unit}" if unit == "s" else f"{value:,.0f} {unit}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", help="a git revision to measure in the same run")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    results: dict[str, dict[str, dict[str, object]]] = {}
    with tempfile.TemporaryDirectory() as temporary:
        trees = {"current": REPO}
        if args.baseline:
            trees = {f"baseline {args.baseline}": export(args.baseline, Path(temporary)), **trees}
        print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
        print(f"python:  {sys.version.split()[0]}; timeout {args.timeout:g} s per measurement")
        for shape in SHAPES:
            for label, root in trees.items():
                results.setdefault(shape, {})[label] = result = measure(shape, root, args.timeout)
                print(f"  {shape:12} {label:22} load {cell(result, 'load_s', 's'):>22} "
                      f"(CPU {cell(result, 'load_cpu_s', 's')})  "
                      f"start {cell(result, 'start_s', 's'):>22}  "
                      f"peak {cell(result, 'peak_mb', 'MB'):>22}", flush=True)
    print()
    print("| shape | bytes | states | code | load | load (CPU) | start | peak RSS |")
    print("|---|---:|---:|---|---:|---:|---:|---:|")
    for shape, by_tree in results.items():
        for label, result in by_tree.items():
            size = next((r.get("bytes") for r in by_tree.values() if "bytes" in r), "?")
            states = next((r.get("states") for r in by_tree.values() if "states" in r), "?")
            print(f"| {shape} | {size:,} | {states:,} | {label} | {cell(result, 'load_s', 's')} | "
                  f"{cell(result, 'load_cpu_s', 's')} | {cell(result, 'start_s', 's')} | "
                  f"{cell(result, 'peak_mb', 'MB')} |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
