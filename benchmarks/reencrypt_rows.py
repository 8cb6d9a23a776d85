"""``statechart reencrypt``: rows re-encoded per second after a key rotation.

A throwaway database (SQLite in a temporary folder, or ``statecharts_bench_<pid>`` on the
server of ``--pg-url``, dropped afterwards) is migrated; ``--executions`` executions of the
chart below are started with the encrypting codec under key ``a``: each writes history rows
(its start with data, the child's hello), an outbox message, a timer, a route timer and an
invocation with params, all encrypted. The keys are then rotated to ``[b, a]`` and
``manage.py statechart reencrypt --batch N`` runs once; the command's own summary (rows
examined, re-encoded, seconds, rows/s) is printed, with the CPU time of this process over
the command (``time.process_time``). Every row is then checked to name key ``b``.

Usage (from the repository root)::

    python benchmarks/reencrypt_rows.py [--executions 500] [--batch 500]
                                        [--database sqlite|postgres] [--pg-url URL]
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from durable_steps import (  # noqa: E402  (a sibling script, not a package)
    DEFAULT_PG_URL,
    setup_django,
    throwaway_database,
)

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
CHILD = f"""<scxml {NS} initial="idle"><datamodel><data id="who" expr="null"/></datamodel>
  <state id="idle"><onentry><send target="#_parent" event="hello">
    <param name="who" expr="who"/></send></onentry></state></scxml>"""
CHART = f"""<scxml {NS} initial="a">
  <state id="a">
    <onentry>
      <send id="later" event="later" delay="1d"><param name="secret" expr="'timer'"/></send>
      <send id="nudge" type="record" target="ada" event="nudge" delay="1d">
        <param name="secret" expr="'route'"/></send>
    </onentry>
    <invoke id="kid" type="scxml"><param name="who" expr="'kid'"/><content>{CHILD}</content>
    </invoke>
  </state>
</scxml>"""


def run(args: argparse.Namespace) -> int:
    from cryptography.fernet import Fernet
    from django.conf import settings
    from django.core.management import call_command
    from django.test import override_settings

    from statecharts import stepper
    from statecharts.models import Chart
    from statecharts.operations import reencryption

    a, b = Fernet.generate_key().decode(), Fernet.generate_key().decode()

    def keys(*pairs: tuple[str, str]) -> override_settings:
        return override_settings(
            STATECHARTS={
                **settings.STATECHARTS,
                "ROUTES": {
                    "record": {"ROUTE": "tests.routes.recording.Recorder", "TYPES": ["record"]}
                },
                "PAYLOAD_CODECS": {
                    "json": "statecharts.policies.codecs.JSONCodec",
                    "encrypted": "statecharts.policies.codecs.EncryptingCodec",
                },
                "PAYLOAD_CODEC": "encrypted",
                "PAYLOAD_KEYS": [{"id": kid, "key": key} for kid, key in pairs],
            }
        )

    with keys(("a", a)):
        chart = Chart.objects.load(CHART)
        for n in range(args.executions):
            stepper.start(chart, data={"n": n})
    with keys(("b", b), ("a", a)):
        out = io.StringIO()
        cpu = time.process_time()
        call_command("statechart", "reencrypt", "--batch", str(args.batch), stdout=out)
        cpu = time.process_time() - cpu
        print(out.getvalue().rstrip())
        print(f"CPU time of this process over the command: {cpu:.2f} s")
        again = reencryption.reencrypt(dry_run=True)
    if again.changed:
        print(f"FAILED: {again.changed} row(s) still not under key b")
        return 1
    print("verified: every row is under key b")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executions", type=int, default=500)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--database", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    parser.add_argument("--sqlite-dir", default=None)
    args = parser.parse_args(argv)
    with throwaway_database(args.database, args) as url:
        setup_django(url)
        return run(args)


if __name__ == "__main__":
    sys.exit(main())
