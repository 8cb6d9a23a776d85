"""The API's door to erasure (``POST /api/executions/erase/``): the request's serializer and
the run, through ``statecharts.operations.erasure`` as the admin's erase action and
``statechart erase`` do (the personal data of the executions and of the children they
invoked; an ``erased`` entry in each one's history naming the user and the reason).

The reason is checked by the stepper's gate (``ErasureRequest``, the command's check too): a
400 by field. Executions still running are refused unless ``cancel`` (each is then cancelled
in a step of its own first): a 409 with the refusal table's ``refused`` row, nothing erased.
A request takes at most ``MAX_EXECUTIONS`` executions (before their children); more: the
command, or several requests."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from statecharts import stepper
from statecharts.api.exceptions import Refused
from statecharts.api.filters import LARGEST_ID
from statecharts.api.serializers import ChartReferenceField, GateText, StrictInput
from statecharts.exceptions import InvalidInput, printable
from statecharts.models import Chart, Execution
from statecharts.operations import erasure
from statecharts.policies import refusals
from statecharts.statuses import TERMINAL_STATUSES

MAX_EXECUTIONS = 500


class ErasureRequestSerializer(StrictInput):
    executions = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=LARGEST_ID),
        required=False,
        min_length=1,
        max_length=MAX_EXECUTIONS,
        help_text=f"These executions (ids, at most {MAX_EXECUTIONS}); or business_key.",
    )
    business_key = serializers.CharField(
        max_length=200,
        required=False,
        help_text="Every execution with this business key (of every chart, or of chart); "
        "or executions.",
    )
    chart = ChartReferenceField(
        queryset=Chart.objects.all(),
        required=False,
        help_text="With business_key: only executions of this chart (an id, a name: its "
        "latest version, or NAME@VERSION).",
    )
    reason = GateText(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        default="",
        help_text="Why (e.g. the request's reference): recorded in each execution's history "
        "with your username. At most 1000 characters.",
    )
    cancel = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Cancel the executions still running first (each in a step of its own: its "
        "onexit handlers run), then erase them. Without it, running executions are refused "
        "(409) and nothing is erased.",
    )
    dry_run = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Say which executions would be erased (the children included) and which "
        "are still running; erase nothing.",
    )

    def validate_reason(self, value: str) -> str:
        try:  # the stepper's gate, as `statechart erase --reason` is checked
            stepper.admit(stepper.ErasureRequest(reason=value))
        except InvalidInput as exc:
            raise serializers.ValidationError(exc.problems[0].message) from None
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        by_key = "business_key" in attrs
        if by_key == ("executions" in attrs):
            raise serializers.ValidationError(
                {"executions": ["give executions or business_key (one of them)"]}
            )
        if "chart" in attrs and not by_key:
            raise serializers.ValidationError({"chart": ["chart goes with business_key"]})
        return attrs


class ErasureAnswerSerializer(serializers.Serializer[Any]):
    dry_run = serializers.BooleanField()
    executions = serializers.ListField(
        child=serializers.IntegerField(),
        help_text="Erased (or, in a dry run, to be erased): those asked for and the children "
        "they invoked, ascending.",
    )
    children = serializers.IntegerField(help_text="How many of them were invoked children.")
    running = serializers.ListField(
        child=serializers.IntegerField(),
        help_text="Dry run: those still running (erased only with cancel). Empty otherwise.",
    )
    cancelled = serializers.ListField(
        child=serializers.IntegerField(), help_text="Cancelled first (cancel: true)."
    )
    rows = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="Rows changed, by stage (executions, history, timers, ...).",
    )
    summary = serializers.CharField(help_text="One line, as the admin and the command say it.")


def asked_ids(attrs: dict[str, Any]) -> list[int]:
    """The executions the request names (by id, or by business key), ascending; a 400 when
    a business key names more than :data:`MAX_EXECUTIONS`."""
    if "executions" in attrs:
        wanted = attrs["executions"]
        found = Execution.objects.filter(pk__in=wanted).order_by("pk")
        return list(found.values_list("pk", flat=True))
    ids = erasure.executions_with_key(attrs["business_key"], chart=attrs.get("chart"))
    if len(ids) > MAX_EXECUTIONS:
        raise serializers.ValidationError(
            {"business_key": [f"{len(ids)} executions have this business key, more than "
                              f"{MAX_EXECUTIONS}: use `statechart erase --key`"]}
        )  # fmt: skip
    return ids


def run(
    attrs: dict[str, Any],
    *,
    requested_by: str,
    caller_context: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Erase (or, ``dry_run``, say what would be erased); the answer
    :class:`ErasureAnswerSerializer` describes. ``ErasureRefused`` is answered as the
    refusal table's ``refused`` row (409): nothing was erased."""
    ids = asked_ids(attrs)
    if attrs["dry_run"]:
        everything = erasure.family(ids)
        running = Execution.objects.filter(pk__in=everything).exclude(status__in=TERMINAL_STATUSES)
        live = list(running.order_by("pk").values_list("pk", flat=True))
        said = f"would erase {len(everything)} execution(s)" if everything else "nothing to erase"
        if live:
            said += f"; {len(live)} still running (erased only with cancel)"
        return answer(True, everything, len(everything) - len(ids), live, (), {}, said)
    try:
        report = erasure.erase(
            ids,
            reason=attrs["reason"],
            cancel=attrs["cancel"],
            requested_by=requested_by,
            caller_context=caller_context,
        )
    except erasure.ErasureRefused as exc:
        row = refusals.BY_REASON[refusals.Reason.REFUSED]
        refusal = refusals.Refusal(row, printable(f"Nothing was erased: {exc}"))
        raise Refused(refusal) from None
    done, asked = report.execution_ids, set(ids)
    children = len([pk for pk in done if pk not in asked])
    return answer(False, done, children, (), report.cancelled, report.rows, str(report))


def answer(
    dry_run: bool,
    executions: Any,
    children: int,
    running: Any,
    cancelled: Any,
    rows: dict[str, int],
    summary: str,
) -> dict[str, Any]:
    return {
        "dry_run": dry_run,
        "executions": list(executions),
        "children": children,
        "running": list(running),
        "cancelled": list(cancelled),
        "rows": dict(rows),
        "summary": summary,
    }
