"""Exporting an execution to a JSON document and importing it (statecharts.operations.transfer)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from statecharts.models import Chart, Execution, HistoryEntry
from statecharts.operations.replay import replay
from statecharts.operations.transfer import ImportRefused, export_execution, import_execution
from statecharts.testing import Workbench
from timers.models import Timer, TimerStatus

pytestmark = pytest.mark.django_db

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
PARCEL = f"""<scxml {NS} name="parcel" initial="packing">
  <datamodel><data id="owner" expr="'ada'"/><data id="reminders" expr="0"/></datamodel>
  <state id="packing">
    <onentry><send id="remind" event="remind" delay="1h"><param name="who" expr="owner"/>
    </send></onentry>
    <transition event="remind" target="packing">
      <assign location="reminders" expr="reminders + 1"/>
    </transition>
    <transition event="ship" target="shipped"/>
  </state>
  <final id="shipped"/>
</scxml>"""


def gone(execution: Execution) -> None:
    """As if in another database: the rows of ``execution`` deleted here."""
    Timer.objects.filter(execution=execution).delete()
    HistoryEntry.objects.filter(execution=execution).delete()
    Execution.objects.filter(pk=execution.pk).delete()


def test_an_exported_execution_goes_on_where_it_is_imported(statecharts: Workbench) -> None:
    execution = statecharts.start(statecharts.load(PARCEL), business_key="p-1")
    document = json.loads(json.dumps(export_execution(execution)))  # through JSON text
    assert document["format"] == "statecharts-execution" and document["version"] == 1
    assert document["chart"]["sha256"] == execution.chart.content_hash
    [timer] = document["parts"]["timers"]
    assert timer["event"]["name"] == "remind" and timer["send_id"] == "remind"
    gone(execution)
    imported = import_execution(document, now=statecharts.now)
    assert imported.session_id == execution.session_id
    assert imported.business_key == "p-1" and imported.status == "active"
    assert imported.history.get().disposition == "imported"
    statecharts.advance(hours=1)  # the imported timer fires into the imported execution
    assert statecharts.datamodel(imported)["reminders"] == 1
    assert Timer.objects.filter(execution=imported, status=TimerStatus.PENDING).count() == 1
    assert replay(imported).ok  # from the position the import recorded


def test_an_import_is_identity_checked_with_typed_refusals(statecharts: Workbench) -> None:
    execution = statecharts.start(statecharts.load(PARCEL))
    document = export_execution(execution)
    with pytest.raises(ImportRefused, match=r"with session id .* exists here"):
        import_execution(document)
    gone(execution)

    def refused(change: Any) -> str:
        changed = json.loads(json.dumps(document))
        change(changed)
        with pytest.raises(ImportRefused) as caught:
            import_execution(changed)
        return str(caught.value)

    assert "load that chart first" in refused(lambda d: d["chart"].update(sha256="0" * 64))
    assert "version 2 is not supported" in refused(lambda d: d.update(version=2))
    assert "not an execution document" in refused(lambda d: d.pop("format"))
    other = Chart.objects.load(PARCEL.replace("'ada'", "'bob'"), new_version=True)

    def another_charts(d: dict[str, Any]) -> None:
        d["chart"]["sha256"] = other.content_hash  # the position still names the first

    assert refused(another_charts).startswith("ChartMismatchError")
    assert refused(lambda d: d.update(position="{}")).startswith("NotAPositionError")
    assert "no installed app reads the part(s) gizmos" in refused(
        lambda d: d["parts"].update(gizmos=[])
    )
    assert not Execution.objects.exists() and not Timer.objects.exists()  # nothing written


def test_a_redacted_export_keeps_the_shape_without_the_data(
    statecharts: Workbench, tmp_path: Path
) -> None:
    execution = statecharts.start(
        statecharts.load(PARCEL), business_key="p-7", metadata={"email": "ada@example.com"}
    )
    path = tmp_path / "parcel.json"
    call_command(
        "statechart", "export", str(execution.pk), "--redact", "-o", str(path),
        stdout=io.StringIO(),
    )  # fmt: skip
    text = path.read_text()
    assert '"ada"' not in text and "ada@example.com" not in text and "p-7" not in text
    document = json.loads(text)
    assert document["redacted"] is True
    position = json.loads(document["position"])
    assert position["state"]["datamodel"] == {"owner": "(redacted)", "reminders": "(redacted)"}
    [timer] = document["parts"]["timers"]
    assert timer["event"]["data"] == {"who": "(redacted)"}
    gone(execution)
    out = io.StringIO()
    call_command("statechart", "import", str(path), stdout=out)
    assert "status: active" in out.getvalue()
    with pytest.raises(CommandError, match="exists here"):
        call_command("statechart", "import", str(path), stdout=io.StringIO())
    path.write_text("{not json")
    with pytest.raises(CommandError, match="not JSON"):
        call_command("statechart", "import", str(path), stdout=io.StringIO())


def test_an_execution_with_running_invocations_is_not_exported(statecharts: Workbench) -> None:
    from statecharts.operations.transfer import ExportRefused

    parent = statecharts.start(
        statecharts.load(f"""<scxml {NS} name="parent" initial="waiting">
      <state id="waiting"><invoke type="scxml"><content>
        <scxml {NS} initial="idle"><state id="idle"/></scxml>
      </content></invoke></state>
    </scxml>""")
    )
    with pytest.raises(ExportRefused, match="has running invocations"):
        export_execution(parent)
