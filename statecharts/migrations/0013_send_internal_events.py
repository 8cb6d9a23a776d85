"""The permission to see and send the events a chart only sends itself (issue 36): the doors
leave them out of their lists for everyone else (docs/permissions-and-available-events.md)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('statecharts', '0012_subject_index_partial'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='execution',
            options={'ordering': ['-created', '-id'], 'permissions': [('erase_execution', 'Can erase the personal data of executions'), ('send_internal_events', 'Can see and send the events a chart only sends itself')]},
        ),
    ]
