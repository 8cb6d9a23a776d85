"""``manage.py statechart``: validate and load charts, drive executions, inspect them.

Subcommands::

    validate PATH [--strict]                    check a chart file, every problem with line:column
                                                (--strict: a syntax error in code is an error)
    load PATH [--name NAME] [--version V]       store a chart with the files it references (the
                                                same source twice: one chart); its warnings
    diagram CHART [--execution EXECUTION]       the chart's SVG diagram, to stdout
    start CHART [--data JSON] [--key KEY] [--subject APP_LABEL.MODEL:ID] [--as-user USERNAME]
                                                start an execution (CHART: id, or name; as
                                                that user: the start permissions are
                                                checked, the user recorded)
    send EXECUTION EVENT [--data JSON] [--as-user USERNAME]
                                                feed one external event (as that user: the
                                                event permissions are checked, the user
                                                recorded)
    show EXECUTION [--json]                     the read model: status, states, datamodel,
                                                what it can do now, timers (and other apps'
                                                sections), history
    cancel EXECUTION [--as-user USERNAME]
                                                cancel an execution (its onexit handlers run;
                                                as that user: the cancel permissions are
                                                checked, the user recorded)
    trace EXECUTION [EXECUTION ...] [--off]     keep the core's trace of their next steps
    replay EXECUTION                            re-drive the history; fails if it diverges
    replay --all [--chart CHART] [--status S]   the same for many executions, with a progress
                                                display; fails if any diverges
    deliver [--limit N]                         deliver outbox messages left pending
    deliver --retry [MESSAGE ...] [--limit N]   deliver undeliverable messages again (these,
                                                or every one)
    prune [--only STAGE] [--days STAGE=DAYS] [--batch N] [--dry-run]
                                                delete what retention no longer keeps, in
                                                batches, with a progress display
    erase (EXECUTION | --key KEY [--chart CHART]) [--cancel] [--reason R] [--yes]
                                                erase personal data (recorded in the history)
    reencrypt [--only KIND] [--batch N] [--dry-run]
                                                rewrite stored event data with the payload
                                                codec and key that write now (after a key
                                                rotation, or turning encryption on); rows
                                                it cannot read are reported and left
    migrate CHART [--map OLD=NEW] [--transform NAME] [--execution EXECUTION] [--dry-run] [--json]
                                                move running executions to another version
                                                of their chart
    export EXECUTION [--redact] [--output FILE] an execution as a JSON document
    import PATH                                 create an execution from an exported document
    health [--json]                             backlogs, sweepers, executions by status; exit
                                                0 ok, 1 warning, 2 critical

start, send and cancel take ``--caller-context JSON`` (recorded with the input:
``statecharts.policies.attribution``) and ``--idempotency-key KEY`` (run it again with the same key
after a lost answer and nothing is applied twice: ``statecharts.policies.idempotency``).

EXECUTION is an execution id or a session id. CHART is a chart id or a chart name; a name
that several charts share means the highest version of them (versions are compared as dotted
numbers), and is refused when that is not one chart (``statecharts.policies.lookups``, the rule the
API's start uses too).

The subcommands live in ``statecharts.management.statechart``, a module per subcommand or
small group, each declaring its arguments and a handler that calls the plain function doing
the work (``statecharts.stepper``, ``Chart.objects.load``, ``statecharts.operations.*``):
this module lists them (``SUBCOMMANDS``, in the order ``--help`` shows them) and dispatches.
A user error is a ``CommandError``: a message and a non-zero exit, no traceback.
"""

from __future__ import annotations

import argparse
import functools
import logging
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from statecharts.management.statechart import (
    charts,
    deliver,
    diagram,
    erase,
    health,
    inputs,
    migrate,
    prune,
    reencrypt,
    replay,
    show,
    trace,
    transfer,
)
from statecharts.management.statechart.common import Subcommand

SUBCOMMANDS: tuple[Subcommand, ...] = (
    charts.VALIDATE,
    charts.LOAD,
    diagram.SUBCOMMAND,
    inputs.START,
    inputs.SEND,
    show.SUBCOMMAND,
    inputs.CANCEL,
    trace.SUBCOMMAND,
    replay.SUBCOMMAND,
    deliver.SUBCOMMAND,
    prune.SUBCOMMAND,
    erase.SUBCOMMAND,
    reencrypt.SUBCOMMAND,
    migrate.SUBCOMMAND,
    transfer.EXPORT,
    transfer.IMPORT,
    health.SUBCOMMAND,
)
BY_NAME = {subcommand.name: subcommand for subcommand in SUBCOMMANDS}


class Command(BaseCommand):
    help = "Validate and load statecharts, start and drive executions, inspect and replay them."

    def add_arguments(self, parser: CommandParser) -> None:
        # Django's own options are the main parser's; accept them after the subcommand too
        # ("statechart send 3 go --traceback"). SUPPRESS: absent unless given there.
        common = argparse.ArgumentParser(add_help=False)
        hidden = {"default": argparse.SUPPRESS, "help": argparse.SUPPRESS}
        common.add_argument("-v", "--verbosity", type=int, choices=[0, 1, 2, 3], **hidden)
        for flag in ("--traceback", "--no-color", "--force-color", "--skip-checks"):
            common.add_argument(flag, action="store_true", **hidden)
        commands = parser.add_subparsers(
            dest="subcommand", required=True, metavar="SUBCOMMAND", title="subcommands"
        )
        add = functools.partial(commands.add_parser, parents=[common])
        for subcommand in SUBCOMMANDS:
            subcommand.add_arguments(add(subcommand.name, help=subcommand.help))

    def handle(self, *args: Any, **options: Any) -> None:
        # django-q2 logs each task it enqueues (a timer's wake-up) at INFO, "[Q] INFO
        # Enqueued ...": not this command's answer; shown from --verbosity 2 on.
        queue_log = logging.getLogger("django-q")
        level = queue_log.level
        if options.get("verbosity", 1) < 2:
            queue_log.setLevel(max(level, logging.WARNING))
        try:
            BY_NAME[options["subcommand"]].handle(self, options)
        finally:
            queue_log.setLevel(level)

    def say(self, line: str = "") -> None:
        self.stdout.write(line)
