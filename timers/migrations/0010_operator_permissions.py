"""The permissions of an operator's actions on pending timers and route timers (timers.operating)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('timers', '0009_timer_indexes'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='routetimer',
            options={'ordering': ['due', 'id'], 'permissions': [('fire_routetimer', 'Can fire a waiting route timer now'), ('cancel_routetimer', 'Can cancel a waiting route timer'), ('reschedule_routetimer', 'Can reschedule a waiting route timer')]},
        ),
        migrations.AlterModelOptions(
            name='timer',
            options={'ordering': ['due', 'id'], 'permissions': [('fire_timer', 'Can fire a pending timer now'), ('cancel_timer', 'Can cancel a pending timer'), ('reschedule_timer', 'Can reschedule a pending timer')]},
        ),
    ]
