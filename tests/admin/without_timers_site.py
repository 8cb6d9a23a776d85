"""Run by tests/admin/test_without_timers.py in a subprocess, with
DJANGO_SETTINGS_MODULE=tests.admin.settings_without_timers and DATABASE_URL naming a fresh
SQLite file: migrates, starts an execution, renders the admin pages, the API and the schema,
runs ``statechart show``, and prints what it saw as one JSON document on stdout."""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import django  # noqa: E402

django.setup()

from django.contrib.auth.models import User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402
from drf_spectacular.validation import validate_schema  # noqa: E402

from statecharts.models import Chart, Execution  # noqa: E402

NESTED = """<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" name="nested"
       datamodel="ecmascript" initial="outer">
  <datamodel><data id="n" expr="1"/></datamodel>
  <state id="outer" initial="inner">
    <state id="inner"><transition event="go" target="done"/></state>
  </state>
  <final id="done"/>
</scxml>"""


def active_in_svg(html: str) -> list[str]:
    return re.findall(r'<g class="sc-state [\w-]+ active" data-state="([^"]+)"', html)


def main() -> dict[str, object]:
    call_command("migrate", verbosity=0)
    user = User.objects.create_superuser("admin", "admin@example.com", "pw")
    execution = Execution.objects.start(Chart.objects.load(NESTED), business_key="k-1")
    client = Client()
    client.force_login(user)
    report: dict[str, object] = {}

    page = client.get(f"/admin/statecharts/execution/{execution.pk}/change/")
    body = page.content.decode()
    report["admin_execution"] = {
        "status": page.status_code,
        "where": "status: active; in state inner" in body,
        "active": active_in_svg(body),
        "timers_panel": "<h2>Timers</h2>" in body,
    }
    report["admin_index"] = client.get("/admin/").status_code
    report["admin_chart"] = client.get(f"/admin/statecharts/chart/{execution.chart_id}/change/")
    report["admin_chart"] = report["admin_chart"].status_code  # type: ignore[union-attr]

    detail = client.get(f"/api/executions/{execution.pk}/")
    report["api_detail"] = {"status": detail.status_code, "body": detail.json()}
    report["api_root"] = client.get("/api/").json()
    report["api_timers"] = client.get("/api/timers/").status_code

    schema = client.get("/api/schema/", {"format": "json"})
    document = json.loads(schema.content)
    validate_schema(document)  # raises if not a valid OpenAPI 3 document
    report["schema"] = {"status": schema.status_code, "paths": sorted(document["paths"])}
    call_command(
        "spectacular",
        "--validate",
        "--fail-on-warn",
        "--custom-settings",
        "statecharts.api.schema.SCHEMA_SETTINGS",
        "--file",
        str(Path(sys.argv[1]) / "schema.yaml"),
    )

    out = io.StringIO()
    call_command("statechart", "show", str(execution.pk), "--json", stdout=out)
    report["show"] = json.loads(out.getvalue())
    out = io.StringIO()
    call_command("statechart", "show", str(execution.pk), stdout=out)
    report["show_text"] = out.getvalue()

    report["timers_imported"] = sorted(
        name for name in sys.modules if name == "timers" or name.startswith("timers.")
    )
    return report


if __name__ == "__main__":
    print(json.dumps(main()))
