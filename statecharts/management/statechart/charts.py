"""``statechart validate PATH`` and ``statechart load PATH``: a chart file checked, or stored
with the files it references (``statecharts.runtime``, ``Chart.objects.load``); every
problem with line:column."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any

from django.core.management.base import CommandError

from statecharts import stepper
from statecharts.core import ChartError, Problem
from statecharts.core.parse import decode_utf8, read_document
from statecharts.exceptions import InvalidInput
from statecharts.management.statechart.common import Console, Subcommand
from statecharts.models import Chart
from statecharts.runtime import check_source, compile_source, read_chart_file
from statecharts.versions import VersionError


def problem_lines(path: str, problems: Iterable[Problem], warnings: Iterable[Problem]) -> list[str]:
    lines = [f"{path}:{p.line}:{p.column}: {p.message}" for p in problems]
    lines += [f"{path}:{p.line}:{p.column}: warning: {p.message}" for p in warnings]
    return lines


def chart_refused(path: str, error: ChartError) -> CommandError:
    count = len(error.problems)
    lines = problem_lines(path, error.problems, error.warnings)
    heading = f"{path} is not a valid chart ({count} problem{'s' if count != 1 else ''}):"
    return CommandError("\n".join([heading, *lines]))


def read_chart_source(path: str) -> str:
    """The file's text: read at most one byte past the document bound (``/dev/zero`` is
    refused, not read forever), UTF-8, refused with line:column otherwise."""
    try:
        return decode_utf8(read_document(path))
    except OSError as exc:
        raise CommandError(f"{path}: cannot read the file: {exc.strerror or exc}") from None
    except ChartError as exc:
        raise chart_refused(path, exc) from None


def read_chart(path: str) -> tuple[str, dict[str, str], str]:
    """The file's text, the files it references (read now: ``<data src>``, ``<script
    src>``, ``<invoke src>``) and its folder; CommandError naming the file otherwise."""
    read_chart_source(path)  # the file's own problems first: unreadable, too big, not UTF-8
    try:
        return read_chart_file(path)
    except OSError as exc:
        raise CommandError(f"{path}: cannot read the file: {exc.strerror or exc}") from None
    except ChartError as exc:
        raise chart_refused(path, exc) from None


def load_chart(
    path: str, *, name: str = "", version: str = "", new_version: bool = False
) -> tuple[Chart, bool]:
    """Store the chart in ``path`` with the files it references; return it and whether it
    was already stored."""
    chart_label(stepper.ChartLoadRequest(name=name), "--name")
    chart_label(stepper.ChartLoadRequest(version=version), "--version")
    source, resources, folder = read_chart(path)
    try:
        compiled = compile_source(source, resources or None, folder)  # cached for load()
        named = stepper.ChartLoadRequest(name=name or compiled.name or "")
        chart_label(named, "the chart's name")
        digest = compiled.source_hash
        existed = Chart.objects.filter(content_hash=digest).exists()
        chart = Chart.objects.load(
            source,
            name=name,
            version=version,
            new_version=new_version,
            resources=resources,
            folder=folder,
        )
        return chart, existed
    except ChartError as exc:
        raise chart_refused(path, exc) from None
    except VersionError as exc:
        raise CommandError(f"{path}: {exc}".replace("new_version=True; ", "")) from None


def chart_label(request: stepper.ChartLoadRequest, option: str) -> None:
    """A chart's --name or --version (the stepper's gate): it must fit its column."""
    try:
        stepper.admit(request)
    except InvalidInput as exc:
        raise CommandError(f"{option} {exc.problems[0].message}") from None


# ---- validate --------------------------------------------------------------------------------


def add_validate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="an SCXML file")
    parser.add_argument(
        "--strict",
        action="store_true",
        help="a syntax error in an expression or <script> is an error (default: the "
        "EXPRESSION_SYNTAX setting; warning)",
    )


def validate(console: Console, options: dict[str, Any]) -> None:
    path: str = options["path"]
    source, resources, folder = read_chart(path)
    try:
        _, warnings = check_source(
            source, resources, folder, strict=True if options["strict"] else None
        )
    except ChartError as exc:
        raise chart_refused(path, exc) from None
    for line in problem_lines(path, (), warnings):
        console.say(line)
    console.say(f"{path}: valid")


# ---- load ------------------------------------------------------------------------------------


def add_load_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="an SCXML file (UTF-8)")
    parser.add_argument("--name", default="", help="default: the <scxml name> attribute")
    parser.add_argument(
        "--version", dest="chart_version", metavar="VERSION", default="", help="a version label"
    )
    parser.add_argument(
        "--new-version",
        action="store_true",
        help="store a different source under a name a chart already has, as its next "
        "version (default label: the next whole number)",
    )


def load(console: Console, options: dict[str, Any]) -> None:
    name: str = options["name"]
    version: str = options["chart_version"]
    chart, existed = load_chart(
        options["path"], name=name, version=version, new_version=options["new_version"]
    )
    for line in problem_lines(options["path"], (), chart.load_warnings):
        console.say(line)
    if existed:
        console.say(f"chart {chart.pk} ({chart}) already holds this source; nothing stored")
        if (name and name != chart.name) or (version and version != chart.version):
            console.say(f"note: it keeps its name {chart.name!r} and version {chart.version!r}")
    else:
        console.say(f"chart {chart.pk} ({chart}) loaded")
    console.say(f"id: {chart.pk}")
    console.say(f"sha256: {chart.content_hash}")


VALIDATE = Subcommand(
    "validate", "check a chart file; list every problem", add_validate_arguments, validate
)
LOAD = Subcommand(
    "load", "store a chart (the same source twice: one chart)", add_load_arguments, load
)
