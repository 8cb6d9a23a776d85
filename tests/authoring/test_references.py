"""Relative references (``src="lib.js"``) resolve against the chart's folder when it is
loaded from a file, and are stored with it; a chart without a folder refuses them clearly."""

from __future__ import annotations

import hashlib
import io
import re
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from statecharts import stepper
from statecharts.core import ChartError
from statecharts.models import Chart
from statecharts.testing import Workbench

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'

PARENT = f"""<scxml {NS} name="parent">
  <datamodel><data id="settings" src="settings.json"/></datamodel>
  <script src="lib/helpers.js"/>
  <state id="s">
    <onentry><assign location="settings.doubled" expr="double(settings.n)"/></onentry>
    <transition event="go" target="t"/>
  </state>
  <final id="t"><donedata><param name="doubled" expr="settings.doubled"/></donedata></final>
</scxml>"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "helpers.js").write_text("function double(n) { return 2 * n; }")
    (tmp_path / "settings.json").write_text('{"n": 21}')
    (tmp_path / "parent.scxml").write_text(PARENT)
    return tmp_path


@pytest.mark.django_db
def test_relative_references_are_read_at_load_and_stored(folder: Path) -> None:
    out = io.StringIO()
    call_command("statechart", "load", str(folder / "parent.scxml"), stdout=out)
    chart = Chart.objects.get()
    assert chart.resources == {
        "settings.json": '{"n": 21}',
        "lib/helpers.js": "function double(n) { return 2 * n; }",
    }
    assert chart.folder == str(folder.resolve())
    assert chart.content_hash != hashlib.sha256(PARENT.encode()).hexdigest()  # covers them
    # the files change or go: the stored chart runs as it was loaded
    (folder / "settings.json").write_text('{"n": 1000}')
    (folder / "lib" / "helpers.js").unlink()
    execution = stepper.start(Chart.objects.get())
    stepper.send(execution, "go")
    execution.refresh_from_db()
    assert execution.donedata == {"doubled": 42}


@pytest.mark.django_db
def test_a_chart_without_references_keeps_its_identity(tmp_path: Path) -> None:
    source = f'<scxml {NS} name="plain"><state id="a"/></scxml>'
    (tmp_path / "plain.scxml").write_text(source)
    chart = Chart.objects.load_file(tmp_path / "plain.scxml")
    assert chart.content_hash == hashlib.sha256(source.encode()).hexdigest()
    assert chart.resources == {}


PASTE_ERROR = (
    "3:3: 'lib/helpers.js' is a file relative to the chart's folder, and this "
    "chart has none (it was not loaded from a file): load it from its file (manage.py "
    "statechart load PATH, or Chart.objects.load_file), or inline the content"
)


@pytest.mark.django_db
def test_a_pasted_chart_refuses_relative_references_clearly() -> None:
    with pytest.raises(ChartError) as caught:
        Chart.objects.load(PARENT.replace('<data id="settings" src="settings.json"/>',
                                          '<data id="settings" expr="({n: 1})"/>'))
    assert [str(p) for p in caught.value.problems] == [PASTE_ERROR]
    with pytest.raises(ChartError) as caught:
        Chart.objects.load(PARENT.replace('<script src="lib/helpers.js"/>', "<script/>"))
    assert [str(p) for p in caught.value.problems] == [
        "2:14: <data src=...>: 'settings.json' is a file relative to the chart's folder, and "
        "this chart has none (it was not loaded from a file): load it from its file "
        "(manage.py statechart load PATH, or Chart.objects.load_file), or inline the content"
    ]
    invoking = f"""<scxml {NS}><state id="s"><invoke src="child.scxml"/></state></scxml>"""
    refused = re.escape("<invoke src=...>: 'child.scxml' is a file relative")
    with pytest.raises(ChartError, match=refused):
        Chart.objects.load(invoking)
    assert Chart.objects.count() == 0


@pytest.mark.django_db
def test_the_api_and_the_admin_refuse_them_with_the_reason(client: Client) -> None:
    user = User.objects.create_superuser("admin", "a@example.com", "pw")
    api = APIClient()
    api.force_authenticate(user)
    response = api.post("/api/charts/", {"source": PARENT}, format="json")
    assert response.status_code == 400
    assert any("is a file relative to the chart's folder" in p for p in response.json()["source"])
    client.force_login(user)
    page = client.post(
        reverse("admin:statecharts_chart_add"), {"source": PARENT, "name": "", "version": ""}
    )
    assert page.status_code == 200
    assert "is a file relative to the chart&#x27;s folder" in page.content.decode()
    assert Chart.objects.count() == 0


@pytest.mark.django_db
def test_other_schemes_and_escapes_stay_refused_at_load(tmp_path: Path) -> None:
    (tmp_path / "inner").mkdir()
    (tmp_path / "secret.js").write_text("var secret = 1;")
    for src in ("../secret.js", "/etc/hostname", "http://example.com/x.js", "file:/etc/hostname"):
        path = tmp_path / "inner" / "chart.scxml"
        path.write_text(f'<scxml {NS}><script src="{src}"/><state id="a"/></scxml>')
        with pytest.raises(ChartError) as caught:
            Chart.objects.load_file(path)
        assert f"cannot resolve {src!r}" in str(caught.value.problems[0]), src
    assert Chart.objects.count() == 0


@pytest.mark.django_db
def test_the_src_of_an_invoke_of_another_type_is_not_a_file() -> None:
    # a task handler's name: neither read nor refused
    task = f"""<scxml {NS}><state id="s"><invoke type="task" src="double"/></state></scxml>"""
    assert Chart.objects.load(task).resources == {}


@pytest.mark.django_db
def test_an_invoked_child_named_without_a_scheme_is_stored_and_runs(
    tmp_path: Path, statecharts: Workbench
) -> None:
    child = f'<scxml {NS}><final id="over"/></scxml>'
    (tmp_path / "children").mkdir()
    (tmp_path / "children" / "child.scxml").write_text(child)
    (tmp_path / "parent.scxml").write_text(f"""<scxml {NS} initial="a">
      <state id="a"><invoke id="c" src="children/child.scxml"/>
        <transition event="done.invoke.c" target="b"/></state>
      <final id="b"/>
    </scxml>""")
    chart = Chart.objects.load_file(tmp_path / "parent.scxml")
    assert chart.resources == {"children/child.scxml": child}
    (tmp_path / "children" / "child.scxml").unlink()  # stored: the file is not read again
    execution = statecharts.start(chart)
    assert execution.status == "completed"
