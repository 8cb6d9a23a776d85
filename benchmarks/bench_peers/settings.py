"""The test settings plus the benchmark-only peer app (``benchmarks/`` must be on sys.path)."""

from __future__ import annotations

from demo.settings.test import *  # noqa: F403
from demo.settings.test import INSTALLED_APPS as _PROJECT_APPS

INSTALLED_APPS = [*_PROJECT_APPS, "bench_peers"]
