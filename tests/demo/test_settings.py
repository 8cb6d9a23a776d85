"""The repository's site is safe unless the developer opts into debug: DEBUG is off by
default, a missing secret key outside debug is a clear error, the production settings pass
``manage.py check --deploy``, and an anonymous visitor never gets Django's debug page (the
one that shows the settings and the environment)."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Run under the default settings with the test client, no test environment: what a visitor
# of a site started with these settings would get.
VISIT = """
import json
import django
django.setup()
from django.conf import settings
from django.test import Client
client = Client(raise_request_exception=False, SERVER_NAME="localhost")
nested = "[" * 10_000 + "]" * 10_000
token = client.post("/api/auth/token/", nested, content_type="application/json")
missing = client.get("/no-such-page/")
print(json.dumps({
    "debug": settings.DEBUG,
    "token": [token.status_code, token.content.decode()],
    "missing": [missing.status_code, missing.content.decode()],
}))
"""


def environment(tmp_path: Path, **settings: str) -> dict[str, str]:
    """This process's environment without any DJANGO_* variable, on a scratch database."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'site.sqlite3'}"
    env.update(settings)
    return env


def python(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_manage_py_without_a_secret_key_or_debug_refuses_to_start(tmp_path: Path) -> None:
    done = python(["manage.py", "check"], environment(tmp_path))
    assert done.returncode != 0
    assert "DJANGO_SECRET_KEY is not set (demo.settings.site)" in done.stderr
    assert "export DJANGO_DEBUG=1" in done.stderr and "docs/deployment.md" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_manage_py_honours_settings_given_on_the_command_line(tmp_path: Path) -> None:
    # scripts/test runs `manage.py makemigrations --check --settings demo.settings.test` with
    # no secret key: the settings named there are the ones loaded, in both spellings.
    for args in (["--settings", "demo.settings.test"], ["--settings=demo.settings.test"]):
        done = python(["manage.py", "check", *args], environment(tmp_path))
        assert done.returncode == 0, done.stderr
        assert "System check identified no issues" in done.stdout


def test_debug_is_off_unless_asked_for(tmp_path: Path) -> None:
    key = {"DJANGO_SECRET_KEY": secrets.token_urlsafe(50)}
    default = python(
        ["-c", VISIT], environment(tmp_path, DJANGO_SETTINGS_MODULE="demo.settings.site", **key)
    )
    assert default.returncode == 0, default.stderr
    seen = json.loads(default.stdout)
    assert seen["debug"] is False
    # The reproduction: a body nested 10,000 levels to the token endpoint.
    assert seen["token"][0] == 400
    assert "nested too deeply" in seen["token"][1]
    assert seen["missing"][0] == 404
    assert "DATABASE_URL" not in seen["missing"][1] and "URLconf" not in seen["missing"][1]

    asked = python(
        ["-c", VISIT],
        environment(tmp_path, DJANGO_SETTINGS_MODULE="demo.settings.site", DJANGO_DEBUG="1"),
    )
    assert asked.returncode == 0, asked.stderr
    seen = json.loads(asked.stdout)
    assert seen["debug"] is True  # debug on, and only because it was asked for
    assert "URLconf" in seen["missing"][1]  # Django's debug 404: what the default never shows


def test_the_production_settings_pass_the_deployment_checklist(tmp_path: Path) -> None:
    env = environment(
        tmp_path,
        DJANGO_SETTINGS_MODULE="demo.settings.production",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(50),
        DJANGO_ALLOWED_HOSTS="statecharts.example.com",
        DJANGO_DEBUG="1",  # ignored: production never debugs
    )
    done = python(["manage.py", "check", "--deploy", "--fail-level", "WARNING"], env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout


def test_the_production_settings_refuse_to_start_without_a_key_or_hosts(tmp_path: Path) -> None:
    production = {"DJANGO_SETTINGS_MODULE": "demo.settings.production"}
    no_key = python(
        ["manage.py", "check"],
        environment(tmp_path, DJANGO_ALLOWED_HOSTS="statecharts.example.com", **production),
    )
    assert no_key.returncode != 0
    assert "DJANGO_SECRET_KEY is not set (demo.settings.production)" in no_key.stderr
    assert "Traceback" not in no_key.stderr
    no_hosts = python(
        ["manage.py", "check"],
        environment(tmp_path, DJANGO_SECRET_KEY=secrets.token_urlsafe(50), **production),
    )
    assert no_hosts.returncode != 0
    assert "DJANGO_ALLOWED_HOSTS is not set (demo.settings.production)" in no_hosts.stderr


def test_the_production_settings_keep_database_connections_unless_told_not_to(
    tmp_path: Path,
) -> None:
    show = [
        "-c",
        "import django; django.setup(); from django.conf import settings; "
        "print(settings.DATABASES['default']['CONN_MAX_AGE'])",
    ]
    production = {
        "DJANGO_SETTINGS_MODULE": "demo.settings.production",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "DJANGO_ALLOWED_HOSTS": "statecharts.example.com",
        "DATABASE_URL": "postgres://u@db.example/app",  # (never connected to here)
    }
    kept = python(show, environment(tmp_path, **production))
    assert kept.returncode == 0, kept.stderr
    assert kept.stdout.strip() == "60"
    closed = python(show, environment(tmp_path, **production, DJANGO_CONN_MAX_AGE="0"))
    assert closed.stdout.strip() == "0", closed.stderr


def test_the_wsgi_entry_point_serves_the_production_settings(tmp_path: Path) -> None:
    env = environment(
        tmp_path,
        DJANGO_SECRET_KEY=secrets.token_urlsafe(50),
        DJANGO_ALLOWED_HOSTS="statecharts.example.com",
    )
    done = python(["-c", "import demo.wsgi, os; print(os.environ['DJANGO_SETTINGS_MODULE'])"], env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "demo.settings.production"


def test_the_number_of_trusted_proxies_comes_from_the_environment(monkeypatch: Any) -> None:
    """0 unless DJANGO_NUM_PROXIES says otherwise (X-Forwarded-For is not believed by
    default); anything but a whole number stops start-up with a message naming it."""
    from django.core.exceptions import ImproperlyConfigured

    from demo.settings.base import REST_FRAMEWORK, num_proxies_from_environment

    monkeypatch.delenv("DJANGO_NUM_PROXIES", raising=False)
    assert num_proxies_from_environment() == 0
    assert isinstance(REST_FRAMEWORK["NUM_PROXIES"], int)
    monkeypatch.setenv("DJANGO_NUM_PROXIES", "2")
    assert num_proxies_from_environment() == 2
    for wrong in ["-1", "one", "1.5"]:
        monkeypatch.setenv("DJANGO_NUM_PROXIES", wrong)
        with pytest.raises(ImproperlyConfigured, match="DJANGO_NUM_PROXIES must be a whole"):
            num_proxies_from_environment()
