"""The API's door to chart migration (``POST /api/executions/migrate/``): the request's
serializer and the run (``statecharts.operations.chart_migration``). Each execution is migrated in
its
own transaction, as the ``statechart migrate`` command does; a request takes at most
``MAX_EXECUTIONS`` executions (larger runs: the command, or several requests)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from rest_framework import serializers

from statecharts.api.filters import LARGEST_ID
from statecharts.api.serializers import ChartReferenceField, StrictInput
from statecharts.models import Chart, Execution
from statecharts.operations.chart_migration import (
    MigrationPlan,
    PlanError,
    Verdict,
    dry_run,
    migrate,
)

MAX_EXECUTIONS = 500


class MigrationRequestSerializer(StrictInput, serializers.Serializer[Any]):
    chart = ChartReferenceField(
        queryset=Chart.objects.all(),
        help_text="The target: a chart id, a chart name (its latest version) or NAME@VERSION.",
    )
    renames = serializers.DictField(
        child=serializers.CharField(max_length=200),
        required=False,
        default=dict,
        help_text="Old state id -> new state id, for states with another id in the target "
        "(every other state keeps its id).",
    )
    transform = serializers.CharField(
        max_length=100,
        required=False,
        allow_blank=True,
        default="",
        help_text="A datamodel transform registered in STATECHARTS['MIGRATION_TRANSFORMS'].",
    )
    executions = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=LARGEST_ID),
        required=False,
        max_length=MAX_EXECUTIONS,
        help_text="Only these executions (default: every execution of the target's name "
        f"not on it yet, at most {MAX_EXECUTIONS}).",
    )
    dry_run = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Say per execution whether it maps; change nothing.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        try:
            attrs["plan"] = MigrationPlan.make(
                attrs["chart"], attrs.get("renames") or {}, attrs.get("transform") or None
            )
        except PlanError as exc:
            raise serializers.ValidationError([str(exc)]) from None
        return attrs


def run(attrs: dict[str, Any]) -> dict[str, Any]:
    """Dry run or migrate; the counts and one result per execution."""
    plan: MigrationPlan = attrs["plan"]
    chosen = attrs.get("executions")
    candidates = (
        Execution.objects.filter(pk__in=chosen).order_by("pk") if chosen else plan.executions()
    )
    ids = list(candidates.values_list("pk", flat=True)[: MAX_EXECUTIONS + 1])
    if len(ids) > MAX_EXECUTIONS:
        raise serializers.ValidationError(
            {"executions": [f"more than {MAX_EXECUTIONS} executions would be migrated: list "
                            "the ones to migrate in this request, or use `statechart migrate`"]}
        )  # fmt: skip
    if attrs["dry_run"]:
        reports = list(dry_run(plan, Execution.objects.filter(pk__in=ids).order_by("pk")))
    else:
        reports = list(migrate(plan, ids))
    counts = Counter(report.verdict.value for report in reports)
    done = Verdict.MIGRATES if attrs["dry_run"] else Verdict.MIGRATED
    target = plan.target
    return {
        "to": {"chart": target.pk, "name": target.name, "version": target.version},
        "dry_run": attrs["dry_run"],
        "counts": {
            done.value: counts[done.value],
            Verdict.UP_TO_DATE.value: counts[Verdict.UP_TO_DATE.value],
            Verdict.REFUSED.value: counts[Verdict.REFUSED.value],
        },
        "results": [report.to_dict() for report in reports],
    }
