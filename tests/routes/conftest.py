from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.test import override_settings

from tests.routes.recording import Recorder, settings_with


@pytest.fixture
def recorder() -> Iterator[type[Recorder]]:
    """The recording route registered (``STATECHARTS["ROUTES"]``), its deliveries cleared."""
    Recorder.deliveries.clear()
    with override_settings(STATECHARTS=settings_with()):
        yield Recorder
    Recorder.deliveries.clear()
