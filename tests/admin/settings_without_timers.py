"""A deployment without the timers and invocations apps (tests/admin/test_without_timers.py):
the demo site's settings with those two apps left out of INSTALLED_APPS."""

from demo.settings.test import *  # noqa: F403
from demo.settings.test import INSTALLED_APPS

INSTALLED_APPS = [app for app in INSTALLED_APPS if app not in ("timers", "invocations")]
ALLOWED_HOSTS = ["testserver"]
