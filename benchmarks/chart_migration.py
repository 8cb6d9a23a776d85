"""Migrating running executions to a new chart version, on PostgreSQL: migrations per second.

A throwaway PostgreSQL database (``statecharts_bench_<pid>`` on the server of ``--pg-url``,
migrated, dropped afterwards) gets ``--executions`` (10,000) executions of the chart below
(a parallel state, a history state that remembers a state, a pending timer, a datamodel),
each exactly as the stepper leaves it after ``start``, ``bill`` and ``recheck``: ONE
execution is driven through the stepper, and the others are copies of its rows (execution,
history, pending timer) with their own session ids (in the row and in the position) and
business keys, inserted in bulk, so the setup takes seconds instead of 30,000 steps. Then a
second version is loaded (one state renamed, one region added) and, timed:

1. the dry run of the plan over every execution (``statecharts.operations.chart_migration.dry_run``:
   decode, map, encode, check; nothing written);
2. the migration itself (``migrate``: per execution, one transaction that locks the row,
   maps its position, updates the row and inserts one history entry).

The baseline, in the same run: ``--steps`` (1,000) durable steps (``stepper.send`` of one
event to migrated executions: a transaction that locks, decodes, advances, encodes, updates and
inserts a history row, like a migration), so the ratio migrations/steps is comparable across
runs on a loaded machine. Reported: executions per second of each (wall clock), this
process's CPU per migration and per step, the ratio, the load average, and
a check afterwards: every execution is on the new version, has exactly one ``migrated``
history entry, and kept its pending timer. Then a re-run of the migration (idempotent: every
execution ``up_to_date``), timed too.

Usage (from the repository root)::

    python benchmarks/chart_migration.py [--executions 10000] [--pg-url URL] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from durable_steps import (  # noqa: E402  (a sibling script, not a package)
    DEFAULT_PG_URL,
    server_description,
    setup_django,
    throwaway_database,
)

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
V1 = f"""<scxml {NS} name="parcel" initial="handling">
  <datamodel><data id="reminders" expr="0"/><data id="owner" expr="'someone'"/></datamodel>
  <parallel id="handling">
    <state id="billing" initial="unbilled">
      <history id="billing_h" type="shallow"><transition target="unbilled"/></history>
      <transition event="recheck" target="billing_h"/>
      <state id="unbilled"><transition event="bill" target="billed"/></state>
      <state id="billed"/>
    </state>
    <state id="shipping" initial="packing">
      <state id="packing">
        <onentry><send id="remind" event="remind" delay="1d"/></onentry>
        <onexit><cancel sendid="remind"/></onexit>
        <transition event="remind" target="packing">
          <assign location="reminders" expr="reminders + 1"/>
        </transition>
        <transition event="ship" target="shipped"/>
      </state>
      <state id="shipped"/>
    </state>
  </parallel>
</scxml>"""
V2 = V1.replace('"billed"', '"invoiced"').replace(
    """      <state id="shipped"/>
    </state>""",
    """      <state id="shipped"/>
    </state>
    <state id="insurance" initial="uninsured">
      <state id="uninsured"><transition event="insure" target="insured"/></state>
      <state id="insured"/>
    </state>""",
)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def populate(count: int) -> int:
    """``count`` executions of V1 after start, bill, recheck (see the module docstring)."""
    from django.db import transaction

    from statecharts import stepper
    from statecharts.models import Chart, Execution, HistoryEntry
    from timers.models import Timer

    chart = Chart.objects.load(V1)
    model = stepper.start(chart, business_key="parcel-0")
    stepper.send(model, "bill")
    stepper.send(model, "recheck")
    model.refresh_from_db()
    history = list(HistoryEntry.objects.filter(execution=model).order_by("seq"))
    [timer] = Timer.objects.filter(execution=model, status="pending")
    blob = bytes(model.position)
    batch = 1000
    made = 1
    while made < count:
        size = min(batch, count - made)
        with transaction.atomic():
            rows = []
            for i in range(made, made + size):
                session = f"{i:032x}"
                row = Execution(
                    chart=chart,
                    status=model.status,
                    session_id=session,
                    position=blob.replace(model.session_id.encode(), session.encode()),
                    configuration=model.configuration,
                    active_states=model.active_states,
                    steps=model.steps,
                    business_key=f"parcel-{i}",
                    metadata={},
                    created=model.created,
                    updated=model.updated,
                )
                rows.append(row)
            Execution.objects.bulk_create(rows)
            entries, timers = [], []
            for row in rows:
                for entry in history:
                    entry_copy = HistoryEntry(
                        **{f.attname: getattr(entry, f.attname) for f in HistoryEntry._meta.fields}
                    )
                    entry_copy.pk = None
                    entry_copy.execution_id = row.pk
                    entries.append(entry_copy)
                timer_copy = Timer(
                    **{f.attname: getattr(timer, f.attname) for f in Timer._meta.fields}
                )
                timer_copy.pk = None
                timer_copy.execution_id = row.pk
                timers.append(timer_copy)
            HistoryEntry.objects.bulk_create(entries)
            Timer.objects.bulk_create(timers)
        made += size
    return Execution.objects.count()


def timed(label: str, work: Any) -> tuple[float, float, Any]:
    started, cpu = time.perf_counter(), time.process_time()
    result = work()
    wall, used = time.perf_counter() - started, time.process_time() - cpu
    log(f"{label}: {wall:.1f} s")
    return wall, used, result


def run(count: int, steps: int) -> dict[str, Any]:
    from statecharts.models import Chart, Execution, HistoryEntry
    from statecharts.operations.chart_migration import MigrationPlan, Verdict, dry_run, migrate
    from timers.models import Timer

    log(f"populating {count} executions")
    total = populate(count)
    assert total == count, total
    v2 = Chart.objects.load(V2, new_version=True)
    plan = MigrationPlan.make(v2, {"billed": "invoiced"})
    dry_wall, dry_cpu, dry = timed("dry run", lambda: Counter(r.verdict for r in dry_run(plan)))
    wall, cpu, done = timed("migration", lambda: Counter(r.verdict for r in migrate(plan)))
    ids = list(Execution.objects.values_list("pk", flat=True))
    again_wall, _, again = timed("re-run", lambda: Counter(r.verdict for r in migrate(plan, ids)))
    # The baseline, same run: a durable step (stepper.send of one event) per execution.
    from statecharts import stepper

    some = ids[:steps]
    steps_wall, steps_cpu, _ = timed(
        f"{len(some)} steps", lambda: [stepper.send(pk, "insure") for pk in some]
    )
    migrated = HistoryEntry.objects.filter(disposition="migrated").count()
    checks = {
        "dry_run_all_migrate": dry == {Verdict.MIGRATES: count},
        "all_migrated": done == {Verdict.MIGRATED: count},
        "rerun_all_up_to_date": again == {Verdict.UP_TO_DATE: count},
        "all_on_v2": Execution.objects.filter(chart=v2).count() == count,
        "one_migrated_entry_each": migrated == count,
        "timers_kept": Timer.objects.filter(status="pending").count() == count,
    }
    return {
        "executions": count,
        "dry_run_per_second": count / dry_wall,
        "dry_run_cpu_us_each": dry_cpu / count * 1e6,
        "migrations_per_second": count / wall,
        "migration_cpu_us_each": cpu / count * 1e6,
        "rerun_per_second": count / again_wall,
        "steps_per_second": len(some) / steps_wall,
        "step_cpu_us_each": steps_cpu / len(some) * 1e6,
        "migrations_over_steps": (count / wall) / (len(some) / steps_wall),
        "checks": checks,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executions", type=int, default=10_000)
    parser.add_argument("--pg-url", default=os.environ.get("BENCH_PG_URL", DEFAULT_PG_URL))
    parser.add_argument("--steps", type=int, default=1000, help="baseline durable steps")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    args.sqlite_dir = None
    command = shlex.join([sys.executable, *sys.argv] if argv is None else [__file__, *argv])
    load_before = os.getloadavg()
    with throwaway_database("postgres", args) as url:
        setup_django(url)
        server, settings = server_description()
        result = {
            "command": command,
            "server": server,
            "settings": settings,
            "load_before": load_before,
            **run(args.executions, args.steps),
        }
        from django.db import connections

        connections.close_all()
    print(f"{command}\n{server} {settings}")
    print(
        f"{result['executions']} executions: dry run {result['dry_run_per_second']:.0f}/s "
        f"({result['dry_run_cpu_us_each']:.0f} us CPU each), migration "
        f"{result['migrations_per_second']:.0f}/s ({result['migration_cpu_us_each']:.0f} us CPU "
        f"each), re-run {result['rerun_per_second']:.0f}/s; baseline durable steps "
        f"{result['steps_per_second']:.0f}/s ({result['step_cpu_us_each']:.0f} us CPU each): "
        f"migrations / steps = {result['migrations_over_steps']:.2f}"
    )
    print(f"load average before: {result['load_before']}, after: {os.getloadavg()}")
    print(
        "checks: "
        + ", ".join(f"{k} {'ok' if v else 'FAILED'}" for k, v in result["checks"].items())
    )
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
    return 0 if all(result["checks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
