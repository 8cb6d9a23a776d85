"""Turn ``DATABASE_URL`` into a Django ``DATABASES`` entry.

Only the two backends the project is tested on are understood; anything else is a
clear error at start-up rather than a surprise later.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit


class DatabaseURLError(ValueError):
    pass


def database_from_url(url: str | None, *, default_sqlite: Path) -> dict[str, Any]:
    if not url:
        return _sqlite(str(default_sqlite))
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        # sqlite:///relative.db, sqlite:////absolute.db, sqlite:///:memory:
        path = unquote(parts.path[1:]) if parts.path.startswith("/") else unquote(parts.path)
        return _sqlite(path or str(default_sqlite))
    if parts.scheme in {"postgres", "postgresql", "pgsql"}:
        options = dict(parse_qsl(parts.query))
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(parts.path.lstrip("/")) or "postgres",
            "USER": unquote(parts.username or ""),
            "PASSWORD": unquote(parts.password or ""),
            "HOST": parts.hostname or "",
            "PORT": str(parts.port or ""),
            "OPTIONS": options,
            # Persistent connections (DJANGO_CONN_MAX_AGE seconds; 0, the default, closes
            # each at the end of its request or task): a django-q2 worker otherwise connects
            # again around every poll of its broker, a new server process each time
            # (docs/deployment.md). Checked before reuse, so a server restart is survived.
            "CONN_MAX_AGE": _conn_max_age(),
            "CONN_HEALTH_CHECKS": True,
            # Lets two test runs share one server without fighting over test_<NAME>.
            "TEST": {"NAME": os.environ.get("DATABASE_TEST_NAME") or None},
        }
    raise DatabaseURLError(
        f"DATABASE_URL scheme {parts.scheme!r} is not supported (sqlite, postgres)"
    )


def _conn_max_age() -> int | None:
    text = os.environ.get("DJANGO_CONN_MAX_AGE", "").strip()
    if not text:
        return 0
    if text.lower() == "none":
        return None  # unlimited
    if not text.isdigit():
        raise DatabaseURLError(
            f"DJANGO_CONN_MAX_AGE must be a number of seconds or 'none', not {text!r}"
        )
    return int(text)


def _sqlite(name: str) -> dict[str, Any]:
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": name,
        # IMMEDIATE takes the write lock when a transaction starts, so concurrent writers
        # wait (up to `timeout` seconds) instead of failing with "database is locked"
        # when a reader tries to upgrade. See docs/durable-executions.md.
        "OPTIONS": {"transaction_mode": "IMMEDIATE", "timeout": 20},
        # A file, not the in-memory default: crash and concurrency tests step the test
        # database from other processes and threads. DATABASE_TEST_NAME (a file name, put
        # beside the database) lets two runs in one checkout keep apart, as on PostgreSQL.
        "TEST": {"NAME": _test_name(name, os.environ.get("DATABASE_TEST_NAME") or None)},
    }


def _test_name(name: str, chosen: str | None = None) -> str:
    if name == ":memory:" or name.startswith("file:"):
        return name
    path = Path(name)
    if chosen:
        chosen_path = Path(chosen)
        return str(path.with_name(chosen_path.name + ("" if chosen_path.suffix else ".sqlite3")))
    return str(path.with_name(f"test_{path.stem}{path.suffix or '.sqlite3'}"))


def url_for(settings: dict[str, Any]) -> str:
    """The ``DATABASE_URL`` naming a ``DATABASES`` entry (e.g. the test database), so another
    process (a worker, the web server of the demo) opens the same database."""
    engine = settings["ENGINE"]
    if engine == "django.db.backends.sqlite3":
        return f"sqlite:///{Path(settings['NAME']).resolve()}"
    if engine != "django.db.backends.postgresql":
        raise DatabaseURLError(f"no DATABASE_URL form for {engine}")
    user = quote(settings.get("USER") or "", safe="")
    password = f":{quote(settings['PASSWORD'], safe='')}" if settings.get("PASSWORD") else ""
    credentials = f"{user}{password}@" if user else ""
    host = settings.get("HOST") or "127.0.0.1"
    port = f":{settings['PORT']}" if settings.get("PORT") else ""
    return f"postgres://{credentials}{host}{port}/{quote(settings['NAME'], safe='')}"
