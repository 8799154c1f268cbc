"""Claims per thread and instance (R23): an instance consulted in a thread answers there under a
claim of its own, beside the claim of the run that consulted it."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('broker', '0014_tool_steps'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='threadclaim',
            name='one_open_claim_per_thread',
        ),
        migrations.AddConstraint(
            model_name='threadclaim',
            constraint=models.UniqueConstraint(condition=models.Q(('ended_at__isnull', True)), fields=('thread', 'instance'), name='one_open_claim_per_thread_instance'),
        ),
    ]
