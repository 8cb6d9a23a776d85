"""Execution.active_states: every active state id, ancestors included, kept by the stepper in
each step's transaction, for ``Execution.objects.in_state``. Existing rows are filled from
their position; on PostgreSQL a GIN index (jsonb_path_ops) makes the containment query fast
with millions of executions."""

from typing import Any

from django.db import migrations, models


def fill(apps: Any, schema_editor: Any) -> None:
    from statecharts.core.position import decode
    from statecharts.runtime import compile_source

    Execution = apps.get_model("statecharts", "Execution")
    alias = schema_editor.connection.alias
    charts: dict[int, Any] = {}
    for execution in Execution.objects.using(alias).select_related("chart").iterator(500):
        active = list(execution.configuration or [])  # finished, or damaged: as shown
        try:
            state = decode(bytes(execution.position)).state
            if state.running:
                chart = charts.get(execution.chart_id)
                if chart is None:
                    stored = execution.chart
                    chart = charts[execution.chart_id] = compile_source(
                        stored.source, stored.resources or None, stored.folder or ""
                    )
                active = [chart.states[i].id for i in state.configuration if i != 0]
        except Exception:  # a row that cannot be read keeps what it showed
            pass
        Execution.objects.using(alias).filter(pk=execution.pk).update(active_states=active)


def gin_index(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            "CREATE INDEX IF NOT EXISTS statecharts_execution_active_states "
            "ON statecharts_execution USING gin (active_states jsonb_path_ops)"
        )


def drop_gin_index(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP INDEX IF EXISTS statecharts_execution_active_states")


class Migration(migrations.Migration):
    dependencies = [
        ("statecharts", "0002_outbox_inbox_statuses_history_and_invocations"),
    ]

    operations = [
        migrations.AddField(
            model_name="execution",
            name="active_states",
            field=models.JSONField(
                default=list,
                help_text="Every active state, ancestors included, after the last step (for "
                "queries: Execution.objects.in_state; indexed on PostgreSQL).",
            ),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
        migrations.RunPython(gin_index, drop_gin_index),
    ]
