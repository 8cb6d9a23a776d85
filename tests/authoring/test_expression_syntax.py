"""Chart code is compiled, without running, when a chart is loaded: syntax errors are
reported with the line:column of their attribute, through every door."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client, override_settings
from django.urls import reverse
from rest_framework.test import APIClient

from statecharts.core import ChartError, load_chart
from statecharts.core.datamodel.syntax import CodeKind, check_syntax
from statecharts.core.expressions import EXPRESSION_SYNTAX, check_expressions
from statecharts.models import Chart

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0"'

# One mistake per kind of code, each at a known line:column (of its attribute).
MISTAKES = f"""<scxml {NS} datamodel="ecmascript" name="mistakes">
  <datamodel><data id="x" expr="1 +"/></datamodel>
  <script>
    var a = 1;
    var b = ;
  </script>
  <state id="s">
    <transition event="go" cond="x ==== 2" target="t"/>
    <onentry><assign location="f()" expr="3"/><send event="e" delayexpr="'1s' +"/>
    <log expr="0); }}); globalThis.ran = true; (function(){{ (0"/></onentry>
  </state>
  <final id="t"/>
</scxml>"""

GOOD = f"""<scxml {NS} datamodel="ecmascript" name="good">
  <datamodel><data id="x" expr="{{a: [1, 2], b: 'text'}}"/></datamodel>
  <script>function twice(n) {{ return 2 * n; }}</script>
  <state id="s">
    <transition event="go" cond="x.a.length === 2 &amp;&amp; In('s')" target="t">
      <assign location="x.a[0]" expr="twice(x.a[1]);"/>
      <foreach array="x.a" item="v" index="i"><log expr="v + i"/></foreach>
      <send event="e" delayexpr="'1s'" idlocation="x.sent"/>
    </transition>
  </state>
  <final id="t"/>
</scxml>"""


def messages(source: str) -> list[str]:
    return [str(p) for p in check_expressions(load_chart(source), source)]


def test_every_kind_of_code_is_checked_with_the_line_and_column_of_its_attribute() -> None:
    assert messages(MISTAKES) == [
        "2:27: <data expr='1 +'> has a syntax error: unexpected token in expression: ')'",
        "5:13: <script> has a syntax error: unexpected token in expression: ';'",
        "8:28: <transition cond='x ==== 2'> has a syntax error: unexpected token in "
        "expression: '='",
        "9:22: <assign location='f()'> has a syntax error: invalid assignment left-hand side",
        "9:63: <send delayexpr=\"'1s' +\"> has a syntax error: unexpected token in "
        "expression: ')'",
        "10:10: <log expr='0); }); globalThis.ran = true; (function(){ (0'> has a syntax "
        "error: not a single expression",
    ]
    problems = check_expressions(load_chart(MISTAKES), MISTAKES)
    assert {(p.severity, p.code) for p in problems} == {("warning", EXPRESSION_SYNTAX)}
    strict = check_expressions(load_chart(MISTAKES), MISTAKES, strict=True)
    assert {p.severity for p in strict} == {"error"}


def test_valid_code_has_no_problem() -> None:
    assert messages(GOOD) == []


def test_a_foreach_item_or_index_must_be_assignable() -> None:
    source = f"""<scxml {NS} datamodel="ecmascript">
  <datamodel><data id="a" expr="[1]"/></datamodel>
  <state id="s"><onentry>
    <foreach array="a" item="1x" index="i.j"><log expr="i"/></foreach>
  </onentry></state>
</scxml>"""
    assert messages(source) == [
        "4:24: <foreach item='1x'> has a syntax error: invalid number literal",
    ]


def test_checking_runs_none_of_the_charts_code() -> None:
    # Written to close the wrapper it is compiled in and run: it would loop forever.
    verdicts = check_syntax(
        [
            (CodeKind.VALUE, "0); }); while (true) {} (function () { (0"),
            (CodeKind.SCRIPT, "while (true) {}"),
            (CodeKind.LOCATION, "a = 1; while (true) {} b"),
        ],
        time_budget_s=5,
    )
    assert verdicts is not None
    value, script, location = verdicts
    assert value is not None and value.message == "not a single expression"
    assert script is None  # a valid script: compiled, never run (else: the time budget)
    assert location is not None


def test_a_null_datamodel_chart_has_no_engine_code_to_check() -> None:
    source = (
        f'<scxml {NS} datamodel="null"><state id="a"><transition cond="In(\'a\')"/></state>'
        "</scxml>"
    )
    assert messages(source) == []


# ---- the doors ---------------------------------------------------------------------------------


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "chart.scxml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("statechart", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_validate_warns_and_strict_refuses(tmp_path: Path) -> None:
    path = write(tmp_path, MISTAKES)
    output = run("validate", path)
    assert f"{path}:8:28: warning: <transition cond='x ==== 2'> has a syntax error" in output
    assert output.rstrip().endswith(f"{path}: valid")
    with pytest.raises(CommandError) as caught:
        run("validate", path, "--strict")
    assert "is not a valid chart (6 problems)" in str(caught.value)
    assert f"{path}:2:27: <data expr='1 +'> has a syntax error" in str(caught.value)


@pytest.mark.django_db
def test_load_stores_with_warnings_and_the_setting_refuses(tmp_path: Path) -> None:
    path = write(tmp_path, MISTAKES)
    output = run("load", path)
    assert f"{path}:5:13: warning: <script> has a syntax error" in output
    assert Chart.objects.count() == 1
    Chart.objects.all().delete()
    with override_settings(STATECHARTS={"EXPRESSION_SYNTAX": "error"}):
        with pytest.raises(CommandError, match="6 problems"):
            run("load", path)
        with pytest.raises(ChartError) as caught:
            Chart.objects.load(MISTAKES)
        assert len(caught.value.problems) == 6
        Chart.objects.load(GOOD)  # valid code loads as before
    assert list(Chart.objects.values_list("name", flat=True)) == ["good"]


@pytest.mark.django_db
def test_the_admins_add_form_shows_them(client: Client) -> None:
    client.force_login(User.objects.create_superuser("admin", "a@example.com", "pw"))
    url = reverse("admin:statecharts_chart_add")
    response = client.post(url, {"source": MISTAKES, "name": "", "version": ""}, follow=True)
    body = response.content.decode()
    assert response.status_code == 200 and Chart.objects.count() == 1
    assert "Line 8:28: &lt;transition cond=&#x27;x ==== 2&#x27;&gt; has a syntax error" in body
    chart = Chart.objects.get()
    page = client.get(reverse("admin:statecharts_chart_change", args=[chart.pk])).content
    assert "9:22: &lt;assign location=&#x27;f()&#x27;&gt; has a syntax error" in page.decode()
    Chart.objects.all().delete()
    with override_settings(STATECHARTS={"EXPRESSION_SYNTAX": "error"}):
        refused = client.post(url, {"source": MISTAKES, "name": "", "version": ""})
    assert refused.status_code == 200 and Chart.objects.count() == 0
    assert "10:10: &lt;log expr=" in refused.content.decode()


@pytest.mark.django_db
def test_the_api_reports_them() -> None:
    api = APIClient()
    api.force_authenticate(User.objects.create_superuser("admin", "a@example.com", "pw"))
    created = api.post("/api/charts/", {"source": MISTAKES}, format="json")
    assert created.status_code == 201
    warnings = created.json()["warnings"]
    assert "8:28: <transition cond='x ==== 2'> has a syntax error: unexpected token in " \
        "expression: '='" in warnings
    detail = api.get(f"/api/charts/{created.json()['id']}/").json()
    assert len(detail["warnings"]) == 6
    Chart.objects.all().delete()
    with override_settings(STATECHARTS={"EXPRESSION_SYNTAX": "error"}):
        refused = api.post("/api/charts/", {"source": MISTAKES}, format="json")
    assert refused.status_code == 400
    assert len(refused.json()["source"]) == 6
