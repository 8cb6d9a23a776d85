"""``statecharts_settings`` keeps the values it read, and forgets them when ``STATECHARTS``
changes (``override_settings``, pytest-django's ``settings`` fixture) or an app registers
keys: a kept value is never stale."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from django.test.utils import override_settings

from statecharts import conf
from statecharts.conf import register_settings, statecharts_settings

EARLY = datetime(2026, 1, 1, tzinfo=UTC)
LATE = datetime(2026, 6, 1, tzinfo=UTC)


@pytest.fixture
def extra_group() -> Iterator[None]:
    yield
    conf._groups.pop("tests_settings", None)
    statecharts_settings.forget()


def test_a_value_read_follows_override_settings_in_and_out() -> None:
    default = statecharts_settings.ROUND_BUDGET
    assert default == statecharts_settings.ROUND_BUDGET  # (now kept)
    with override_settings(STATECHARTS={"ROUND_BUDGET": 7}):
        assert statecharts_settings.ROUND_BUDGET == 7
        with override_settings(STATECHARTS={"ROUND_BUDGET": 8}):
            assert statecharts_settings.ROUND_BUDGET == 8
        assert statecharts_settings.ROUND_BUDGET == 7
    assert default == statecharts_settings.ROUND_BUDGET


def test_the_clock_follows_the_setting() -> None:
    with override_settings(STATECHARTS={"CLOCK": lambda: EARLY}):
        assert statecharts_settings.now() == EARLY
        assert statecharts_settings.now() == EARLY
    with override_settings(STATECHARTS={"CLOCK": lambda: LATE}):
        assert statecharts_settings.now() == LATE


def test_the_settings_fixture_is_followed(settings: object) -> None:
    statecharts_settings.SEND_BUDGET  # noqa: B018 (kept)
    settings.STATECHARTS = {"SEND_BUDGET": 3}  # type: ignore[attr-defined]
    assert statecharts_settings.SEND_BUDGET == 3


def test_keys_registered_later_are_found_and_unknown_ones_refused(extra_group: None) -> None:
    with pytest.raises(AttributeError):
        statecharts_settings.TESTS_SETTINGS_KEY  # noqa: B018
    register_settings("tests_settings", {"TESTS_SETTINGS_KEY": 1})
    assert statecharts_settings.TESTS_SETTINGS_KEY == 1
    with override_settings(STATECHARTS={"TESTS_SETTINGS_KEY": 2}):
        assert statecharts_settings.TESTS_SETTINGS_KEY == 2


def test_an_imported_setting_follows_the_setting() -> None:
    from statecharts.stepper.applying import step_clock

    assert step_clock() is time.monotonic
    with override_settings(STATECHARTS={"STEP_CLOCK": "time.perf_counter"}):
        assert step_clock() is time.perf_counter
    assert step_clock() is time.monotonic
