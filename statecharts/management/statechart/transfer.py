"""``statechart export EXECUTION [--redact] [--output FILE]`` and ``statechart import PATH``:
an execution as a JSON document (``statecharts.operations.transfer``)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError

from statecharts.management.statechart.common import Console, Subcommand
from statecharts.operations.transfer import (
    ExportRefused,
    ImportRefused,
    export_execution,
    import_execution,
)
from statecharts.policies import lookups

MAX_DOCUMENT_BYTES = 300 * 1024 * 1024  # a position's own bound, and the parts' rows


def add_export_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("execution", help="an execution id or session id")
    parser.add_argument(
        "--redact",
        action="store_true",
        help="replace datamodel values, metadata, the business key and event data with "
        "markers (for a bug report)",
    )
    parser.add_argument("--output", "-o", help="write to this file (default: standard output)")


def add_import_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="an exported document ('-': standard input)")


def export(console: Console, options: dict[str, Any]) -> None:
    try:
        execution = lookups.find_execution(options["execution"])
        document = export_execution(execution, redact=options["redact"])
    except (lookups.LookupProblem, ExportRefused) as exc:
        raise CommandError(str(exc)) from None
    text = json.dumps(document, indent=2, ensure_ascii=False)
    if options["output"]:
        Path(options["output"]).write_text(text + "\n", encoding="utf-8")
        console.say(f"execution {execution.pk} exported to {options['output']}")
    else:
        console.say(text)


def import_(console: Console, options: dict[str, Any]) -> None:
    path: str = options["path"]
    try:
        if path == "-":
            raw = sys.stdin.buffer.read(MAX_DOCUMENT_BYTES + 1)
        else:
            with open(path, "rb") as handle:
                raw = handle.read(MAX_DOCUMENT_BYTES + 1)
    except OSError as exc:
        raise CommandError(f"{path}: cannot read the file: {exc.strerror or exc}") from None
    if len(raw) > MAX_DOCUMENT_BYTES:
        raise CommandError(f"{path}: larger than {MAX_DOCUMENT_BYTES} bytes")
    try:
        document = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise CommandError(f"{path}: not JSON: {exc}") from None
    try:
        execution = import_execution(document)
    except ImportRefused as exc:
        raise CommandError(f"{path}: {exc}") from None
    console.say(f"execution: {execution.pk}")
    console.say(f"session: {execution.session_id}")
    console.say(f"status: {execution.status}")


EXPORT = Subcommand(
    "export",
    "an execution as a JSON document (to move it, or for a report)",
    add_export_arguments,
    export,
)
IMPORT = Subcommand(
    "import", "create an execution from an exported document", add_import_arguments, import_
)
