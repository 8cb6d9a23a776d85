"""CPU instructions per unit of work, counted by valgrind: a comparison a loaded machine
cannot blur.

Wall-clock benchmarks on a shared 2-core machine swing by 2x with other people's load; the
number of instructions a piece of work executes does not. For each case and each code tree,
``valgrind --tool=callgrind`` counts the instructions of a process that does the setup and
then N units of work, and of one that does the setup only; the difference divided by N is
the cost of one unit (interpreter, QuickJS and Python together):

- ``live (a)``, ``live (b)``: one external event on core_throughput.py's chart (a) (null
  datamodel) or (b) (ECMAScript datamodel), the engine kept alive (cycle of 6 events);
- ``driver (a)``, ``driver (b)``: the same through the in-memory driver (``session.send``:
  the interpreter, the planner and the driver's performers), as core_throughput.py runs it;
- ``restored (b)``: one event on chart (b) with the engine rebuilt from the state (two
  sessions stepped alternately);
- ``new engine``: ``EcmascriptDatamodel()`` plus its system variables, none given back;
- ``durable (send)``: one ``statecharts.stepper.send`` of an external event (the door's checks,
  the durable step, its history row) on a two-state null-datamodel chart, SQLite in memory
  (``demo.settings.test``, migrated during the setup).

Only user-space instructions are counted. A call into QuickJS also costs time in the kernel
(the binding reads the process CPU clock for the time limit on every call), which this does
not see: a change that removes such calls shows in the CPU time of core_throughput.py
(``--clock cpu``) more than here.

With ``--baseline REV`` the same runs on that git revision (``git archive`` into a temporary
directory, first on ``PYTHONPATH``). Needs valgrind (``apt-get install valgrind``); each
count takes tens of seconds.

Usage (from the repository root)::

    python benchmarks/instructions.py [--baseline REV] [--cases "driver (b)" ...]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

CHILD = r"""
import json, sys
from pathlib import Path
charts = Path(sys.argv[1])
case, n = sys.argv[2], int(sys.argv[3])
from statecharts.core import Event, Interpreter, State, load_chart
if case.startswith("live"):
    chart = "nested_parallel.scxml" if case == "live (a)" else "datamodel_ecmascript.scxml"
    names = (["go", "next", "split", "tick", "tock", "reset"] if case == "live (a)"
             else ["produce", "tick", "done", "tick", "audit", "stats"])
    interpreter = Interpreter(load_chart((charts / chart).read_text()))
    state = interpreter.initialize("count").state
    events = [Event(name) for name in names]
    for i in range(600 + n):
        state = interpreter.handle_event(state, events[i % 6]).state
elif case.startswith("driver"):
    from statecharts.drivers.memory import MemoryDriver
    chart = "nested_parallel.scxml" if case == "driver (a)" else "datamodel_ecmascript.scxml"
    names = (["go", "next", "split", "tick", "tock", "reset"] if case == "driver (a)"
             else ["produce", "tick", "done", "tick", "audit", "stats"])
    session = MemoryDriver().start(load_chart((charts / chart).read_text()))
    for i in range(600 + n):
        session.send(names[i % 6])
elif case == "restored (b)":
    interpreter = Interpreter(load_chart((charts / "datamodel_ecmascript.scxml").read_text()))
    states = [State.from_dict(json.loads(json.dumps(interpreter.initialize(s).state.to_dict())))
              for s in "AB"]
    events = [Event(name) for name in ["produce", "tick", "done", "tick", "audit", "stats"]]
    for i in range(60 + n):
        states[i % 2] = interpreter.handle_event(states[i % 2], events[(i // 2) % 6]).state
elif case == "durable (send)":
    import os
    os.environ.update(DJANGO_SETTINGS_MODULE="demo.settings.test", DJANGO_DEBUG="0",
                      DATABASE_URL="sqlite:///:memory:")
    import django
    from django.core.management import call_command
    django.setup()
    call_command("migrate", verbosity=0, interactive=False)
    from statecharts import stepper
    from statecharts.models import Chart
    chart = Chart.objects.load(
        '<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="null" '
        'name="bench_toggle" initial="off">'
        '<state id="off"><transition event="toggle" target="on"/></state>'
        '<state id="on"><transition event="toggle" target="off"/></state></scxml>')
    execution = stepper.start(chart, caller_context={"source": "bench"})
    for i in range(20 + n):
        stepper.send(execution, "toggle", {"i": i}, caller_context={"source": "bench"})
else:
    from statecharts.core.datamodel.ecmascript import EcmascriptDatamodel
    kept = []
    for i in range(2 + n):
        datamodel = EcmascriptDatamodel()
        datamodel.bind_system("s", None, {}, lambda _id: False, list)
        kept.append(datamodel)
"""

CASES = {
    "live (a)": 3000,
    "live (b)": 3000,
    "driver (a)": 3000,
    "driver (b)": 3000,
    "restored (b)": 300,
    "new engine": 30,
    "durable (send)": 1000,
}


def count(root: Path, case: str, n: int) -> int:
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
         sys.executable, "-c", CHILD, str(HERE / "charts"), case, str(n)],
        # A fixed hash seed: the order of sets and dicts of strings (and so the work done
        # walking them) is the same in every run.
        cwd=root, env={**os.environ, "PYTHONPATH": str(root), "PYTHONHASHSEED": "0"},
        capture_output=True, text=True, check=True,
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    assert found, done.stderr[-2000:]
    return int(found.group(1))


def export(revision: str, into: Path) -> Path:
    archive = subprocess.run(["git", "archive", revision], cwd=REPO, capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", help="a git revision to count in the same run")
    parser.add_argument("--cases", nargs="+", choices=sorted(CASES), default=list(CASES))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        trees = {"current": REPO}
        if args.baseline:
            trees = {f"baseline {args.baseline}": export(args.baseline, Path(temporary)), **trees}
        print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
        rows = []
        for case in args.cases:
            n = CASES[case]
            per_unit = {}
            for label, root in trees.items():
                per_unit[label] = (count(root, case, n) - count(root, case, 0)) / n
                print(f"  {case:13} {label:22} {per_unit[label]:>14,.0f} instructions", flush=True)
            rows.append((case, per_unit))
    print()
    print("| instructions per unit | " + " | ".join(trees) + " |")
    print("|---|" + "---:|" * len(trees))
    for case, per_unit in rows:
        print(f"| {case} | " + " | ".join(f"{per_unit[t]:,.0f}" for t in trees) + " |")


if __name__ == "__main__":
    main()
