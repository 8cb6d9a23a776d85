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

start, send and cancel take ``--caller-context JSON`` (recorded with the input:
``statecharts.policies.attribution``) and ``--idempotency-key KEY`` (run it again with the same key
after a lost answer and nothing is applied twice: ``statecharts.policies.idempotency``).
    replay EXECUTION                            re-drive the history; fails if it diverges
    replay --all [--chart CHART] [--status S]   the same for many executions, with a progress
                                                display; fails if any diverges
    deliver [--limit N]                         deliver outbox messages left pending
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
    health [--json]                             backlogs, sweepers, executions by status; exit
                                                0 ok, 1 warning, 2 critical

EXECUTION is an execution id or a session id. CHART is a chart id or a chart name; a name
that several charts share means the highest version of them (versions are compared as dotted
numbers), and is refused when that is not one chart (``statecharts.policies.lookups``, the rule the
API's start uses too).

The work is done by ``statecharts.stepper``, ``statecharts.operations.replay``,
``Chart.objects.load`` and the read model ``statecharts.operations.inspection`` (which ``show``
prints,
as the admin and the API show it); this module parses arguments, looks rows up and prints.
A user error is a ``CommandError``: a message and a non-zero exit, no traceback.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from statecharts import stepper
from statecharts.core import ChartError, Problem, StatechartError
from statecharts.core.parse import decode_utf8, read_document
from statecharts.exceptions import InvalidInput
from statecharts.management import migrating, transferring
from statecharts.management.progress import Progress
from statecharts.models import Chart, Execution, ExecutionStatus
from statecharts.operations import health, reencryption, retention
from statecharts.operations.inspection import Unreadable, inspect, json_text
from statecharts.operations.replay import ReplayReport, replay, replay_many
from statecharts.policies import attribution, lookups, refusals, subjects
from statecharts.policies.availability import Unavailable, as_json, available_events
from statecharts.policies.lookups import version_key as version_key  # (re-exported)
from statecharts.runtime import check_source, compile_source, read_chart_file
from statecharts.versions import VersionError

# ---- lookups and conversions (plain functions; the tests call them too) ----------------------


def find_execution(ref: str) -> Execution:
    """The execution whose id or session id is ``ref`` (``statecharts.policies.lookups``)."""
    try:
        return lookups.find_execution(ref)
    except lookups.LookupProblem as exc:
        raise CommandError(str(exc)) from None


def find_chart(ref: str) -> Chart:
    """The chart whose id is ``ref``, or the highest version of the charts named ``ref``
    (``statecharts.policies.lookups``: the API's start uses the same rule)."""
    try:
        return lookups.find_chart(ref)
    except lookups.LookupProblem as exc:
        raise CommandError(str(exc)) from None


def data_text(text: str | None) -> Any:
    """``--data`` as the stepper's gate takes it (None when the option was not given): it
    reads the text strictly and checks the value; a refusal is one line naming the option
    (:func:`refused`)."""
    return None if text is None else stepper.JSONText(text)


# The options a request's fields come from, as a refusal names them.
OPTIONS = {
    "data": "--data",
    "name": "EVENT",
    "business_key": "--key",
    "caller_context": "--caller-context",
    "idempotency_key": "--idempotency-key",
    "subject": "--subject",
    "metadata": "--metadata",
}


def caller_options(options: dict[str, Any], *, user: Any = None) -> dict[str, Any]:
    """``--caller-context`` and ``--idempotency-key`` as the stepper takes them (a
    ``CommandError`` naming the option when one is refused)."""
    try:
        given = options.get("caller_context")
        asked = stepper.CallerContextRequest(door=attribution.Door.COMMAND, given=given, user=user)
        context = stepper.admit(asked)
    except InvalidInput as exc:
        raise refused("--caller-context", exc) from None
    return {"caller_context": context, "idempotency_key": options.get("idempotency_key")}


def add_caller_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--caller-context",
        metavar="JSON",
        help="a JSON object recorded with the input (e.g. a ticket or trace id)",
    )
    parser.add_argument(
        "--idempotency-key",
        metavar="KEY",
        help="run again with the same key after a lost answer: applied once",
    )


def refused(option: str, error: InvalidInput) -> CommandError:
    """One line: the option and every problem, each with its path."""
    return CommandError(f"{option} is refused: {'; '.join(map(str, error.problems))}")


def step_refused(error: BaseException) -> CommandError:
    """A refusal as a command answers it (``statecharts.policies.refusals``): one line; input
    refused
    names the option each problem came from (``OPTIONS``). Re-raises what no row names."""
    refusal = refusals.refusal(error)
    if refusal is None:
        raise error
    if refusal.problems:
        first = refusal.problems[0]
        option = OPTIONS.get(first.field, first.field)
        if first.message.startswith("not valid JSON: "):
            return CommandError(f"{option} is not valid JSON: {first.message[16:]}")
        shown = "; ".join(str(problem) for problem in refusal.problems)
        return CommandError(f"{option} is refused: {shown}")
    if refusal.reason is refusals.Reason.NOT_PERMITTED:
        return CommandError(f"not permitted: {refusal.detail}")
    return CommandError(refusal.detail)


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


def event_name(value: str) -> str:
    """EVENT as given (control characters, reserved names: the stepper's gate refuses)."""
    if not value or any(ch.isspace() for ch in value):
        raise CommandError(f"{value!r} is not an event name (it must be non-empty, no spaces)")
    return value


def chart_label(request: stepper.ChartLoadRequest, option: str) -> None:
    """A chart's --name or --version (the stepper's gate): it must fit its column."""
    try:
        stepper.admit(request)
    except InvalidInput as exc:
        raise CommandError(f"{option} {exc.problems[0].message}") from None


def positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {value!r}")
    return number


def stage_days(value: str) -> tuple[str, float | None]:
    """``timers=7`` (days) or ``history=forever``: a retention override for ``prune``."""
    name, sep, days = value.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected STAGE=DAYS, got {value!r}")
    if days == "forever":
        return name, None
    try:
        number = float(days)
    except ValueError:
        number = -1.0
    if not number >= 0 or number == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of days or 'forever', got {days!r}")
    return name, number


def _states(configuration: Sequence[str] | Unreadable) -> str:
    if isinstance(configuration, Unreadable):
        return f"({configuration})"
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
        p.add_argument(
            "--strict",
            action="store_true",
            help="a syntax error in an expression or <script> is an error (default: the "
            "EXPRESSION_SYNTAX setting; warning)",
        )

        p = add("load", help="store a chart (the same source twice: one chart)")
        p.add_argument("path", help="an SCXML file (UTF-8)")
        p.add_argument("--name", default="", help="default: the <scxml name> attribute")
        p.add_argument(
            "--version", dest="chart_version", metavar="VERSION", default="", help="a version label"
        )
        p.add_argument(
            "--new-version",
            action="store_true",
            help="store a different source under a name a chart already has, as its next "
            "version (default label: the next whole number)",
        )

        p = add("diagram", help="write a chart's diagram (the admin's) as SVG to stdout")
        p.add_argument("chart", help="a chart id, or a chart name (its latest version)")
        p.add_argument(
            "--execution",
            help="highlight this execution's active states (an execution id or session id)",
        )

        p = add("start", help="start an execution of a chart")
        p.add_argument(
            "chart", help="a chart id, a chart name (its latest version) or NAME@VERSION"
        )
        p.add_argument("--data", help="a JSON object: values for top-level <data> ids")
        p.add_argument("--key", help="a business key, unique per chart")
        p.add_argument(
            "--subject",
            metavar="APP_LABEL.MODEL:ID",
            help="the object it is about (a model of STATECHARTS['SUBJECT_MODELS'])",
        )
        p.add_argument(
            "--as-user",
            metavar="USERNAME",
            help="start as this user: statecharts.add_execution and "
            "STATECHARTS['START_PERMISSIONS'] are checked and the user is recorded (without "
            "it the command is trusted and nothing is checked)",
        )
        add_caller_options(p)

        p = add("send", help="feed one external event to an execution")
        p.add_argument("execution", help="an execution id or session id")
        p.add_argument("event", help="the event name")
        p.add_argument("--data", help="the event data, as JSON")
        p.add_argument(
            "--as-user",
            metavar="USERNAME",
            help="send as this user: STATECHARTS['EVENT_PERMISSIONS'] are checked and the "
            "user is recorded (without it the command is trusted and nothing is checked)",
        )
        add_caller_options(p)

        p = add("show", help="an execution's state and history")
        p.add_argument("execution", help="an execution id or session id")
        p.add_argument(
            "--json", dest="as_json", action="store_true", help="print one JSON document"
        )

        p = add("cancel", help="cancel an execution")
        p.add_argument("execution", help="an execution id or session id")
        p.add_argument(
            "--as-user",
            metavar="USERNAME",
            help="cancel as this user: statecharts.change_execution and "
            "STATECHARTS['CANCEL_PERMISSIONS'] are checked and the user is recorded (without "
            "it the command is trusted and nothing is checked)",
        )
        add_caller_options(p)

        p = add("replay", help="re-drive an execution's history and compare (or many: --all)")
        p.add_argument("execution", nargs="?", help="an execution id or session id")
        p.add_argument(
            "--all",
            dest="replay_all",
            action="store_true",
            help="every execution (or those chosen by --chart / --status)",
        )
        p.add_argument(
            "--chart",
            dest="replay_chart",
            help="with --all: the executions of the charts of this name (or id)",
        )
        p.add_argument(
            "--status",
            dest="replay_status",
            choices=[s.value for s in ExecutionStatus],
            help="with --all: executions with this status",
        )

        p = add("deliver", help="deliver pending outbox messages")
        p.add_argument("--limit", type=positive_int, help="at most this many (default: a batch)")

        p = add("prune", help="delete what the retention settings no longer keep")
        p.add_argument(
            "--only",
            action="append",
            metavar="STAGE",
            help="only this stage (repeatable): executions, history, outbox, and the apps' "
            "(timers, invocations, ...)",
        )
        p.add_argument(
            "--days",
            action="append",
            type=stage_days,
            default=[],
            metavar="STAGE=DAYS",
            help="this run's retention of a stage, in days ('forever': skip it); repeatable",
        )
        p.add_argument(
            "--batch", type=positive_int, help="rows per transaction (default PRUNE_BATCH)"
        )
        p.add_argument(
            "--dry-run", action="store_true", help="count what would be deleted; delete nothing"
        )

        p = add("erase", help="erase the personal data of executions (recorded)")
        p.add_argument("execution", nargs="?", help="an execution id or session id")
        p.add_argument("--key", help="every execution with this business key instead")
        p.add_argument("--chart", help="with --key: only executions of this chart")
        p.add_argument(
            "--cancel", action="store_true", help="cancel executions still running first"
        )
        p.add_argument("--reason", default="", help="why (recorded in the history)")
        p.add_argument("--yes", action="store_true", help="do not ask for confirmation")

        p = add(
            "reencrypt",
            help="rewrite stored event data with the payload codec and key that write now",
        )
        p.add_argument(
            "--only",
            action="append",
            metavar="KIND",
            help="only this kind of row (repeatable): history, outbox, and the apps' "
            "(timers, route_timers, invocations, ...)",
        )
        p.add_argument(
            "--batch", type=positive_int, help="rows per transaction (default PRUNE_BATCH)"
        )
        p.add_argument(
            "--dry-run", action="store_true", help="count what would change; write nothing"
        )

        p = add("migrate", help="move running executions to another version of their chart")
        migrating.add_arguments(p)

        p = add("export", help="an execution as a JSON document (to move it, or for a report)")
        transferring.add_export_arguments(p)

        p = add("import", help="create an execution from an exported document")
        transferring.add_import_arguments(p)

        p = add(
            "health",
            help="timer and outbox backlogs, sweepers, executions by status (exit 0 ok, "
            "1 warning, 2 critical)",
        )
        p.add_argument(
            "--json", dest="as_json", action="store_true", help="print one JSON document"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        handlers: dict[str, Callable[[dict[str, Any]], None]] = {
            "validate": self.validate,
            "load": self.load,
            "diagram": self.diagram,
            "start": self.start,
            "send": self.send,
            "show": self.show,
            "cancel": self.cancel,
            "replay": self.replay,
            "deliver": self.deliver,
            "prune": self.prune,
            "erase": self.erase,
            "reencrypt": self.reencrypt,
            "health": self.health,
            "migrate": self.migrate,
            "export": lambda options: transferring.export(options, self.say),
            "import": lambda options: transferring.import_(options, self.say),
        }
        handlers[options["subcommand"]](options)

    def say(self, line: str = "") -> None:
        self.stdout.write(line)

    def migrate(self, options: dict[str, Any]) -> None:
        migrating.run(options, self.say, self.stdout)

    # ---- charts ----

    def validate(self, options: dict[str, Any]) -> None:
        path: str = options["path"]
        source, resources, folder = read_chart(path)
        try:
            _, warnings = check_source(
                source, resources, folder, strict=True if options["strict"] else None
            )
        except ChartError as exc:
            raise chart_refused(path, exc) from None
        for line in problem_lines(path, (), warnings):
            self.say(line)
        self.say(f"{path}: valid")

    def load(self, options: dict[str, Any]) -> None:
        name: str = options["name"]
        version: str = options["chart_version"]
        chart, existed = load_chart(
            options["path"], name=name, version=version, new_version=options["new_version"]
        )
        for line in problem_lines(options["path"], (), chart.load_warnings):
            self.say(line)
        if existed:
            self.say(f"chart {chart.pk} ({chart}) already holds this source; nothing stored")
            if (name and name != chart.name) or (version and version != chart.version):
                self.say(f"note: it keeps its name {chart.name!r} and version {chart.version!r}")
        else:
            self.say(f"chart {chart.pk} ({chart}) loaded")
        self.say(f"id: {chart.pk}")
        self.say(f"sha256: {chart.content_hash}")

    def diagram(self, options: dict[str, Any]) -> None:
        """The SVG the admin shows (``statechart diagram NAME > chart.svg``)."""
        from statecharts.diagram import render_svg

        chart = find_chart(options["chart"])
        active: Sequence[str] = ()
        if options["execution"]:
            execution = find_execution(options["execution"])
            if execution.chart_id != chart.pk:
                raise CommandError(
                    f"execution {execution.pk} runs chart {execution.chart_id}, not {chart.pk}"
                )
            states = inspect(execution).active_states
            active = () if isinstance(states, Unreadable) else states
        try:
            compiled = chart.compiled()
        except StatechartError as exc:
            raise CommandError(
                f"chart {chart.pk} cannot be compiled from its source: {exc}"
            ) from None
        self.stdout.write(render_svg(compiled, active=active), ending="\n")

    # ---- executions ----

    def start(self, options: dict[str, Any]) -> None:
        data = data_text(options["data"])
        caller = caller_options(options)
        chart = find_chart(options["chart"])
        subject = None
        if options.get("subject"):
            try:
                subject = subjects.resolve(*subjects.parse_reference(options["subject"]))
            except InvalidInput as exc:
                raise CommandError(f"--subject: {exc}") from None
        user = user_named(options["as_user"]) if options.get("as_user") else None
        request = stepper.StartRequest(
            chart=chart, data=data, business_key=options["key"], subject=subject, user=user,
            **caller,
        )
        try:
            result = stepper.submit(request)
        except Exception as exc:  # the refusal table says what each refusal answers
            raise step_refused(exc) from None
        execution = result.execution
        if result.repeated:
            self.say("note: this idempotency key started it before; nothing was started")
        self.say(f"execution: {execution.pk}")
        self.say(f"session: {execution.session_id}")
        self.say(f"chart: {chart.pk} ({chart})")
        self._state(execution)

    def send(self, options: dict[str, Any]) -> None:
        name = event_name(options["event"])
        data = data_text(options["data"])
        caller = caller_options(options)
        execution = find_execution(options["execution"])
        user = user_named(options["as_user"]) if options.get("as_user") else None
        request = stepper.EventRequest(
            execution=execution, name=name, data=data, user=user, **caller
        )
        try:
            result = stepper.submit(request)
        except Exception as exc:  # the refusal table (NeedsMigration: recorded in the history)
            raise step_refused(exc) from None
        self._result(result)

    def cancel(self, options: dict[str, Any]) -> None:
        caller = caller_options(options)
        execution = find_execution(options["execution"])
        user = user_named(options["as_user"]) if options.get("as_user") else None
        request = stepper.CancelRequest(execution=execution, user=user, **caller)
        try:
            result = stepper.submit(request)
        except Exception as exc:  # the refusal table says what each refusal answers
            raise step_refused(exc) from None
        self._result(result)

    def _result(self, result: stepper.StepResult) -> None:
        execution = result.execution
        if result.repeated:
            self.say(f"note: this idempotency key was used by step {result.entry.seq}; "
                     "nothing was applied again")
        self.say(f"execution: {execution.pk}")
        self.say(f"disposition: {result.disposition}")
        self._state(execution)
        if not result.applied:
            self.say(f"note: the input was not applied: the execution is {execution.status}")

    def _state(self, execution: Execution) -> None:
        self.say(f"status: {execution.status}")
        self.say(f"configuration: {_states(execution.configuration)}")
        if execution.status == ExecutionStatus.COMPLETED:
            self.say(f"donedata: {json_text(execution.donedata)}")
        if execution.failure_reason:
            self.say(f"reason: {execution.failure_reason}")

    def show(self, options: dict[str, Any]) -> None:
        execution = find_execution(options["execution"])
        view = inspect(execution)  # the read model the admin and the API show
        if options["as_json"]:
            document = view.document()
            document["subject"] = subjects.describe(execution)
            try:
                document["available_events"] = [
                    as_json(event) for event in available_events(execution)
                ]
            except Unavailable:
                document["available_events"] = []  # ("unreadable" says why)
            self.say(json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False))
            return
        chart = execution.chart
        self.say(f"execution: {execution.pk}")
        self.say(f"title: {view.title}")
        self.say(f"session: {execution.session_id}")
        self.say(f"chart: {chart.pk} ({chart}) sha256 {chart.content_hash}")
        self.say(f"status: {view.status}")
        if view.outcome:
            self.say(f"outcome: {view.outcome}")
        if view.failure_reason:
            self.say(f"reason: {view.failure_reason}")
        if execution.business_key is not None:
            self.say(f"business key: {execution.business_key}")
        self.say(f"configuration: {_states(view.atomic_states)}")
        self.say(f"active states: {_states(view.active_states)}")
        self.say(f"donedata: {json_text(view.donedata)}")
        if isinstance(view.datamodel, Unreadable):
            self.say(f"datamodel: ({view.datamodel})")
        else:
            self.say(f"datamodel: {json_text(view.datamodel)}")
        self.say(f"steps: {execution.steps}")
        subject = subjects.describe(execution)
        if subject is not None:
            self.say(f"about: {subject['type']} {subject['id']} ({subject['title'] or 'deleted'})")
        self.say(f"can do now: {_can_do(execution)}")
        for part, reason in view.unreadable.items():
            self.say(f"unreadable {part}: {reason}")
        for line in view.section_lines():
            self.say(line)
        self.say("history:")
        for row in view.history():
            line = (
                f"  #{row.seq} {row.input}: {row.disposition} -> "
                f"{row.status_after} [{_states(row.configuration_after)}]"
            )
            if row.caller:
                line += f"; {row.caller}"
            if row.cause is not None:
                line += f" (caused by {row.cause.text})"
            self.say(line)
            for effect in row.effects:  # what went wrong inside the chart, and where
                if effect.text.startswith("error."):
                    self.say(f"      {effect.text}")

    def replay(self, options: dict[str, Any]) -> None:
        if options["replay_all"] == bool(options["execution"]):
            raise CommandError("replay needs one execution, or --all (with --chart / --status)")
        if not options["replay_all"]:
            if options["replay_chart"] or options["replay_status"]:
                raise CommandError("--chart and --status choose executions for --all")
            self.replay_one(find_execution(options["execution"]))
            return
        executions = Execution.objects.select_related("chart").order_by("pk")
        if options["replay_chart"]:
            chosen = options["replay_chart"]
            by_name = executions.filter(chart__name=chosen)
            if by_name.exists() or not chosen.isdigit():
                executions = by_name
            else:
                executions = executions.filter(chart_id=int(chosen))
        if options["replay_status"]:
            executions = executions.filter(status=options["replay_status"])
        display = Progress(
            self.stdout, total=executions.count(), plain=options.get("verbosity", 1) >= 1
        )

        def progress(done: int, execution: Execution, report: ReplayReport | None) -> None:
            verdict = report.verdict if report is not None else "could not be replayed"
            display.update(done, f"execution {execution.pk}: {verdict}")

        summary = replay_many(executions.iterator(chunk_size=200), progress=progress)
        display.close()
        for report in summary.diverged[:20]:
            self.say(f"execution {report.execution_id}: {report}")
        for pk, reason in summary.unreplayable[:20]:
            self.say(f"execution {pk} cannot be replayed: {reason}")
        if not summary.ok:
            raise CommandError(str(summary))
        self.say(str(summary))

    def replay_one(self, execution: Execution) -> None:
        try:
            report = replay(execution)
        except StatechartError as exc:  # e.g. the stored position is not this chart's
            raise CommandError(f"execution {execution.pk} cannot be replayed: {exc}") from exc
        if report.diverged:  # (erased or pruned: said, not an error)
            raise CommandError(f"execution {execution.pk}: {report}")
        self.say(f"execution {execution.pk}: {report}")

    def deliver(self, options: dict[str, Any]) -> None:
        delivered = stepper.deliver_pending(limit=options["limit"])
        self.say(f"delivered {delivered} message(s)")

    # ---- retention and erasure ----

    def prune(self, options: dict[str, Any]) -> None:
        overrides = dict(options["days"])
        known = retention.stage_names()
        unknown = [name for name in [*overrides, *(options["only"] or [])] if name not in known]
        if unknown:
            raise CommandError(
                f"no retention stage named {', '.join(map(repr, unknown))} "
                f"(stages: {', '.join(known)})"
            )
        live = self.stdout.isatty()
        verbosity = options.get("verbosity", 1)

        def progress(stage: retention.StageReport) -> None:
            total = f" of {stage.to_delete:,}" if stage.to_delete is not None else ""
            line = f"  {stage.name}: {stage.deleted:,}{total} row(s), batch {stage.batches}"
            if live:
                self.stdout.write(line.ljust(70), ending="\r")
                self.stdout.flush()
            elif verbosity >= 2:
                self.say(line)

        from datetime import timedelta

        deltas = {
            name: None if days is None else timedelta(days=days) for name, days in overrides.items()
        }
        report = retention.prune(
            only=options["only"],
            retention=deltas,
            batch=options["batch"],
            dry_run=options["dry_run"],
            progress=progress,
        )
        if live:
            self.stdout.write(" " * 70, ending="\r")
        for stage in report.stages:
            if report.dry_run and stage.cutoff is not None:
                kept = retention.days_text(stage.retention) if stage.retention else ""
                self.say(
                    f"{stage.name}: {stage.to_delete:,} row(s) would be deleted (older than {kept})"
                )
            else:
                self.say(str(stage))
        if report.dry_run:
            self.say("dry run: nothing was deleted")
        else:
            self.say(f"deleted {report.deleted:,} row(s)")

    def reencrypt(self, options: dict[str, Any]) -> None:
        known = reencryption.kind_names()
        unknown = [name for name in options["only"] or [] if name not in known]
        if unknown:
            raise CommandError(
                f"no encoded row kind named {', '.join(map(repr, unknown))} "
                f"(kinds: {', '.join(known)})"
            )
        display = Progress(self.stdout, plain=options.get("verbosity", 1) >= 2)

        def progress(kind: reencryption.KindReport) -> None:
            display.update(
                kind.examined,
                f"{kind.name}: {kind.changed:,} re-encoded, up to id {kind.last}",
            )

        try:
            report = reencryption.reencrypt(
                only=options["only"],
                batch=options["batch"],
                dry_run=options["dry_run"],
                progress=progress,
            )
        except reencryption.ReencryptRefused as exc:
            raise CommandError(str(exc)) from exc
        display.close()
        for kind in report.kinds:
            if report.dry_run:
                self.say(
                    f"{kind.name}: {kind.examined:,} row(s) examined, {kind.changed:,} would "
                    f"be re-encoded, {kind.current:,} already current"
                    + (f", {len(kind.skipped):,} cannot be read here" if kind.skipped else "")
                )
            else:
                self.say(str(kind))
        rate = report.rate()
        speed = f" ({rate:,.0f} rows/s)" if rate is not None else ""
        verb = "would be re-encoded" if report.dry_run else "re-encoded"
        self.say(
            f"{report.changed:,} row(s) {verb} with {report.codec!r} of {report.examined:,} "
            f"examined in {report.seconds:.1f} s{speed}"
        )
        if report.dry_run:
            self.say("dry run: nothing was written")
        skipped = report.skipped
        for row in skipped[:20]:
            self.say(f"  skipped {row}")
        if skipped:
            more = " (the first 20 above)" if len(skipped) > 20 else ""
            raise CommandError(
                f"{len(skipped):,} row(s) could not be read here and were left as they are"
                f"{more}: keep their codec and key deployed, or deal with them first"
            )

    def erase(self, options: dict[str, Any]) -> None:
        key, ref = options["key"], options["execution"]
        if (key is None) == (ref is None):
            raise CommandError("give an EXECUTION or --key KEY (one of them)")
        if options["chart"] is not None and key is None:
            raise CommandError("--chart goes with --key")
        reason = options["reason"]
        try:
            stepper.admit(stepper.ErasureRequest(reason=reason))
        except InvalidInput as exc:
            raise CommandError(f"--reason {exc.problems[0].message}") from None
        if key is not None:
            chart = find_chart(options["chart"]) if options["chart"] is not None else None
            ids = retention.executions_with_key(key, chart=chart)
            if not ids:
                raise CommandError(f"no execution has the business key {key!r}")
            what = f"the {len(ids)} execution(s) with business key {key!r}"
        else:
            ids = [find_execution(ref).pk]
            what = f"execution {ids[0]}"
        everything = retention.family(ids)
        children = len(everything) - len(ids)
        if children:
            what += f" and {children} invoked child execution(s)"
        if not options["yes"]:
            self.confirm(f"Erase the personal data of {what}? This cannot be undone.")
        try:
            report = retention.erase(
                ids, reason=reason, cancel=options["cancel"], requested_by="statechart erase"
            )
        except retention.ErasureRefused as exc:
            raise CommandError(str(exc)) from None
        self.say(str(report))
        self.say(f"executions: {', '.join(map(str, report.execution_ids))}")

    def confirm(self, question: str) -> None:
        if not sys.stdin.isatty():
            raise CommandError(f"{question} Pass --yes to confirm (no terminal to ask on).")
        answer = input(f"{question} [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            raise CommandError("nothing erased")

    # ---- health ----

    def health(self, options: dict[str, Any]) -> None:
        """Print the figures; exit with the worst level's code (0 ok, 1 warning, 2 critical)."""
        report = health.assess()
        if options["as_json"]:
            self.say(json.dumps(report.document(), indent=2, ensure_ascii=False))
        else:
            self.say(f"health: {report.level.upper()} (checked {report.checked_at.isoformat()})")
            width = max((len(a.figure.name) for a in report.figures), default=0)
            for assessed in report.figures:
                figure = assessed.figure
                value = "-" if figure.value is None else f"{figure.value:,}"
                unit = f" {figure.unit}" if figure.unit and figure.value is not None else ""
                line = f"  {assessed.level:<8}  {figure.name:<{width}}  {value}{unit}"
                limits = (("warning", assessed.warning), ("critical", assessed.critical))
                bounds = [f"{name} >= {n:,}" for name, n in limits if n is not None]
                if bounds:
                    line += f"  [{', '.join(bounds)}]"
                if figure.detail:
                    line += f"  {figure.detail}"
                self.say(line)
        if report.level is not health.Level.OK:
            self.stdout.flush()
            raise SystemExit(report.level.exit_code)


def user_named(username: str) -> Any:
    """``--as-user``: the active user with that username (``USERNAME_FIELD``)."""
    from django.contrib.auth import get_user_model

    model = get_user_model()
    try:
        user = model._default_manager.get_by_natural_key(username)
    except model.DoesNotExist:
        raise CommandError(f"--as-user: there is no user {username!r}") from None
    if not user.is_active:
        raise CommandError(f"--as-user: user {username!r} is inactive")
    return user


def _can_do(execution: Execution) -> str:
    """The available events, as ``statechart show`` prints them."""
    try:
        events = available_events(execution)
    except Unavailable as exc:
        return f"(unreadable: {exc})"
    shown = [
        event.name if event.enabled else f"{event.name} ({event.availability.value})"
        for event in events
    ]
    return ", ".join(shown) or "nothing"
