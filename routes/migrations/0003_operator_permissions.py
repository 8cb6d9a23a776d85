"""The permissions of an operator's record of an in-doubt route delivery's fate (routes.operating)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('routes', '0002_inbound_address'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='routedelivery',
            options={'ordering': ['-created', '-id'], 'permissions': [('mark_delivered_routedelivery', 'Can mark an in-doubt route delivery delivered'), ('mark_failed_routedelivery', 'Can mark an in-doubt route delivery failed')], 'verbose_name_plural': 'route deliveries'},
        ),
    ]
