"""``manage.py statechart``: validate and load charts, drive executions, inspect them.

Subcommands::

    validate PATH                               check a chart file, every problem with line:column
    load PATH [--name NAME] [--version V]       store a chart (the same source twice: one chart)
    start CHART [--data JSON] [--key KEY]       start an execution (CHART: id, or name)
    send EXECUTION EVENT [--data JSON]          feed one external event
    show EXECUTION [--json]                     status, configuration, donedata and history
    cancel EXECUTION                            cancel an execution (its onexit handlers run)
    replay EXECUTION                            re-drive the history; fails if it diverges
    deliver [--limit N]                         deliver outbox messages left pending

EXECUTION is an execution id or a session id. CHART is a chart id or a chart name; a name
that several charts share means the highest version of them (versions are compared as dotted
numbers), and is refused when that is not one chart.

The work is done by ``statecharts.stepper``, ``statecharts.replay`` and
``Chart.objects.load``; this module parses arguments, looks rows up and prints. A user error
is a ``CommandError``: a message and a non-zero exit, no traceback.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from statecharts import stepper
from statecharts.core import ChartError, Problem, StatechartError, load_chart_file
from statecharts.models import Chart, Execution, ExecutionStatus, HistoryEntry
from statecharts.replay import replay
from statecharts.runtime import compile_source

# ---- lookups and conversions (plain functions; the tests call them too) ----------------------


def _is_id(ref: str) -> bool:
    return ref.isascii() and ref.isdigit() and len(ref) <= 18  # fits a 64-bit primary key


def find_execution(ref: str) -> Execution:
    """The execution whose id or session id is ``ref``."""
    queryset = Execution.objects.select_related("chart")
    matches: dict[int, Execution] = {}
    if _is_id(ref):
        matches.update((e.pk, e) for e in queryset.filter(pk=int(ref)))
    matches.update((e.pk, e) for e in queryset.filter(session_id=ref))
    if not matches:
        raise CommandError(f"no execution with id or session id {ref!r}")
    if len(matches) > 1:
        ids = ", ".join(str(pk) for pk in sorted(matches))
        raise CommandError(
            f"{ref!r} is the id of one execution and the session id of another "
            f"(executions {ids}): give the id of the one you mean"
        )
    return next(iter(matches.values()))


def version_key(version: str) -> tuple[tuple[int, int, str], ...]:
    """Order versions as dotted numbers: "1.10" is after "1.9"."""
    return tuple(
        (0, int(part), "") if part.isdigit() else (1, 0, part)
        for part in re.findall(r"\d+|\D+", version)
    )


def _describe(charts: Iterable[Chart]) -> str:
    return ", ".join(
        f"{c.pk} ({'v' + c.version if c.version else 'no version'})"
        for c in sorted(charts, key=lambda c: c.pk)
    )


def find_chart(ref: str) -> Chart:
    """The chart whose id is ``ref``, or the highest version of the charts named ``ref``."""
    by_id = Chart.objects.filter(pk=int(ref)).first() if _is_id(ref) else None
    named = list(Chart.objects.filter(name=ref))
    if by_id is None and not named:
        raise CommandError(f"no chart with id or name {ref!r}")
    if by_id is not None:
        if any(chart.pk != by_id.pk for chart in named):
            raise CommandError(
                f"{ref!r} is the id of chart {by_id.pk} and the name of chart(s) "
                f"{_describe(named)}: give the id of the one you mean"
            )
        return by_id
    if len(named) == 1:
        return named[0]
    if any(not chart.version for chart in named):
        raise CommandError(
            f"{len(named)} charts are named {ref!r} and not all of them have a version, so "
            f"none is the latest: give a chart id, one of {_describe(named)}"
        )
    named.sort(key=lambda chart: version_key(chart.version), reverse=True)
    if version_key(named[0].version) == version_key(named[1].version):
        tied = [c for c in named if version_key(c.version) == version_key(named[0].version)]
        raise CommandError(
            f"several charts named {ref!r} have the latest version {named[0].version!r}: "
            f"give a chart id, one of {_describe(tied)}"
        )
    return named[0]


def parse_json(text: str | None, *, option: str = "--data", require_object: bool = False) -> Any:
    """The JSON value ``text`` holds (None when the option was not given)."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(f"{option} is not valid JSON: {exc}") from None
    if require_object and not isinstance(value, dict):
        raise CommandError(f"{option} must be a JSON object, not {type(value).__name__}: {text}")
    return value


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
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise CommandError(f"{path}: cannot read the file: {exc.strerror or exc}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CommandError(f"{path}: a stored chart must be UTF-8 text: {exc}") from None


def load_chart(path: str, *, name: str = "", version: str = "") -> tuple[Chart, bool]:
    """Store the chart in ``path``; return it and whether it was already stored."""
    source = read_chart_source(path)
    try:
        digest = compile_source(source).source_hash  # cached: load() compiles it once
        existed = Chart.objects.filter(content_hash=digest).exists()
        return Chart.objects.load(source, name=name, version=version), existed
    except ChartError as exc:
        raise chart_refused(path, exc) from None


def event_name(value: str) -> str:
    if not value or any(ch.isspace() for ch in value):
        raise CommandError(f"{value!r} is not an event name (it must be non-empty, no spaces)")
    return value


def positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {value!r}")
    return number


def input_label(raw: dict[str, Any]) -> str:
    event = raw.get("event") or {}
    return f"{raw.get('kind')} {event['name']}" if event.get("name") else str(raw.get("kind"))


def _when(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def execution_document(execution: Execution) -> dict[str, Any]:
    """Everything ``show --json`` prints: the execution, its chart and its history."""
    chart = execution.chart
    return {
        "id": execution.pk,
        "session_id": execution.session_id,
        "status": execution.status,
        "chart": {
            "id": chart.pk,
            "name": chart.name,
            "version": chart.version,
            "sha256": chart.content_hash,
        },
        "business_key": execution.business_key,
        "metadata": execution.metadata,
        "configuration": execution.configuration,
        "donedata": execution.donedata,
        "outcome": execution.outcome,
        "failure_reason": execution.failure_reason,
        "steps": execution.steps,
        "created": _when(execution.created),
        "updated": _when(execution.updated),
        "ended": _when(execution.ended),
        "history": [_history_document(entry) for entry in execution.history.order_by("seq")],
    }


def _history_document(entry: HistoryEntry) -> dict[str, Any]:
    return {
        "seq": entry.seq,
        "input": entry.input,
        "disposition": entry.disposition,
        "status_after": entry.status_after,
        "configuration_after": entry.configuration_after,
        "effects": entry.effects,
        "created": _when(entry.created),
    }


def _states(configuration: list[str]) -> str:
    return " ".join(configuration) if configuration else "(none)"


# ---- the command -----------------------------------------------------------------------------


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

        p = add("validate", help="check a chart file; list every problem")
        p.add_argument("path", help="an SCXML file")

        p = add("load", help="store a chart (the same source twice: one chart)")
        p.add_argument("path", help="an SCXML file (UTF-8)")
        p.add_argument("--name", default="", help="default: the <scxml name> attribute")
        p.add_argument(
            "--version", dest="chart_version", metavar="VERSION", default="", help="a version label"
        )

        p = add("start", help="start an execution of a chart")
        p.add_argument("chart", help="a chart id, or a chart name (its latest version)")
        p.add_argument("--data", help="a JSON object: values for top-level <data> ids")
        p.add_argument("--key", help="a business key, unique per chart")

        p = add("send", help="feed one external event to an execution")
        p.add_argument("execution", help="an execution id or session id")
        p.add_argument("event", help="the event name")
        p.add_argument("--data", help="the event data, as JSON")

        p = add("show", help="an execution's state and history")
        p.add_argument("execution", help="an execution id or session id")
        p.add_argument(
            "--json", dest="as_json", action="store_true", help="print one JSON document"
        )

        p = add("cancel", help="cancel an execution")
        p.add_argument("execution", help="an execution id or session id")

        p = add("replay", help="re-drive an execution's history and compare")
        p.add_argument("execution", help="an execution id or session id")

        p = add("deliver", help="deliver pending outbox messages")
        p.add_argument("--limit", type=positive_int, help="at most this many (default: a batch)")

    def handle(self, *args: Any, **options: Any) -> None:
        handlers: dict[str, Callable[[dict[str, Any]], None]] = {
            "validate": self.validate,
            "load": self.load,
            "start": self.start,
            "send": self.send,
            "show": self.show,
            "cancel": self.cancel,
            "replay": self.replay,
            "deliver": self.deliver,
        }
        handlers[options["subcommand"]](options)

    def say(self, line: str = "") -> None:
        self.stdout.write(line)

    # ---- charts ----

    def validate(self, options: dict[str, Any]) -> None:
        path: str = options["path"]
        try:
            compiled = load_chart_file(path)
        except ChartError as exc:
            raise chart_refused(path, exc) from None
        except OSError as exc:
            raise CommandError(f"{path}: cannot read the file: {exc.strerror or exc}") from None
        for line in problem_lines(path, (), compiled.warnings):
            self.say(line)
        self.say(f"{path}: valid")

    def load(self, options: dict[str, Any]) -> None:
        name: str = options["name"]
        version: str = options["chart_version"]
        chart, existed = load_chart(options["path"], name=name, version=version)
        if existed:
            self.say(f"chart {chart.pk} ({chart}) already holds this source; nothing stored")
            if (name and name != chart.name) or (version and version != chart.version):
                self.say(f"note: it keeps its name {chart.name!r} and version {chart.version!r}")
        else:
            self.say(f"chart {chart.pk} ({chart}) loaded")
        self.say(f"id: {chart.pk}")
        self.say(f"sha256: {chart.content_hash}")

    # ---- executions ----

    def start(self, options: dict[str, Any]) -> None:
        data = parse_json(options["data"], require_object=True)
        chart = find_chart(options["chart"])
        try:
            execution = stepper.start(chart, data=data, business_key=options["key"])
        except StatechartError as exc:  # BusinessKeyInUse, a chart the core now refuses, ...
            raise CommandError(str(exc)) from exc
        self.say(f"execution: {execution.pk}")
        self.say(f"session: {execution.session_id}")
        self.say(f"chart: {chart.pk} ({chart})")
        self._state(execution)

    def send(self, options: dict[str, Any]) -> None:
        name = event_name(options["event"])
        data = parse_json(options["data"])
        execution = find_execution(options["execution"])
        try:
            result = stepper.send(execution.pk, name, data)
        except StatechartError as exc:  # NeedsMigration: the refusal is in the history
            raise CommandError(str(exc)) from exc
        self._result(result)

    def cancel(self, options: dict[str, Any]) -> None:
        execution = find_execution(options["execution"])
        try:
            result = stepper.cancel(execution.pk)
        except StatechartError as exc:
            raise CommandError(str(exc)) from exc
        self._result(result)

    def _result(self, result: stepper.StepResult) -> None:
        execution = result.execution
        self.say(f"execution: {execution.pk}")
        self.say(f"disposition: {result.disposition}")
        self._state(execution)
        if not result.applied:
            self.say(f"note: the input was not applied: the execution is {execution.status}")

    def _state(self, execution: Execution) -> None:
        self.say(f"status: {execution.status}")
        self.say(f"configuration: {_states(execution.configuration)}")
        if execution.status == ExecutionStatus.COMPLETED:
            self.say(f"donedata: {json.dumps(execution.donedata)}")
        if execution.failure_reason:
            self.say(f"reason: {execution.failure_reason}")

    def show(self, options: dict[str, Any]) -> None:
        execution = find_execution(options["execution"])
        document = execution_document(execution)
        if options["as_json"]:
            self.say(json.dumps(document, indent=2, sort_keys=True))
            return
        chart = execution.chart
        self.say(f"execution: {execution.pk}")
        self.say(f"session: {execution.session_id}")
        self.say(f"chart: {chart.pk} ({chart}) sha256 {chart.content_hash}")
        self.say(f"status: {execution.status}")
        if execution.outcome:
            self.say(f"outcome: {execution.outcome}")
        if execution.failure_reason:
            self.say(f"reason: {execution.failure_reason}")
        if execution.business_key is not None:
            self.say(f"business key: {execution.business_key}")
        self.say(f"configuration: {_states(execution.configuration)}")
        self.say(f"donedata: {json.dumps(execution.donedata)}")
        self.say(f"steps: {execution.steps}")
        self.say("history:")
        for entry in document["history"]:
            self.say(
                f"  #{entry['seq']} {input_label(entry['input'])}: {entry['disposition']} -> "
                f"{entry['status_after']} [{_states(entry['configuration_after'])}]"
            )

    def replay(self, options: dict[str, Any]) -> None:
        execution = find_execution(options["execution"])
        try:
            report = replay(execution)
        except StatechartError as exc:  # e.g. the stored position is not this chart's
            raise CommandError(f"execution {execution.pk} cannot be replayed: {exc}") from exc
        if not report.ok:
            raise CommandError(f"execution {execution.pk}: {report}")
        self.say(f"execution {execution.pk}: {report}")

    def deliver(self, options: dict[str, Any]) -> None:
        delivered = stepper.deliver_pending(limit=options["limit"])
        self.say(f"delivered {delivered} message(s)")
