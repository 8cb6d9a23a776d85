"""Retention and erasure (statecharts.operations.retention): Execution.erased (when its personal data was
erased), the history's two marker dispositions (erased, pruned) and the permission to erase
(no SQL change for the choices and the permission)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('statecharts', '0004_portable_columns'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='execution',
            options={'ordering': ['-created', '-id'], 'permissions': [('erase_execution', 'Can erase the personal data of executions')]},
        ),
        migrations.AddField(
            model_name='execution',
            name='erased',
            field=models.DateTimeField(blank=True, help_text='When its personal data was erased (statecharts.operations.erasure.erase): its datamodel, donedata, metadata, business key and the data of its inputs are gone.', null=True),
        ),
        migrations.AlterField(
            model_name='historyentry',
            name='disposition',
            field=models.CharField(choices=[('applied', 'applied'), ('discarded', 'discarded (execution finished)'), ('refused', 'refused (see the reason)'), ('erased', 'personal data erased'), ('pruned', 'history pruned (retention)')], max_length=20),
        ),
    ]
