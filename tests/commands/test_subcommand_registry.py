"""``manage.py statechart`` lists its subcommands in one place (``SUBCOMMANDS``): a subcommand
declared in ``statecharts.management.statechart`` and not listed would be unreachable."""

from __future__ import annotations

import importlib
import pkgutil

import statecharts.management.statechart as package
from statecharts.management.commands.statechart import SUBCOMMANDS
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
