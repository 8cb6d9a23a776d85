"""The cost of checking a chart's code at load (``statecharts.core.expressions``).

Loading a chart through the platform (``Chart.objects.load``, the admin, the API,
``statechart validate``/``load``) compiles every expression and ``<script>`` of an
ECMAScript chart, without running it, after the core has compiled the chart itself. This
measures both on the largest documents the core accepts (just under the 2 MiB bound), in
one fresh subprocess per shape (the check keeps verdicts per text, so a second check of the
same texts in one process would be free):

- ``many_expressions``: states with a guarded transition, an ``<assign>`` and a ``<log>``
  each (every text different): the most code a document can hold;
- ``one_script``: one ``<script>`` of about 2 MB (one big text);
- ``no_code``: the same states without any code (what the check costs a chart without code);
- ``syntax_errors``: states whose every guard is a syntax error (every one reported with the
  line:column of its attribute).

Reported per shape: ``load_chart`` (parse, validate, compile) and ``check_expressions``, CPU
seconds (``time.process_time``), and the check as a share of the two.

Usage (from the repository root)::

    python benchmarks/expression_check.py [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
NS = "http://www.w3.org/2005/07/scxml"
TARGET_BYTES = 2 * 1024 * 1024 - 4096


def _document(shape: str) -> str:
    head = f'<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript" initial="s0">'
    if shape == "one_script":
        body = "var total = 0;\n"
        line = "total = total + Math.max(1, 2) * 3; // some arithmetic\n"
        lines = (TARGET_BYTES - len(head) - 200) // len(line)
        return f'{head}<script>{body}{line * lines}</script><state id="s0"/></scxml>'
    parts: list[str] = []
    size = len(head) + 64
    i = 0
    while True:
        if shape == "many_expressions":
            piece = (
                f'<state id="s{i}"><transition event="e" cond="count{i % 97} &gt; {i}" '
                f'target="s{i + 1}"><assign location="count{i % 97}" expr="count{i % 97} + {i}"/>'
                f'<log expr="\'at \' + {i}"/></transition></state>\n'
            )
        elif shape == "syntax_errors":
            piece = (
                f'<state id="s{i}"><transition event="e" cond="x +* {i}" '
                f'target="s{i + 1}"/></state>\n'
            )
        else:
            piece = f'<state id="s{i}"><transition event="e" target="s{i + 1}"/></state>\n'
        if size + len(piece) > TARGET_BYTES:
            break
        parts.append(piece)
        size += len(piece)
        i += 1
    parts.append(f'<final id="s{i}"/>')
    return head + "".join(parts) + "</scxml>"


_MEASURE = """
import json, sys, time
sys.path.insert(0, {repo!r})
from statecharts.core import load_chart
from statecharts.core.expressions import check_expressions, code_sites
source = sys.stdin.read()
started = time.process_time()
chart = load_chart(source)
loaded = time.process_time() - started
started = time.process_time()
problems = check_expressions(chart, source)
checked = time.process_time() - started
print(json.dumps({{"bytes": len(source.encode()), "texts": sum(1 for _ in code_sites(chart)),
                  "problems": len(problems), "load_s": loaded, "check_s": checked}}))
"""


def measure(shape: str) -> dict[str, float]:
    result = subprocess.run(
        [sys.executable, "-c", _MEASURE.format(repo=str(REPO))],
        input=_document(shape),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path)
    options = parser.parse_args()
    results = {}
    for shape in ("many_expressions", "one_script", "no_code", "syntax_errors"):
        r = results[shape] = measure(shape)
        share = r["check_s"] / (r["load_s"] + r["check_s"]) if r["load_s"] + r["check_s"] else 0
        print(
            f"{shape:17} {r['bytes']:>9,} bytes {r['texts']:>7,} texts  load_chart "
            f"{r['load_s']:6.2f} s  check {r['check_s']:6.2f} s  ({share:.0%} of both)  "
            f"problems {r['problems']}"
        )
    if options.json:
        options.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
