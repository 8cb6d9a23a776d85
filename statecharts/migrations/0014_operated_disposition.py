"""The history's ``operated`` disposition: an operator acted on a row of the execution (timers.operating)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('statecharts', '0013_send_internal_events'),
    ]

    operations = [
        migrations.AlterField(
            model_name='historyentry',
            name='disposition',
            field=models.CharField(choices=[('applied', 'applied'), ('discarded', 'discarded (execution finished)'), ('refused', 'refused (see the reason)'), ('erased', 'personal data erased'), ('pruned', 'history pruned (retention)'), ('migrated', 'migrated to another chart version'), ('imported', 'imported from an export'), ('operated', 'an operator acted on its rows')], max_length=20),
        ),
    ]
