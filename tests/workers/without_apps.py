"""A Django process with ``statecharts`` installed and neither ``timers`` nor ``invocations``.

Run by tests/stepper/test_without_apps.py, never collected by pytest::

    python tests/workers/without_apps.py DATABASE_FILE

It migrates a fresh SQLite database, starts one chart that tries a delayed send and one that
tries an ``<invoke>``, and prints one JSON line with what happened.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
DELAYED = f"""<scxml {NS} initial="a">
  <datamodel><data id="why" expr="''"/></datamodel>
  <state id="a">
    <onentry><send event="later" delay="1s"/></onentry>
    <transition event="error.communication" target="refused">
      <assign location="why" expr="_event.data.message"/></transition>
    <transition event="later" target="wrong"/>
  </state>
  <state id="refused"/><state id="wrong"/>
</scxml>"""
INVOKING = f"""<scxml {NS} initial="a">
  <state id="a">
    <invoke type="scxml"><content><scxml {NS}><final id="f"/></scxml></content></invoke>
    <transition event="error.execution" target="refused"/>
    <transition event="done.invoke.*" target="wrong"/>
  </state>
  <state id="refused"/><state id="wrong"/>
</scxml>"""


def main(database: str) -> int:
    import django
    from django.conf import settings

    settings.configure(
        INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "statecharts"],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": database}},
        USE_TZ=True,
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
    )
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from statecharts import stepper
    from statecharts.models import Chart

    delayed = stepper.start(Chart.objects.load(DELAYED))
    invoking = stepper.start(Chart.objects.load(INVOKING))
    entry = delayed.history.get(seq=1)
    print(
        json.dumps(
            {
                "delayed": delayed.configuration,
                "why": json.loads(bytes(delayed.position))["state"]["datamodel"]["why"],
                "types": entry.registered_types,
                "invoking": invoking.configuration,
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
