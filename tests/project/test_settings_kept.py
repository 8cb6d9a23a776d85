"""``statecharts_settings`` keeps the values it read, and forgets them when ``STATECHARTS``
changes (``override_settings``, pytest-django's ``settings`` fixture) or ``INSTALLED_APPS``
changes (the keys that exist are the installed apps' declarations): a kept value is never
stale."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from django.apps import apps
from django.core.signals import setting_changed
from django.test.utils import override_settings

from statecharts.conf import Setting, all_defaults, statecharts_settings

EARLY = datetime(2026, 1, 1, tzinfo=UTC)
LATE = datetime(2026, 6, 1, tzinfo=UTC)


def apps_changed() -> None:
    """What ``override_settings(INSTALLED_APPS=...)`` sends once the apps are reloaded."""
    setting_changed.send(sender=None, setting="INSTALLED_APPS", value=None, enter=True)


@pytest.fixture
def extra_key(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The routes app, as if a newer version of it declared one key more."""
    all_defaults()  # (the declarations as they were, read)
    config = apps.get_app_config("routes")
    extra = Setting("TESTS_SETTINGS_KEY", 1, "a key declared by a test")
    monkeypatch.setattr(
        config,
        "declaration",
        replace(config.declaration, settings=(*config.declaration.settings, extra)),
    )
    yield
    monkeypatch.undo()
    apps_changed()


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


def test_keys_declared_by_the_installed_apps_are_found_and_unknown_ones_refused(
    extra_key: None,
) -> None:
    with pytest.raises(AttributeError):
        statecharts_settings.TESTS_SETTINGS_KEY  # noqa: B018  (declared, not read again yet)
    apps_changed()
    assert statecharts_settings.TESTS_SETTINGS_KEY == 1
    with override_settings(STATECHARTS={"TESTS_SETTINGS_KEY": 2}):
        assert statecharts_settings.TESTS_SETTINGS_KEY == 2


def test_an_imported_setting_follows_the_setting() -> None:
    from statecharts.stepper.applying import step_clock

    assert step_clock() is time.monotonic
    with override_settings(STATECHARTS={"STEP_CLOCK": "time.perf_counter"}):
        assert step_clock() is time.perf_counter
    assert step_clock() is time.monotonic


def test_a_named_class_is_made_once_per_name_and_forgotten_when_the_setting_changes() -> None:
    """statecharts.conf.NamedClasses, as the payload codecs use it (timer deliveries too)."""
    from statecharts.policies import codecs

    named = {
        "json": "statecharts.policies.codecs.JSONCodec",
        "other": "statecharts.policies.codecs.JSONCodec",
        "broken": "statecharts.policies.codecs.NoSuchCodec",
    }
    with override_settings(STATECHARTS={"PAYLOAD_CODECS": named}):
        first = codecs.resolve("other")
        assert codecs.resolve("other") is first
        with pytest.raises(codecs.CodecUnavailable, match="'missing' is not in PAYLOAD_CODECS"):
            codecs.resolve("missing")
        with pytest.raises(codecs.CodecUnavailable, match=r"'broken' .* cannot be loaded"):
            codecs.resolve("broken")
    with override_settings(STATECHARTS={"PAYLOAD_CODECS": named}):
        assert codecs.resolve("other") is not first
