"""A route timer row keeps the caller context of the step that scheduled it: its delivery's
telemetry joins that step's trace (docs/telemetry.md). Null on rows written before."""

import statecharts.models.fields
from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('timers', '0011_timer_expiry'),
    ]

    operations = [
        migrations.AddField(
            model_name='routetimer',
            name='context',
            field=statecharts.models.fields.PortableJSONField(blank=True, help_text='Opaque caller context of the scheduling step.', null=True),
        ),
    ]
