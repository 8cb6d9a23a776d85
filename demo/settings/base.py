"""What every settings module of the repo's site shares (see demo/settings/__init__.py).

No ``SECRET_KEY`` and no ``ALLOWED_HOSTS`` here: each module that serves requests decides
them. ``DEBUG`` is off; only ``demo.settings.site`` turns it on, and only when asked.
"""

from __future__ import annotations

import os
from pathlib import Path

from demo.database import database_from_url
from statecharts.api.schema import SCHEMA_SETTINGS

BASE_DIR = Path(__file__).resolve().parents[2]  # the repository's root

DEBUG = False

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",  # the demo's tokens (POST /api/auth/token/, demo/views.py)
    "django_filters",  # the API's filters (its templates draw them in the browsable API)
    "drf_spectacular",  # the API's OpenAPI 3 schema at /api/schema/
    "drf_spectacular_sidecar",  # the demo's API docs page (Swagger UI, served offline)
    "django_q",
    "statecharts",
    "timers",
    "invocations",
    "routes",  # <send type="..."> to host-registered routes (docs/routes.md)
    "demo",  # the landing page's template
]

# The demo site's routes (demo/settings/site.py applies them; the tests register their own).
DEMO_ROUTES = {
    "email": {
        "ROUTE": "routes.builtins.EmailRoute",
        "TYPES": ["email"],
        "OPTIONS": {"allowed_domains": ["example.com"]},
    }
}

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "demo.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

WSGI_APPLICATION = "demo.wsgi.application"

DATABASES = {
    "default": database_from_url(
        os.environ.get("DATABASE_URL"), default_sqlite=BASE_DIR / "db.sqlite3"
    )
}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"
STATIC_URL = "static/"
# Where `manage.py collectstatic` puts the admin's, the API's and the docs page's files for the
# web server in front (docs/deployment.md); DEBUG's runserver serves them from the apps.
STATIC_ROOT = Path(os.environ.get("DJANGO_STATIC_ROOT") or BASE_DIR / "staticfiles")
# Pages for signed-in users (the API docs page) send others to the admin's login.
LOGIN_URL = "admin:login"


def num_proxies_from_environment() -> int:
    """``DJANGO_NUM_PROXIES``: how many trusted proxies stand in front of the site (``0``
    when unset: the client connects directly, and ``X-Forwarded-For`` is not believed)."""
    value = os.environ.get("DJANGO_NUM_PROXIES", "").strip() or "0"
    if not value.isascii() or not value.isdigit():
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(
            f"DJANGO_NUM_PROXIES must be a whole number of trusted proxies (0 or more), not "
            f"{value[:40]!r}. See docs/deployment.md."
        )
    return int(value)


# The REST API (statecharts.api): session login for the browsable API, tokens for clients
# (token first, so an anonymous client gets 401 with WWW-Authenticate: Token). The API's views
# set their own permissions (model permissions), pagination and filters.
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "statecharts.api.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    # The demo's password-for-token endpoint (demo/views.py): guesses per client address.
    # The counts live in the cache: one shared by every process (CACHES, docs/deployment.md),
    # or each process counts on its own and the limit multiplies by the number of processes.
    "DEFAULT_THROTTLE_RATES": {"auth-token": os.environ.get("DJANGO_TOKEN_RATE", "10/min")},
    # Whose address a throttle counts: with NUM_PROXIES unset DRF takes X-Forwarded-For as the
    # client sends it, so rotating that header would get a fresh quota per guess. 0 (the
    # default) counts REMOTE_ADDR and ignores the header; behind N trusted proxies that each
    # append to X-Forwarded-For, DJANGO_NUM_PROXIES=N counts the client address the outermost
    # one saw (the Nth from the right; what clients put further left is ignored).
    "NUM_PROXIES": num_proxies_from_environment(),
}

SPECTACULAR_SETTINGS = {
    # The API's own schema settings (its schema view passes them too), so that what
    # drf-spectacular's system check generates (`check --deploy`) is the same document.
    **SCHEMA_SETTINGS,
    # The API docs page (demo/urls.py): Swagger UI from the sidecar package, no CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# django-q2 runs the timer sweepers and drains (see timers/dispatch.py).
Q_CLUSTER = {
    "name": "statecharts",
    "orm": "default",  # the ORM broker: no Redis; tasks are rows in django_q_ormq
    # A sweeper holds a worker for its whole life (TIMER_SWEEP_SECONDS, 90 s) and the
    # every-minute schedule makes two overlap (plus any wake()): 4 usually leaves two workers
    # free for drains (with 2, both are sweeping for ~30 s of every minute).
    "workers": 4,
    # Longer than a sweeper lives (90 s), or every sweeper would be killed as timed out.
    "timeout": 120,
    # Longer than timeout: the ORM broker re-delivers a task not acknowledged by then.
    "retry": 180,
    # Redelivery of a failed task (sweepers and drains are acked on failure anyway: the next
    # sweeper covers them); a task that keeps failing is dropped after 3 tries, not retried forever.
    "max_attempts": 3,
    # How often an idle cluster polls the ORM broker: a drain starts within 0.1 s of being queued.
    "poll": 0.1,
    "catch_up": False,
}


def secret_key_from_environment(*, settings_module: str) -> str:
    """``DJANGO_SECRET_KEY``, or ImproperlyConfigured saying what to do: a site that serves
    requests without a key of its own signs sessions and password resets with a key anyone
    can read in this repository."""
    key = os.environ.get("DJANGO_SECRET_KEY", "").strip()
    if key:
        return key
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(
        f"DJANGO_SECRET_KEY is not set ({settings_module}). Outside debug the site needs a "
        "secret key of its own: export DJANGO_SECRET_KEY=\"$(python -c 'import secrets; "
        "print(secrets.token_urlsafe(50))')\". For local development export DJANGO_DEBUG=1 "
        "instead (bash scripts/demo does), never on a server. See docs/deployment.md."
    )


def hosts_from_environment(default: str) -> list[str]:
    """``DJANGO_ALLOWED_HOSTS``, comma-separated (``default`` when unset)."""
    value = os.environ.get("DJANGO_ALLOWED_HOSTS", default)
    return [host.strip() for host in value.split(",") if host.strip()]

