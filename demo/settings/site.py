"""The site's default settings (``manage.py``): safe unless the developer opts into debug.

``DJANGO_DEBUG=1`` turns on Django's debug mode (its error pages show settings and the
environment: never on a server); without it ``DJANGO_SECRET_KEY`` must be set, or start-up
fails with a message saying so. ``bash scripts/demo`` turns debug on for itself, loudly.
"""

from __future__ import annotations

import os

from demo.settings.base import *  # noqa: F403
from demo.settings.base import (
    DEMO_ROUTES,
    hosts_from_environment,
    secret_key_from_environment,
)

DEBUG = os.environ.get("DJANGO_DEBUG", "") == "1"

# A key anyone can read, accepted only in debug (the demo on your machine).
DEBUG_SECRET_KEY = "insecure-debug-only-key-for-the-local-demo"

if DEBUG and not os.environ.get("DJANGO_SECRET_KEY", "").strip():
    SECRET_KEY = DEBUG_SECRET_KEY
else:
    SECRET_KEY = secret_key_from_environment(settings_module=__name__)

ALLOWED_HOSTS = hosts_from_environment("localhost,127.0.0.1")

# The demo's route (docs/routes.md): e-mail to example.com addresses, printed by the console
# backend (the worker prints it), for the sign-up nudge (docs/examples/signup_nudge.scxml).
EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
DEFAULT_FROM_EMAIL = "demo@example.com"
STATECHARTS = {"ROUTES": DEMO_ROUTES}
