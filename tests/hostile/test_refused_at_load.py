"""Charts refused at load that a stored row keeps running (issue 28, items 3, 5 and 7).

Each check here is reported by the compiler as a warning coded with a ``LoadCheck``, so that
recompiling a stored source (``runtime.compiled_chart``) never applies it, and the load and
validate doors (``Chart.objects.load``, ``POST /api/charts/``, the admin's add-chart form,
``statechart load``/``validate``) refuse it: a ChartError with line:column, a 400, a form
error, a CommandError; never a 500. A row written straight into the database (as a chart
stored before the check was added) still compiles and runs."""

from __future__ import annotations

import html
import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from statecharts import stepper
from statecharts.core import load_chart
from statecharts.core.datamodel import plain
from statecharts.core.errors import ChartError, LoadCheck
from statecharts.core.position import decode
from statecharts.models import Chart
from statecharts.models.charts import source_hash
from statecharts.runtime import compiled_chart

pytestmark = pytest.mark.django_db

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'


def deep(levels: int) -> str:
    return "[" * levels + "]" * levels


# <data> JSON 1,000 levels deep (2 KB): the JSON reader's recursion limit, before.
DEEP_DATA = f"""<scxml {NS} name="deep" initial="a">
  <datamodel><data id="ok" expr="1"/>
<data id="x">{deep(1000)}</data></datamodel>
  <state id="a"><transition event="error.execution" target="failed"/></state>
  <final id="failed"/>
</scxml>"""
DEEP_WHERE = "3:1"


def command(*args: str) -> str:
    out = io.StringIO()
    call_command("statechart", *args, stdout=out)
    return out.getvalue()


def refused_at_every_door(
    source: str, where: str, says: str, api: APIClient, admin: Client, folder: Path
) -> None:
    """Refused by the core load, the API, the admin's form and the command (load and
    validate), each naming ``where`` (line:column) and saying ``says``; nothing stored."""
    with pytest.raises(ChartError) as refused:
        Chart.objects.load(source)
    assert f"{where}: " in str(refused.value) and says in str(refused.value)
    answer = api.post("/api/charts/", {"source": source}, format="json")
    assert answer.status_code == 400, answer.content
    assert where in json.dumps(answer.json()) and says in json.dumps(answer.json())
    page = admin.post(reverse("admin:statecharts_chart_add"), {"source": source})
    assert page.status_code == 200
    shown = html.unescape(page.content.decode())
    assert says in shown and where in shown
    path = folder / "chart.scxml"
    path.write_text(source)
    for subcommand in ("load", "validate"):
        with pytest.raises(CommandError) as said:
            command(subcommand, str(path))
        assert f"chart.scxml:{where}: " in str(said.value) and says in str(said.value)
    assert Chart.objects.count() == 0


def stored_before(source: str) -> Chart:
    """The row as a release before the check stored it: written straight into the table."""
    return Chart.objects.create(
        source=source, content_hash=source_hash(source), name="stored", datamodel="ecmascript"
    )


def data_of(execution: Any) -> dict[str, Any]:
    execution.refresh_from_db()
    found: dict[str, Any] = plain(decode(bytes(execution.position)).state.datamodel)
    return found


# ---- item 3: JSON nested deeper than a datamodel holds ----------------------------------------


def test_deep_json_in_data_is_refused_at_every_door_with_its_line_and_column(
    api: APIClient, admin: Client, tmp_path: Path
) -> None:
    says = "nests 1000 levels deep"
    refused_at_every_door(DEEP_DATA, DEEP_WHERE, says, api, admin, tmp_path)


@pytest.mark.parametrize(
    "body",
    [
        f'<data id="y">{deep(150)}</data>',  # parses, but no datamodel can hold it
        '<data id="y">' + '{"a": ' * 3000 + "1" + "}" * 3000 + "</data>",
        f'<data id="y"><![CDATA[{deep(5000)}]]></data>',
    ],
)
def test_every_too_deep_body_is_a_load_problem_not_a_recursion_error(body: str) -> None:
    source = DEEP_DATA.replace(f'<data id="x">{deep(1000)}</data>', body)
    compiled = load_chart(source)  # the core alone: a warning, coded for the load doors
    codes = [p.code for p in compiled.warnings]
    assert codes == [LoadCheck.VALUE_DEPTH]
    with pytest.raises(ChartError, match="levels deep"):
        Chart.objects.load(source)


def test_deep_json_in_content_and_assign_is_refused_too() -> None:
    for body in (
        f'<send event="e"><content>{deep(120)}</content></send>',
        f'<assign location="ok">{deep(120)}</assign>',
    ):
        source = f'<scxml {NS}><state id="a"><onentry>{body}</onentry></state></scxml>'
        with pytest.raises(ChartError, match="nests 120 levels deep"):
            Chart.objects.load(source)


def test_a_stored_chart_with_deep_json_still_runs_and_binding_it_is_error_execution() -> None:
    chart = stored_before(DEEP_DATA)
    assert compiled_chart(chart).warnings  # compiles: the check is the load doors' only
    execution = stepper.start(chart)
    assert execution.configuration == ["failed"]  # error.execution when <data x> was bound


# ---- item 5: references the resolver's rules refuse -------------------------------------------


def referencing(src: str, tag: str = "data") -> str:
    element = (
        f'<data id="x" src="{src}"/>'
        if tag == "data"
        else "<data id=\"x\"/>"
    )
    invoke = f'<invoke id="c" src="{src}"/>' if tag == "invoke" else ""
    return f"""<scxml {NS} name="refs" initial="a">
  <datamodel>
    {element}</datamodel>
  <state id="a">{invoke}<transition event="error.execution" target="failed"/></state>
  <final id="failed"/>
</scxml>"""


@pytest.mark.parametrize(
    ("src", "says"),
    [
        ("../secret.json", "it leaves the chart's folder"),
        ("file:../secret.json", "it leaves the chart's folder"),
        ("/etc/passwd", "only relative references inside the chart's folder are allowed"),
        ("file:/etc/passwd", "only relative references inside the chart's folder are allowed"),
        ("http://example.com/x.json", "only relative references inside the chart's folder"),
        ("data:,1", "only relative references inside the chart's folder are allowed"),
    ],
)
def test_a_data_src_the_resolver_refuses_is_refused_when_loaded_from_its_file(
    tmp_path: Path, src: str, says: str
) -> None:
    (tmp_path / "secret.json").write_text('{"secret": 1}')
    (tmp_path / "charts").mkdir()
    path = tmp_path / "charts" / "chart.scxml"
    path.write_text(referencing(src))
    with pytest.raises(ChartError) as refused:
        Chart.objects.load_file(path)
    assert f"3:5: cannot resolve {src!r}: {says}" in str(refused.value)
    for subcommand in ("load", "validate"):
        with pytest.raises(CommandError, match=f"chart.scxml:3:5: cannot resolve .*{says}"):
            command(subcommand, str(path))
    assert Chart.objects.count() == 0


@pytest.mark.parametrize(
    ("src", "says"),
    [
        ("/etc/passwd", "only relative references inside the chart's folder are allowed"),
        ("data:,1", "only relative references inside the chart's folder are allowed"),
        ("../secret.json", "this chart has none (it was not loaded from a file)"),
    ],
)
def test_a_data_src_is_refused_by_the_api_and_the_admin_with_the_reason(
    api: APIClient, admin: Client, src: str, says: str
) -> None:
    source = referencing(src)
    answer = api.post("/api/charts/", {"source": source}, format="json")
    assert answer.status_code == 400, answer.content
    assert says in json.dumps(answer.json()) and "3:5" in json.dumps(answer.json())
    page = admin.post(reverse("admin:statecharts_chart_add"), {"source": source})
    assert page.status_code == 200 and says in html.unescape(page.content.decode())
    with pytest.raises(ChartError, match=says.replace("(", r"\(").replace(")", r"\)")):
        Chart.objects.load(source)
    assert Chart.objects.count() == 0


@pytest.mark.parametrize("src", ["../child.scxml", "file:../child.scxml", "/etc/x.scxml"])
def test_an_invoke_src_naming_a_file_outside_the_folder_is_refused(
    tmp_path: Path, src: str
) -> None:
    (tmp_path / "child.scxml").write_text(f'<scxml {NS}><final id="f"/></scxml>')
    (tmp_path / "charts").mkdir()
    path = tmp_path / "charts" / "chart.scxml"
    path.write_text(referencing(src, "invoke"))
    with pytest.raises(ChartError, match=r"4:17: <invoke src=\.\.\.>: cannot resolve"):
        Chart.objects.load_file(path)
    with pytest.raises(CommandError, match="cannot resolve"):
        command("validate", str(path))


def test_a_missing_file_stays_a_warning_and_other_schemes_of_invoke_are_left_to_apps(
    tmp_path: Path,
) -> None:
    path = tmp_path / "chart.scxml"
    path.write_text(referencing("missing.json"))
    chart = Chart.objects.load_file(path)  # cannot be read now: error.execution when bound
    assert [(p.line, p.column, p.severity) for p in chart.load_warnings] == [(3, 5, "warning")]
    path.write_text(referencing("chart:payment", "invoke").replace('name="refs"', 'name="p"'))
    assert Chart.objects.load_file(path).pk


def test_a_stored_chart_with_a_refused_data_src_still_runs() -> None:
    chart = stored_before(referencing("/etc/passwd"))
    execution = stepper.start(chart)
    assert execution.configuration == ["failed"]  # error.execution when <data x> was bound
