"""Chart.datamodel: each chart's effective datamodel, fixed when it was loaded.

Rows stored before it were loaded when a chart without a ``datamodel`` attribute got the
null datamodel: they get ``null``, unless their ``<scxml>`` declares another one (then that:
the column holds the datamodel the chart compiles with, so loading the same source again
compares like with like). New rows get what ``Chart.objects.load`` records
(``STATECHARTS["DEFAULT_DATAMODEL"]`` for a chart that declares none).
"""

import re

from django.db import migrations, models

_DECLARED = re.compile(
    r"<(?:[\w.-]+:)?scxml\b[^>]*?\sdatamodel\s*=\s*([\"'])(.*?)\1", re.DOTALL
)


def record_declared_datamodels(apps, schema_editor):  # type: ignore[no-untyped-def]
    Chart = apps.get_model("statecharts", "Chart")
    for pk, source in Chart.objects.values_list("pk", "source").iterator():
        found = _DECLARED.search(source)
        if found is not None and found.group(2) != "null":
            Chart.objects.filter(pk=pk).update(datamodel=found.group(2)[:20])


class Migration(migrations.Migration):

    dependencies = [
        ("statecharts", "0008_caller_context_and_idempotency"),
    ]

    operations = [
        migrations.AddField(
            model_name="chart",
            name="datamodel",
            field=models.CharField(
                default="null",
                editable=False,
                help_text="The chart's effective datamodel, fixed when it was loaded (its own "
                "datamodel attribute, or the DEFAULT_DATAMODEL setting of that day).",
                max_length=20,
            ),
        ),
        migrations.RunPython(record_declared_datamodels, migrations.RunPython.noop),
    ]
