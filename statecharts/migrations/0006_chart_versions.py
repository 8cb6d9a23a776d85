"""Chart versions (statecharts.versions): a loaded chart's name and version are unique
together, with the permission to load a new version of an existing chart; the history's ``migrated``
(statecharts.operations.chart_migration) and ``imported`` (statecharts.operations.transfer) dispositions.

Charts loaded before this rule may share a name without versions, or even a name and a
version: ``give_versions`` resolves them first, in creation order, so the constraint holds
and "latest" means one chart (docs/versions-and-migration.md):

- a name whose charts have no version at all: they become "1", "2", ... (the newest latest);
- a name with some versions: each chart without one becomes "0.1", "0.2", ... (below every
  real version, the newest highest among them), and a chart repeating a version another
  already has becomes "<version>.1", "<version>.2", ... (the newer after the older).

A label already taken is skipped. Unnamed and invoked charts are left alone.
"""

from django.db import migrations, models


def give_versions(apps, schema_editor):
    Chart = apps.get_model("statecharts", "Chart")
    database = schema_editor.connection.alias
    loaded = Chart.objects.using(database).filter(origin="loaded").exclude(name="")
    names = loaded.values_list("name", flat=True).distinct()
    for name in list(names):
        charts = list(loaded.filter(name=name).order_by("created", "id"))
        versioned = [c for c in charts if c.version]
        if len(charts) == 1 and versioned:
            continue
        taken: set[str] = set()
        changed = []
        if not versioned:
            for number, chart in enumerate(charts, 1):
                chart.version = str(number)
                changed.append(chart)
            Chart.objects.using(database).bulk_update(changed, ["version"])
            continue
        unversioned = []
        for chart in charts:
            if not chart.version:
                unversioned.append(chart)
            elif chart.version in taken:
                base, n = chart.version, 1
                labels = {c.version for c in charts}
                while f"{base}.{n}" in taken or f"{base}.{n}" in labels:
                    n += 1
                chart.version = f"{base}.{n}"
                taken.add(chart.version)
                changed.append(chart)
            else:
                taken.add(chart.version)
        n = 1
        for chart in unversioned:
            while f"0.{n}" in taken:
                n += 1
            chart.version = f"0.{n}"
            taken.add(chart.version)
            changed.append(chart)
        Chart.objects.using(database).bulk_update(changed, ["version"])


class Migration(migrations.Migration):

    dependencies = [
        ('statecharts', '0005_erasure'),
    ]

    operations = [
        migrations.RunPython(give_versions, migrations.RunPython.noop, elidable=False),
        migrations.AlterModelOptions(
            name='chart',
            options={'ordering': ['-created', '-id'], 'permissions': [('add_chart_version', 'Can load a new version of an existing chart')]},
        ),
        migrations.AlterField(
            model_name='historyentry',
            name='disposition',
            field=models.CharField(choices=[('applied', 'applied'), ('discarded', 'discarded (execution finished)'), ('refused', 'refused (see the reason)'), ('erased', 'personal data erased'), ('pruned', 'history pruned (retention)'), ('migrated', 'migrated to another chart version'), ('imported', 'imported from an export')], max_length=20),
        ),
        migrations.AddConstraint(
            model_name='chart',
            constraint=models.UniqueConstraint(condition=models.Q(('origin', 'loaded'), models.Q(('name', ''), _negated=True)), fields=('name', 'version'), name='statecharts_chart_unique_version'),
        ),
    ]
