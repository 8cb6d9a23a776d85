"""Settings for the runnable demo site and the test suite."""

from __future__ import annotations

import os
from pathlib import Path

from config.database import database_from_url

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "insecure-demo-key-change-me")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = os.environ.get("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1").split(",")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",  # the API's filters (its templates draw them in the browsable API)
    "drf_spectacular",  # the API's OpenAPI 3 schema at /api/schema/
    "django_q",
    "statecharts",
    "timers",
    "invocations",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"

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

WSGI_APPLICATION = "config.wsgi.application"

DATABASES = {
    "default": database_from_url(
        os.environ.get("DATABASE_URL"), default_sqlite=BASE_DIR / "db.sqlite3"
    )
}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"
STATIC_URL = "static/"

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
