"""Migrating selected executions to another version of their chart
(``statecharts.operations.chart_migration``), an action of the executions' list: a form
(target version, renamed states, a registered datamodel transform) on a confirmation page that
previews the migration (a dry run) until "Preview only" is unchecked; then each execution is
migrated in a transaction of its own."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from statecharts.admin.actions import MAX_BULK_ROWS, ConfirmRow, confirm_action, confirmed, too_many
from statecharts.models import Chart, Execution
from statecharts.operations.chart_migration import (
    MigrationPlan,
    PlanError,
    Verdict,
    dry_run,
    migrate,
)
from statecharts.operations.chart_migration.applying import registered_transforms
from statecharts.operations.inspection import title_of, where


class MigrateForm(forms.Form):
    """The admin's migration of selected executions (statecharts.operations.chart_migration):
    a target version of their chart, renames, a registered transform; a preview (dry run)
    until "Preview only" is unchecked."""

    target = forms.ModelChoiceField(queryset=Chart.objects.none(), label="Target version")
    renames = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 40}),
        label="Renamed states",
        help_text="One OLD=NEW per line, for states with another id in the target (every "
        "other state keeps its id).",
    )
    transform = forms.ChoiceField(required=False, label="Datamodel transform")
    preview = forms.BooleanField(
        required=False,
        initial=True,
        label="Preview only",
        help_text="Uncheck it to migrate (each execution in a transaction of its own).",
    )

    def __init__(self, *args: Any, name: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        versions = Chart.objects.filter(origin="loaded", name=name)
        target = self.fields["target"]
        assert isinstance(target, forms.ModelChoiceField)
        target.queryset = versions
        target.initial = Chart.objects.latest_version(name)
        transform = self.fields["transform"]
        assert isinstance(transform, forms.ChoiceField)
        transform.choices = [("", "none")] + [(n, n) for n in sorted(registered_transforms())]
        self.plan: MigrationPlan | None = None

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        renames: dict[str, str] = {}
        for line in (cleaned.get("renames") or "").splitlines():
            if not line.strip():
                continue
            old, sep, new = line.partition("=")
            if not sep or not old.strip() or not new.strip():
                self.add_error("renames", f"{line.strip()!r} is not OLD=NEW")
                return cleaned
            renames[old.strip()] = new.strip()
        if cleaned.get("target") is not None:
            try:
                self.plan = MigrationPlan.make(
                    cleaned["target"], renames, cleaned.get("transform") or None
                )
            except PlanError as exc:
                self.add_error(None, str(exc))
        return cleaned


def chart_name_of(executions: Sequence[Execution]) -> str | None:
    """The name of the one chart the selected executions are of; None when they are of
    several charts or of an unnamed one (whose versions cannot be told apart)."""
    names = {e.chart.name for e in executions}
    if len(names) != 1 or "" in names:
        return None
    return names.pop()


def plan_to_preview(
    form: MigrateForm, valid: bool, executions: Sequence[Execution]
) -> MigrationPlan | None:
    """The plan the confirmation page previews: the form's, once posted and valid; on the
    first page (nothing posted yet), a migration to the chart's latest version, when one can
    be planned; none for a form with errors."""
    if valid:
        return form.plan
    if form.is_bound:
        return None
    latest = Chart.objects.latest_version(executions[0].chart.name)
    if latest is None:
        return None
    try:
        return MigrationPlan.make(latest)
    except PlanError:
        return None


def preview_rows(plan: MigrationPlan | None, executions: Sequence[Execution]) -> list[ConfirmRow]:
    """A row per execution: what the dry run of ``plan`` says of it (or where it is now,
    without a plan)."""
    if plan is None:
        return [ConfirmRow(title_of(e), where(e.status, e.configuration)) for e in executions]
    notes = {
        r.execution_id: (
            f"refused: {r.reason}"
            if r.verdict is Verdict.REFUSED
            else f"{r.verdict.value} -> {', '.join(r.configuration)}"
        )
        for r in dry_run(plan, executions)
    }
    return [ConfirmRow(title_of(e), notes.get(e.pk, "")) for e in executions]


class MigrateAction(admin.ModelAdmin):  # type: ignore[type-arg]
    """The executions' action ``migrate_selected`` (for whoever may change executions)."""

    def has_migrate_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("statecharts.change_execution"))

    @admin.action(
        description="Migrate the selected executions to another version of their chart",
        permissions=["migrate"],
    )
    def migrate_selected(
        self, request: HttpRequest, queryset: QuerySet[Execution]
    ) -> HttpResponse | None:
        executions = list(queryset.select_related("chart").order_by("pk")[: MAX_BULK_ROWS + 1])
        if too_many(self, request, executions):
            return None
        name = chart_name_of(executions)
        if name is None:
            self.message_user(
                request,
                "Select executions of one named chart to migrate them to another of its "
                "versions.",
                messages.ERROR,
            )
            return None
        form = MigrateForm(request.POST if confirmed(request) else None, name=name)
        valid = form.is_bound and form.is_valid()
        if valid and form.plan is not None and not form.cleaned_data.get("preview"):
            self._migrate(request, form.plan, executions)
            return None
        return self._confirm(request, executions, form, plan_to_preview(form, valid, executions))

    def _migrate(
        self, request: HttpRequest, plan: MigrationPlan, executions: Sequence[Execution]
    ) -> None:
        """Migrate each (a transaction of its own): a message per refusal, then how many of
        each verdict."""
        counts: Counter[str] = Counter()
        for report in migrate(plan, [e.pk for e in executions]):
            counts[report.verdict.value] += 1
            if report.verdict is Verdict.REFUSED:
                self.message_user(
                    request, f"Execution {report.execution_id}: {report.reason}", messages.ERROR
                )
        said = ", ".join(f"{n} {verdict}" for verdict, n in sorted(counts.items()))
        self.message_user(request, f"Migrate to {plan.target}: {said}.")

    def _confirm(
        self,
        request: HttpRequest,
        executions: Sequence[Execution],
        form: MigrateForm,
        plan: MigrationPlan | None,
    ) -> TemplateResponse:
        """The confirmation page: the form, and the dry run of ``plan`` row by row."""
        return confirm_action(
            self,
            request,
            action="migrate_selected",
            title="Migrate executions",
            summary=f"Migrate {len(executions)} execution(s)"
            + (f" to {plan.target}" if plan is not None else "")
            + "? The list is a preview (a dry run): nothing has changed yet. No chart code "
            "runs; pending timers stay; each migration is recorded in the history.",
            rows=preview_rows(plan, executions),
            pks=[e.pk for e in executions],
            button="Continue",
            form=form,
        )
