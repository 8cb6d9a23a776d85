"""Settings for running the site on a server (``demo/wsgi.py``'s default).

``manage.py check --deploy --settings demo.settings.production`` is clean (a test runs it).
Configured by the environment (docs/deployment.md):

- ``DJANGO_SECRET_KEY`` (required) and ``DJANGO_ALLOWED_HOSTS`` (required, comma-separated);
- ``DATABASE_URL``: ``postgres://user:password@host:5432/name`` (PostgreSQL in production);
- ``DJANGO_SECURE_PROXY_SSL_HEADER=1`` when a proxy in front terminates TLS and sets
  ``X-Forwarded-Proto`` (and strips it from clients); ``DJANGO_HSTS_SECONDS`` (a year by
  default; start lower while trying HTTPS out), ``DJANGO_HSTS_PRELOAD=0`` to not ask for
  browsers' preload lists;
- ``DJANGO_STATIC_ROOT``: where ``collectstatic`` writes (the web server serves it);
- ``DJANGO_CONN_MAX_AGE``: how long a database connection is kept for the next request or
  task, in seconds (60 here unless set; ``none``: for ever; 0: one per request or task);
- ``DJANGO_NUM_PROXIES`` (read in ``demo.settings.base``): how many trusted proxies append to
  ``X-Forwarded-For`` in front of the site (default 0: the throttles count the connection's
  address and ignore the header, which a client could otherwise rotate to evade them).

Debug is never on here, whatever ``DJANGO_DEBUG`` says.
"""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

from demo.settings.base import *  # noqa: F403
from demo.settings.base import hosts_from_environment, secret_key_from_environment

DEBUG = False
SECRET_KEY = secret_key_from_environment(settings_module=__name__)
ALLOWED_HOSTS = hosts_from_environment("")
if not ALLOWED_HOSTS:
    raise ImproperlyConfigured(
        f"DJANGO_ALLOWED_HOSTS is not set ({__name__}): name the host names this site "
        "answers to, comma-separated (e.g. statecharts.example.com). See docs/deployment.md."
    )

# Persistent database connections (checked before reuse): without them every request and every
# django-q2 task connects again, and a worker's broker around every poll.
if not os.environ.get("DJANGO_CONN_MAX_AGE", "").strip():
    DATABASES["default"]["CONN_MAX_AGE"] = 60  # noqa: F405

# HTTPS only: plain HTTP is redirected, cookies never travel without TLS, and browsers are
# told to use HTTPS for the next DJANGO_HSTS_SECONDS.
SECURE_SSL_REDIRECT = True
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_HSTS_SECONDS = int(os.environ.get("DJANGO_HSTS_SECONDS", str(365 * 24 * 3600)))
SECURE_HSTS_INCLUDE_SUBDOMAINS = os.environ.get("DJANGO_HSTS_INCLUDE_SUBDOMAINS", "1") == "1"
SECURE_HSTS_PRELOAD = os.environ.get("DJANGO_HSTS_PRELOAD", "1") == "1"
if os.environ.get("DJANGO_SECURE_PROXY_SSL_HEADER") == "1":
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# One cache for every web process: the token endpoint's throttle counts guesses in it, and a
# per-process cache would let each process allow its own quota. The database is already
# shared by every host; create the table once with `manage.py createcachetable`.
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.db.DatabaseCache",
        "LOCATION": "statecharts_site_cache",
    }
}

# Errors go to stderr (the process manager's log), never to a page.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": "WARNING"},
}
