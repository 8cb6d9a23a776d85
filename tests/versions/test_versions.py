"""Chart versions (statecharts.versions): unique per name, new versions asked for explicitly,
one rule for "latest" at every door, and the data migration for charts loaded before."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from statecharts.models import Chart, Execution
from statecharts.policies.lookups import NotFound, find_chart
from statecharts.versions import NameTaken, NoNextVersion, VersionTaken, next_version

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0"'


def lamp(level: int, name: str = "lamp") -> str:
    return f"""<scxml {NS} name="{name}" initial="off">
  <state id="off"><transition event="flip" target="on"/></state>
  <state id="on"><onentry><log expr="{level}"/></onentry></state>
</scxml>"""


def user_with(username: str, *perms: str) -> User:
    user = User.objects.create_user(username, password="pw", is_staff=True)
    for perm in perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    return user


@pytest.mark.django_db
def test_a_new_version_of_a_name_is_an_explicit_act() -> None:
    first = Chart.objects.load(lamp(1))
    assert first.version == "1"
    assert Chart.objects.load(lamp(1)) == first  # the same source: the same chart
    with pytest.raises(NameTaken, match="a chart named 'lamp' exists already"):
        Chart.objects.load(lamp(2))
    second = Chart.objects.load(lamp(2), new_version=True)
    assert second.version == "2"
    with pytest.raises(VersionTaken, match="already has a version '2'"):
        Chart.objects.load(lamp(3), version="2", new_version=True)
    beta = Chart.objects.load(lamp(4), version="beta", new_version=True)
    assert Chart.objects.latest_version("lamp") == beta  # letters sort after numbers
    with pytest.raises(NoNextVersion, match="give the new version's label"):
        Chart.objects.load(lamp(5), new_version=True)
    assert Chart.objects.count() == 3
    other = Chart.objects.load(lamp(2, name="torch"))  # another name has its own versions
    assert other.version == "1"


def test_the_next_version_counts_on_from_the_leading_number() -> None:
    assert [next_version(v) for v in ("1", "1.4", "10rc1", "beta")] == ["2", "2", "11", None]


@pytest.mark.django_db
def test_latest_is_one_rule_everywhere_and_name_at_version_picks_one() -> None:
    Chart.objects.load(lamp(1), version="1.9")
    newest = Chart.objects.load(lamp(2), version="1.10", new_version=True)
    assert find_chart("lamp") == newest == Chart.objects.latest_version("lamp")
    assert find_chart("lamp@1.9").version == "1.9"
    with pytest.raises(NotFound, match=r"no version '3' \(its versions: 1.9, 1.10\)"):
        find_chart("lamp@3")
    out = io.StringIO()
    call_command("statechart", "start", "lamp", stdout=out)
    assert Execution.objects.get().chart == newest
    call_command("statechart", "start", "lamp@1.9", stdout=out)
    assert Execution.objects.filter(chart__version="1.9").count() == 1


@pytest.mark.django_db
def test_the_load_command_needs_new_version(tmp_path: Path) -> None:
    path = tmp_path / "lamp.scxml"
    path.write_text(lamp(1))
    call_command("statechart", "load", str(path), stdout=io.StringIO())
    path.write_text(lamp(2))
    with pytest.raises(CommandError, match="`statechart load --new-version`"):
        call_command("statechart", "load", str(path), stdout=io.StringIO())
    out = io.StringIO()
    call_command("statechart", "load", str(path), "--new-version", stdout=out)
    assert "(lamp v2) loaded" in out.getvalue()


@pytest.mark.django_db
def test_the_api_needs_the_permission_for_a_new_version() -> None:
    Chart.objects.load(lamp(1))
    loader = APIClient()
    loader.force_authenticate(
        user_with("loader", "statecharts.view_chart", "statecharts.add_chart")
    )
    response = loader.post("/api/charts/", {"source": lamp(2)}, format="json")
    assert response.status_code == 400
    assert "exists already" in response.json()["new_version"][0]
    response = loader.post("/api/charts/", {"source": lamp(2), "new_version": True}, format="json")
    assert response.status_code == 403
    versioner = APIClient()
    versioner.force_authenticate(
        user_with(
            "versioner",
            "statecharts.view_chart",
            "statecharts.add_chart",
            "statecharts.add_chart_version",
        )
    )
    response = versioner.post(
        "/api/charts/", {"source": lamp(2), "new_version": True}, format="json"
    )
    assert response.status_code == 201, response.content
    assert response.json()["version"] == "2"
    assert Chart.objects.count() == 2


@pytest.mark.django_db
def test_the_admin_needs_the_permission_for_a_new_version() -> None:
    Chart.objects.load(lamp(1))
    url = reverse("admin:statecharts_chart_add")
    client = Client()
    client.force_login(user_with("loader", "statecharts.view_chart", "statecharts.add_chart"))
    page = client.post(url, {"source": lamp(2), "name": "", "version": ""})
    assert "exists already" in page.content.decode()
    page = client.post(url, {"source": lamp(2), "name": "", "version": "", "new_version": "on"})
    assert "You may not load new versions of existing charts." in page.content.decode()
    client.force_login(
        user_with(
            "versioner",
            "statecharts.view_chart",
            "statecharts.add_chart",
            "statecharts.add_chart_version",
        )
    )
    page = client.post(url, {"source": lamp(2), "name": "", "version": "", "new_version": "on"})
    assert page.status_code == 302
    assert Chart.objects.latest_version("lamp").version == "2"


@pytest.mark.django_db(transaction=True)
def test_the_data_migration_gives_every_named_chart_a_version_unique_with_its_name() -> None:
    executor = MigrationExecutor(connection)
    before = [("statecharts", "0005_erasure")]
    executor.migrate(before)
    old = executor.loader.project_state(before).apps.get_model("statecharts", "Chart")

    def row(name: str, version: str, n: int, origin: str = "loaded") -> int:
        source = lamp(n, name)
        pk: int = old.objects.create(
            source=source, content_hash=f"{n:064d}", name=name, version=version, origin=origin
        ).pk
        return pk

    plain = [row("signup", "", 1), row("signup", "", 2)]
    mixed = [row("order", "", 3), row("order", "2", 4), row("order", "2", 5), row("order", "", 6)]
    single = row("lonely", "", 7)
    unnamed = row("", "", 8)
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())

    def version(pk: int) -> str:
        return Chart.objects.get(pk=pk).version

    assert [version(pk) for pk in plain] == ["1", "2"]
    assert [version(pk) for pk in mixed] == ["0.1", "2", "2.1", "0.2"]
    assert version(single) == "1" and version(unnamed) == ""
    assert find_chart("signup").pk == plain[1] and find_chart("order").pk == mixed[2]


@pytest.mark.django_db
def test_an_older_versions_page_says_which_is_the_latest(admin_client: Client) -> None:
    first = Chart.objects.load(lamp(1))
    second = Chart.objects.load(lamp(2), new_version=True)
    page = admin_client.get(reverse("admin:statecharts_chart_change", args=[first.pk]))
    text = page.content.decode()
    assert (
        "means its latest version, <a href=" in text
        and "lamp v2</a>: this page starts lamp v1" in text
    )
    page = admin_client.get(reverse("admin:statecharts_chart_change", args=[second.pk]))
    assert "means its latest version: this one." in page.content.decode()
