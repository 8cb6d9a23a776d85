"""Route deliveries retried when the route declares they were not sent (routes.retrying): the
``retrying`` status, the attempts and the retry's due."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('routes', '0003_operator_permissions'),
    ]

    operations = [
        migrations.AddField(
            model_name='routedelivery',
            name='attempts',
            field=models.PositiveSmallIntegerField(default=1, help_text='How many times the key was claimed (retries of a not-sent one).'),
        ),
        migrations.AddField(
            model_name='routedelivery',
            name='retry_at',
            field=models.DateTimeField(blank=True, help_text='When its retry is due (status retrying).', null=True),
        ),
        migrations.AlterField(
            model_name='routedelivery',
            name='created',
            field=models.DateTimeField(help_text='When the key was written (claimed or settled), or claimed again to retry.'),
        ),
        migrations.AlterField(
            model_name='routedelivery',
            name='status',
            field=models.CharField(choices=[('claimed', 'claimed'), ('delivered', 'delivered'), ('failed', 'failed'), ('discarded', 'discarded'), ('cancelled', 'cancelled'), ('retrying', 'retrying')], max_length=12),
        ),
    ]
