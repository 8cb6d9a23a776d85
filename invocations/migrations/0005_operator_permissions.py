"""The permissions of an operator's actions on invoke handlers' invocations (invocations.operating)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('invocations', '0004_tree_bounds'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='invocation',
            options={'ordering': ['parent', 'ordinal'], 'permissions': [('retry_invocation', 'Can retry a waiting handler start now'), ('cancel_invocation', 'Can cancel an open handler invocation')]},
        ),
    ]
