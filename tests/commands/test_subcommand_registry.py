"""``manage.py statechart`` lists its subcommands in one place (``SUBCOMMANDS``): a subcommand
declared in ``statecharts.management.statechart`` and not listed would be unreachable."""

from __future__ import annotations

import dataclasses
import importlib
import io
import logging
import pkgutil
from typing import Any

import pytest
from django.core.management import call_command

import statecharts.management.statechart as package
from statecharts.management.commands.statechart import BY_NAME, SUBCOMMANDS
from statecharts.management.statechart.common import Subcommand


def declared() -> list[Subcommand]:
    found = []
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        found += [value for value in vars(module).values() if isinstance(value, Subcommand)]
    return found


def test_every_declared_subcommand_is_listed_once() -> None:
    names = [subcommand.name for subcommand in SUBCOMMANDS]
    assert len(names) == len(set(names))
    assert {id(s) for s in declared()} == {id(s) for s in SUBCOMMANDS}


def test_django_q_info_lines_are_shown_only_from_verbosity_2(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """django-q2 logs each task it enqueues (a timer's wake-up) at INFO ("[Q] INFO Enqueued
    ..."): not the command's answer, so quiet below --verbosity 2, and the logger's level is
    given back afterwards."""
    queue_log = logging.getLogger("django-q")
    said: list[bool] = []

    def handle(console: Any, options: dict[str, Any]) -> None:
        said.append(queue_log.isEnabledFor(logging.INFO))
        queue_log.info("Enqueued [statecharts] 1")

    show = BY_NAME["show"]
    monkeypatch.setitem(BY_NAME, "show", dataclasses.replace(show, handle=handle))
    caplog.set_level(logging.INFO, logger="django-q")
    call_command("statechart", "show", "1", stdout=io.StringIO())
    assert said == [False] and "Enqueued" not in caplog.text
    assert queue_log.level == logging.INFO  # given back
    call_command("statechart", "show", "1", "--verbosity", "2", stdout=io.StringIO())
    assert said == [False, True] and "Enqueued [statecharts] 1" in caplog.text
