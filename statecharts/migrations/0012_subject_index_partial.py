"""The subject index only for executions about an object (issue 16).

Most executions have no subject, and every step's UPDATE of the execution row is not HOT (the
GIN index on ``active_states``), so each index gets an entry per step: a full index on
(subject_content_type, subject_object_id) cost one WAL record and about 60 bytes per step for
executions about nothing. Lookups by subject name a content type, which implies the condition,
so they keep using the index. Measured with ``EXPLAIN (ANALYZE, WAL)`` of a step's write:
10 -> 9 WAL records, 1,492-1,563 -> 1,428-1,499 bytes (benchmarks/JOURNAL.md).
"""


from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('contenttypes', '0002_remove_content_type_name'),
        ('statecharts', '0011_fewer_indexes'),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='execution',
            name='statecharts_execution_subject',
        ),
        migrations.AddIndex(
            model_name='execution',
            index=models.Index(condition=models.Q(('subject_content_type__isnull', False)), fields=['subject_content_type', 'subject_object_id'], name='statecharts_execution_subject'),
        ),
    ]
