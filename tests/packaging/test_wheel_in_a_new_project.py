"""The wheel works in someone else's Django project, set up exactly as docs/installation.md
says: built from the repository, installed into a fresh virtualenv, added to a project made
by ``django-admin startproject``, migrated, and used only through public doors (management
commands, the admin and the API).

Bounded and offline where it can be: the wheel is built without build isolation, and the
dependencies come from a wheelhouse in the user's cache (``STATECHARTS_WHEELHOUSE``, default
``~/.cache/django-statecharts/wheelhouse``), filled from the package index only when it lacks
something. The host project's database is its own SQLite file, so the test does not depend
on the suite's database: it runs once, in the SQLite pass of scripts/test.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
INSTALLATION = ROOT / "docs" / "installation.md"
WHEELHOUSE = Path(
    os.environ.get("STATECHARTS_WHEELHOUSE")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    / "django-statecharts"
    / "wheelhouse"
)
# Not part of the wheel's source: caches, builds, local databases, the virtualenv.
NOT_SOURCE = shutil.ignore_patterns(
    ".git",
    ".venv",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    ".pytest_cache",
    ".ruff_cache",
    ".hypothesis",
    "reports",
    "staticfiles",
    "*.sqlite3*",
)
# The chart's diagram (the admin's own pages have <svg> icons too), with a box per state.
DIAGRAM = re.compile(r'<svg[^>]*class="sc-diagram".*data-state="reminded"', re.DOTALL)
# What the wheel may hold at its top level: the four apps and the distribution's metadata.
SHIPPED = {"statecharts", "timers", "invocations", "routes"}

# The project's injected clock (STATECHARTS["CLOCK"]): real time, moved ahead on request, so
# a timer an hour away is due without anyone waiting for it.
CLOCK = """import os
from datetime import timedelta

from django.utils import timezone


def now():
    ahead = float(os.environ.get("HOSTSITE_CLOCK_AHEAD_SECONDS", "0"))
    return timezone.now() + timedelta(seconds=ahead)
"""

# Renders the pages with Django's test client inside the new project; writes what it saw.
PAGES = """import json
import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hostsite.settings")
django.setup()

from django.contrib.auth import get_user_model
from django.test import Client
from django.test.utils import setup_test_environment

from statecharts.models import Chart, Execution

setup_test_environment()
admin = get_user_model().objects.create_superuser("admin", "admin@example.com", "pw")
client = Client()
client.force_login(admin)
chart = Chart.objects.get(name="order")
execution = Execution.objects.get(business_key="order-42")
seen = {}
for name, url in {
    "chart": f"/admin/statecharts/chart/{chart.pk}/change/",
    "execution": f"/admin/statecharts/execution/{execution.pk}/change/",
    "schema": "/statecharts/api/schema/?format=json",
    "api_root": "/statecharts/api/",
}.items():
    response = client.get(url, HTTP_ACCEPT="application/json" if name == "api_root" else "*/*")
    seen[name] = {"status": response.status_code, "body": response.content.decode()}
seen["anonymous_schema"] = Client().get("/statecharts/api/schema/").status_code

# The API documentation page (the installation page's optional recipe).
from django.contrib.staticfiles import finders

docs = client.get("/statecharts/api/docs/")
seen["docs"] = {"status": docs.status_code, "body": docs.content.decode()}
bundle = "drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js"
seen["swagger_ui_file"] = bool(finders.find(bundle))
# An anonymous visitor is sent to a login page that exists; an ordinary (not staff) user who
# logs in there is brought back to the docs page.
get_user_model().objects.create_user("reader", password="pw")
visitor = Client()
docs = visitor.get("/statecharts/api/docs/")
login = docs.headers.get("Location") or "/no-redirect/"
seen["anonymous_docs"] = {"status": docs.status_code, "location": login}
seen["login_page"] = visitor.get(login).status_code
after = visitor.post(login, {"username": "reader", "password": "pw"}, follow=True)
seen["after_login"] = {
    "status": after.status_code,
    "chain": [url for url, _ in after.redirect_chain],
    "body": after.content.decode(),
}
# The browsable API, anonymous: refused, with a link to a login page that exists.
browsable = Client().get("/statecharts/api/executions/", HTTP_ACCEPT="text/html")
seen["anonymous_browsable"] = {"status": browsable.status_code, "body": browsable.content.decode()}
with open("pages.json", "w") as out:
    json.dump(seen, out)
"""


# The admin of the installation page's own model (docs/installation.md, "In your own code"):
# its change page's buttons, one pressed; writes what it saw.
SHOP_PAGES = """import json
import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hostsite.settings")
django.setup()

from django.contrib.auth import get_user_model
from django.test import Client
from django.test.utils import setup_test_environment

from shop.models import Order

setup_test_environment()
client = Client()
client.force_login(get_user_model().objects.get(username="admin"))
order = Order.objects.create(number="B-2")
page = client.get(f"/admin/shop/order/{order.pk}/change/")
pressed = client.post(
    f"/admin/shop/order/{order.pk}/statechart/flow/send/", {"statechart_event": "paid"}
)
order.flow.refresh_from_db()
with open("shop.json", "w") as out:
    json.dump(
        {
            "status": page.status_code,
            "body": page.content.decode(),
            "pressed": pressed.status_code,
            "after": order.flow.status,
            "who": order.flow.history.last().caller_context["user"]["username"],
        },
        out,
    )
"""


def shop_block(text: str) -> str:
    """The installation page's commands that migrate its own app's model."""
    for block in re.findall(r"```sh\n(.*?)```", text, re.DOTALL):
        if "makemigrations shop" in block:
            return block
    raise AssertionError("docs/installation.md has no sh block that migrates the shop app")


def try_it_block(text: str) -> str:
    """The installation page's "Try it" commands: the ```sh block that loads a chart."""
    for block in re.findall(r"```sh\n(.*?)```", text, re.DOTALL):
        if "statechart load" in block:
            return block
    raise AssertionError("docs/installation.md has no sh block that loads a chart")


def python_block(text: str, first_line: str) -> str:
    """The ```python block of docs/installation.md that starts with ``first_line``."""
    for block in re.findall(r"```python\n(.*?)```", text, re.DOTALL):
        if block.startswith(first_line):
            return block
    raise AssertionError(f"docs/installation.md has no python block starting {first_line!r}")


def run(
    args: list[str | Path], *, cwd: Path, timeout: float = 120, env: dict[str, str] | None = None
) -> str:
    """Run a command to completion (in ``env``, or this process's environment); its output,
    or a failure that shows it."""
    done = subprocess.run(
        [str(arg) for arg in args],
        cwd=cwd,
        env=os.environ if env is None else env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{' '.join(map(str, args))} exited {done.returncode}:\n{output}"
    return output


def host_environment() -> dict[str, str]:
    """The environment of the new project's commands: nothing of this repository's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_"))}
    env.pop("PYTHONPATH", None)
    return env


def build_wheel(work: Path) -> tuple[Path, str]:
    source = work / "source"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCE)
    dist = work / "dist"
    output = run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-build-isolation",
            "--no-deps",
            "--no-index",
            "--wheel-dir",
            dist,
            source,
        ],
        cwd=work,
    )
    (wheel,) = dist.glob("django_statecharts-*.whl")
    return wheel, output


def documented_extras(text: str) -> str:
    """The extras the installation page's ``pip install "django-statecharts[...]"`` lines
    name (but ``postgres``: the host project's database is SQLite), as pip's ``[a,b]``."""
    extras = re.findall(r'pip install "django-statecharts\[([\w,]+)\]"', text)
    names = sorted({name for group in extras for name in group.split(",")} - {"postgres"})
    assert names, "docs/installation.md installs no extra"
    return f"[{','.join(names)}]"


def install(wheel: Path, venv: Path, extras: str) -> None:
    """The wheel with ``extras`` into a fresh virtualenv, from the wheelhouse; the index only
    for what it lacks."""
    run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=venv.parent)
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", python, "--disable-pip-version-check"]
    wanted = f"{wheel}{extras}"
    offline = [*pip, "install", "--no-index", "--find-links", WHEELHOUSE, wanted]
    try:
        run(offline, cwd=venv.parent, timeout=300)
    except AssertionError:
        WHEELHOUSE.mkdir(parents=True, exist_ok=True)
        run([*pip, "download", "--dest", WHEELHOUSE, wanted], cwd=venv.parent, timeout=600)
        (WHEELHOUSE / wheel.name).unlink(missing_ok=True)  # only dependencies are kept
        run(offline, cwd=venv.parent, timeout=300)


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if connection.vendor != "sqlite":
        pytest.skip(
            "independent of the suite's database (the host project has its own "
            "SQLite file): runs once, in the SQLite pass"
        )
    work = tmp_path_factory.mktemp("packaging")
    wheel, build_output = build_wheel(work)
    venv = work / "venv"
    docs = INSTALLATION.read_text()
    install(wheel, venv, documented_extras(docs))
    bin_ = venv / "bin"
    env = host_environment()

    run([bin_ / "django-admin", "startproject", "hostsite"], cwd=work, env=env)
    project = work / "hostsite"
    settings = project / "hostsite" / "settings.py"
    settings.write_text(
        settings.read_text()
        + "\n"
        + python_block(docs, "# settings.py: django-statecharts")
        + '\nSTATECHARTS = {"CLOCK": "hostsite.clock.now"}\n'
        + python_block(docs, "# settings.py: the API documentation page")
    )
    urls = project / "hostsite" / "urls.py"
    urls.write_text(
        urls.read_text()
        + "\n"
        + python_block(docs, "# urls.py: django-statecharts")
        + python_block(docs, "# urls.py: the API documentation page")
    )
    (project / "hostsite" / "clock.py").write_text(CLOCK)
    (project / "pages.py").write_text(PAGES)

    python = bin_ / "python"

    def manage(*args: str, **extra: str) -> str:
        return run([python, "manage.py", *args], cwd=project, env={**env, **extra})

    outputs = {
        "check": manage("check", "--fail-level", "WARNING"),
        "migrate": manage("migrate", "--no-input"),
        # "Try it", run as written (its `python` is the new virtualenv's).
        "try_it": run(
            ["bash", "-euo", "pipefail", "-c", try_it_block(docs)],
            cwd=project,
            env={**env, "PATH": f"{bin_}{os.pathsep}{env.get('PATH', '')}"},
        ),
        "shown_started": manage("statechart", "show", "1", "--json"),
        "fire_now": manage("fire_timers", "--once"),
        "fire_later": manage("fire_timers", "--once", HOSTSITE_CLOCK_AHEAD_SECONDS="7200"),
        "show": manage("statechart", "show", "1", "--json"),
    }
    run([python, "pages.py"], cwd=project, env=env)
    pages = json.loads((project / "pages.json").read_text())
    # The rest of "Try it": the payment completes the order.
    outputs["paid"] = manage("statechart", "send", "1", "paid")
    outputs["shown_paid"] = manage("statechart", "show", "1", "--json")
    # "In your own code": the project's own app with a StatechartField, as written there.
    manage("startapp", "shop")
    (project / "shop" / "models.py").write_text(python_block(docs, "# shop/models.py"))
    (project / "shop" / "admin.py").write_text(python_block(docs, "# shop/admin.py"))
    settings.write_text(settings.read_text() + '\nINSTALLED_APPS = [*INSTALLED_APPS, "shop"]\n')
    outputs["shop_check"] = manage("check", "--fail-level", "WARNING")
    outputs["shop_migrate"] = run(
        ["bash", "-euo", "pipefail", "-c", shop_block(docs)],
        cwd=project,
        env={**env, "PATH": f"{bin_}{os.pathsep}{env.get('PATH', '')}"},
    )
    outputs["shop_shell"] = manage("shell", "-c", python_block(docs, "# using the field"))
    (project / "shop_pages.py").write_text(SHOP_PAGES)
    run([python, "shop_pages.py"], cwd=project, env=env)
    pages["shop"] = json.loads((project / "shop.json").read_text())
    return {
        "wheel": wheel,
        "build_output": build_output,
        "venv": venv,
        "outputs": outputs,
        "pages": pages,
    }


def test_the_wheel_holds_the_four_apps_with_their_files_and_nothing_else(
    host: dict[str, Any],
) -> None:
    with zipfile.ZipFile(host["wheel"]) as wheel:
        names = wheel.namelist()
        metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
        meta = wheel.read(metadata).decode()
    top = {name.split("/")[0] for name in names}
    assert {t for t in top if not t.endswith(".dist-info")} == SHIPPED
    for shipped in (
        "statecharts/templates/admin/statecharts/execution/change_form.html",
        "statecharts/templates/admin/statecharts/chart/change_form.html",
        "statecharts/core/datamodel/sandbox.js",
        "statecharts/migrations/0001_initial.py",
        "timers/migrations/0001_initial.py",
        "invocations/migrations/__init__.py",
    ):
        assert shipped in names, shipped
    assert "License-Expression: BSD-3-Clause" in meta
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)


def test_the_build_prints_no_warnings(host: dict[str, Any]) -> None:
    lines = host["build_output"].splitlines()
    assert not [line for line in lines if re.search(r"warn|deprecat", line, re.IGNORECASE)], host[
        "build_output"
    ]


def test_the_installed_package_is_the_wheel_not_this_checkout(host: dict[str, Any]) -> None:
    python = host["venv"] / "bin" / "python"
    where = run(
        [
            python,
            "-c",
            "import statecharts, sys; print(statecharts.__file__); "
            "import importlib.util as u; print([m for m in ('demo', 'config', 'conformance') "
            "if u.find_spec(m)])",
        ],
        cwd=host["venv"],
        env=host_environment(),
    ).splitlines()
    assert str(host["venv"]) in where[0] and str(ROOT) not in where[0]
    assert where[1] == "[]"


def test_a_new_project_migrates_loads_starts_and_fires_a_timer_on_its_own_clock(
    host: dict[str, Any],
) -> None:
    outputs = host["outputs"]
    assert "no issues" in outputs["check"]
    assert "Applying statecharts.0001_initial" in outputs["migrate"]
    assert "Applying timers.0001_initial" in outputs["migrate"]
    assert "execution: 1\n" in outputs["try_it"]  # what "Try it" says start prints
    started = json.loads(outputs["shown_started"])
    assert started["chart"]["name"] == "order" and started["business_key"] == "order-42"
    assert started["configuration"] == ["awaiting_payment"], started
    assert outputs["fire_now"].strip() == "nothing due"  # an hour away on the real clock
    assert outputs["fire_later"].strip() == "1 fired"  # due on the project's clock, 2 h ahead
    shown = json.loads(outputs["show"])
    assert shown["configuration"] == ["reminded"], shown
    paid = json.loads(outputs["shown_paid"])
    assert paid["status"] == "completed" and paid["configuration"] == ["paid"], paid


def test_the_admin_pages_render_with_the_projects_panels(host: dict[str, Any]) -> None:
    chart, execution = host["pages"]["chart"], host["pages"]["execution"]
    assert chart["status"] == 200
    assert DIAGRAM.search(chart["body"]), "the chart page shows the chart's diagram"
    assert execution["status"] == 200
    body = execution["body"]
    assert DIAGRAM.search(body), "the execution page shows the diagram"
    assert 'id="send-event"' in body  # the send form
    assert "statecharts-history" in body  # the history timeline
    timers = re.search(r">\s*Timers\s*<.*?remind.*?fired", body, re.DOTALL)
    assert timers, "the timers list shows the fired timer"


def test_the_api_schema_and_root_are_served(host: dict[str, Any]) -> None:
    pages = host["pages"]
    assert pages["schema"]["status"] == 200
    schema = json.loads(pages["schema"]["body"])
    assert schema["openapi"].startswith("3.")
    assert "/statecharts/api/executions/" in schema["paths"]
    assert not any("token" in path for path in schema["paths"])  # the host chooses its auth
    assert pages["anonymous_schema"] in (401, 403)
    root = json.loads(pages["api_root"]["body"])
    assert root["schema"].endswith("/statecharts/api/schema/")
    assert root["docs"] == "http://testserver/statecharts/api/docs/"  # the recipe's page


def test_the_api_docs_page_recipe_works_as_written(host: dict[str, Any]) -> None:
    pages = host["pages"]
    assert pages["docs"]["status"] == 200
    assert "swagger-ui" in pages["docs"]["body"]
    # Swagger UI from the sidecar package, served by the site itself: nothing from a CDN.
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/" in pages["docs"]["body"]
    assert "cdn" not in pages["docs"]["body"].lower()
    assert pages["swagger_ui_file"]
    # Anonymous: redirected to a login page that exists, which brings an ordinary user back.
    anonymous = pages["anonymous_docs"]
    assert anonymous["status"] == 302
    assert anonymous["location"] == "/api-auth/login/?next=/statecharts/api/docs/"
    assert pages["login_page"] == 200
    after = pages["after_login"]
    assert after["chain"] == ["/statecharts/api/docs/"]
    assert after["status"] == 200 and "swagger-ui" in after["body"]


def test_the_anonymous_browsable_api_links_a_login_page(host: dict[str, Any]) -> None:
    browsable = host["pages"]["anonymous_browsable"]
    assert browsable["status"] in (401, 403)
    assert "/api-auth/login/?next=/statecharts/api/executions/" in browsable["body"]


def test_a_model_of_the_project_with_a_statechart_field_works_as_documented(
    host: dict[str, Any],
) -> None:
    outputs, shop = host["outputs"], host["pages"]["shop"]
    assert "no issues" in outputs["shop_check"]
    assert "Create model Order" in outputs["shop_migrate"]
    assert "Applying shop.0001_initial" in outputs["shop_migrate"]
    # The shell block ran its asserts: started on save, sent, filtered by state and status.
    assert "Traceback" not in outputs["shop_shell"]
    assert shop["status"] == 200
    assert re.search(r'<svg[^>]*class="sc-diagram"', shop["body"]), "the order shows its diagram"
    assert 'name="statechart_event" value="paid"' in shop["body"]
    assert 'name="statechart_event" value="remind"' in shop["body"]
    assert shop["pressed"] == 302 and shop["after"] == "completed" and shop["who"] == "admin"
